#pragma once

// Bech32 (BIP 173, checksum constant 1) as age uses it: no 90-character limit, one case per
// string, the checksum computed over the lower-cased human-readable part.

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace reverser::sops::bech32 {

struct Decoded {
  std::string hrp;   // as written (case preserved)
  std::string data;  // 8-bit bytes
};

// Encodes `data` (8-bit bytes) under `hrp`; upper-case output if `hrp` is upper case.
absl::StatusOr<std::string> Encode(absl::string_view hrp, absl::string_view data);

// Splits at the last '1', verifies the checksum and converts back to 8-bit bytes; rejects mixed
// case, bad characters and non-zero or excess padding bits.
absl::StatusOr<Decoded> Decode(absl::string_view text);

}  // namespace reverser::sops::bech32
