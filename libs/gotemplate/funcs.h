#pragma once

// The built-in functions of the supported text/template subset.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "libs/gotemplate/value.h"

namespace reverser::gotemplate {

// True if `name` is a function the subset provides.
bool IsBuiltinFunction(absl::string_view name);

// Calls a built-in (`and`/`or` arrive with all arguments evaluated; the subset has no side
// effects, so Go's short-circuiting is not observable). Errors are InvalidArgument with Go's
// wording where there is one. print and printf stop building once their result is longer than
// `max_result_bytes` (the caller refuses such a result).
absl::StatusOr<Value> CallBuiltin(absl::string_view name, const std::vector<Value>& args,
                                  size_t max_result_bytes = SIZE_MAX);

// fmt.Sprintf for the verbs %s %d %v %q %t %x %X %% with `-`/`0`/`+` flags and a width; mismatches
// are rendered the way Go renders them (`%!d(string=x)`, `%!s(MISSING)`, `%!(EXTRA int=1)`). Stops
// (with a result longer than `max_bytes`) once the result exceeds `max_bytes`.
std::string Sprintf(absl::string_view format, const std::vector<Value>& args,
                    size_t max_bytes = SIZE_MAX);

// fmt.Sprint: operands joined, with a space between two operands when neither is a string.
// Stops like Sprintf.
std::string Sprint(const std::vector<Value>& args, size_t max_bytes = SIZE_MAX);

}  // namespace reverser::gotemplate
