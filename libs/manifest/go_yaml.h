#pragma once

// The scalar and ordering rules of go-yaml v2 (the YAML library under sigs.k8s.io/yaml, which
// gitops-reverser and kubectl write manifests with), so files written here match theirs byte
// for byte and files read here mean what they mean to them.

#include <cstdint>
#include <string>
#include <variant>

#include "absl/strings/string_view.h"

namespace reverser::manifest::goyaml {

// go-yaml v2's map key order (sorter.go keyList.Less) for string keys: a "natural" order in
// which runs of digits compare numerically ("k9" < "k10") and non-letters sort before letters
// ("_a" < "B"). Runes outside ASCII count as letters.
bool KeyLess(absl::string_view a, absl::string_view b);

// What an untagged plain scalar means (go-yaml v2 resolve.go).
struct Null {};
struct BigInt {  // an integer beyond 64 bits; value as text
  std::string digits;
};
struct Timestamp {};  // a YAML 1.1 timestamp (go-yaml decodes it back to the string)
struct Special {};    // .inf / .nan / "<<": no JSON equivalent
using Resolved =
    std::variant<std::string, Null, bool, int64_t, uint64_t, double, BigInt, Timestamp, Special>;
Resolved Resolve(absl::string_view plain);

// Whether `s` has the shape `^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$` (the float
// syntax YAML resolvers accept), scanned in linear time: plain scalars can be megabytes long.
bool IsYamlStyleFloat(absl::string_view s);

// True when writing `s` as a plain scalar would change its meaning, so go-yaml quotes it:
// it resolves to something other than a string, or is a YAML 1.1 base-60 float ("1:20").
bool NeedsQuoting(absl::string_view s);

// strconv.FormatFloat(f, 'g', -1, bits) (bits 32 or 64), with go-yaml's .inf/-.inf/.nan.
std::string FormatFloat(double f, int bits = 64);

// How go-yaml prints a JSON number that was a float: integral values within 64 bits come back
// as integers (JSON text is re-resolved), everything else as FormatFloat.
std::string FormatJsonFloat(double f);

// Replaces invalid UTF-8 with U+FFFD, as encoding/json does before the YAML conversion.
std::string CoerceUtf8(absl::string_view s);

// The length of the valid UTF-8 sequence starting at s[i], or 0 if it is not one.
size_t Utf8SequenceLength(absl::string_view s, size_t i);

}  // namespace reverser::manifest::goyaml
