#pragma once

// UTF-8 decoding by Go's rules (utf8.DecodeRuneInString): the one decoder the JSON, YAML and
// SOPS writers share, because the bytes they produce must match Go's.

#include <cstddef>

#include "absl/strings/string_view.h"

namespace reverser::core {

// Decodes the sequence starting at s[i] (i < s.size()) into `*rune` and returns its length
// (1 for ASCII), or 0 when it is invalid: overlong, a surrogate, truncated or past U+10FFFF.
size_t DecodeUtf8(absl::string_view s, size_t i, char32_t* rune);

}  // namespace reverser::core
