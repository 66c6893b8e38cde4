#pragma once

// How deeply JSON from the cluster may nest, and a cheap way to measure it.
//
// Depth counts objects and arrays the way the API server does: `{}` is 1, `{"a":[1]}` is 2. The
// API server's JSON decoder (Go's encoding/json) refuses a document nested deeper than 10,000
// levels, so no object in the cluster is deeper; reverser accepts exactly that much by default
// and refuses (skips, counts, reports) anything deeper. Objects below the limit still reach
// recursive code (nlohmann's dump), which handles 10,000 levels on a default 8 MiB thread stack.

#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"

namespace reverser::core {

inline constexpr int64_t kApiObjectMaxDepth = 10000;

// The index of the first '"' or '\\' in text[from, end), or text.size(): where the plain run of
// a JSON string's content ends (found with memchr, which is vectorised).
size_t NextQuoteOrBackslash(absl::string_view text, size_t from);

// The deepest nesting of `{}` and `[]` in `text`, outside strings. Not a validator: brackets
// are only counted. Stops early and returns `stop_above + 1` once the depth passes `stop_above`.
int64_t JsonNestingDepth(absl::string_view text, int64_t stop_above = INT64_MAX - 1);

}  // namespace reverser::core
