#include "libs/sops/bech32.h"

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"

namespace reverser::sops::bech32 {
namespace {

constexpr char kCharset[] = "qpzry9x8gf2tvdw0s3jn54khce6mua7l";

uint32_t Polymod(const std::vector<uint8_t>& values) {
  static constexpr uint32_t kGen[] = {0x3b6a57b2, 0x26508e6d, 0x1ea119fa, 0x3d4233dd, 0x2a1462b3};
  uint32_t chk = 1;
  for (uint8_t v : values) {
    const uint32_t top = chk >> 25;
    chk = ((chk & 0x1ffffff) << 5) ^ v;
    for (int i = 0; i < 5; ++i) {
      if ((top >> i) & 1) chk ^= kGen[i];
    }
  }
  return chk;
}

std::vector<uint8_t> HrpExpand(absl::string_view hrp) {
  std::vector<uint8_t> out;
  for (char c : hrp) out.push_back(static_cast<uint8_t>(c) >> 5);
  out.push_back(0);
  for (char c : hrp) out.push_back(static_cast<uint8_t>(c) & 31);
  return out;
}

// Regroups bits; `pad` adds zero bits at the end (encode), otherwise excess padding is an error.
absl::StatusOr<std::vector<uint8_t>> ConvertBits(const std::vector<uint8_t>& in, int from, int to,
                                                 bool pad) {
  uint32_t acc = 0;
  int bits = 0;
  const uint32_t maxv = (1u << to) - 1;
  std::vector<uint8_t> out;
  for (uint8_t v : in) {
    acc = (acc << from) | v;
    bits += from;
    while (bits >= to) {
      bits -= to;
      out.push_back((acc >> bits) & maxv);
    }
  }
  if (pad) {
    if (bits > 0) out.push_back((acc << (to - bits)) & maxv);
  } else if (bits >= from) {
    return absl::InvalidArgumentError("bech32: too many padding bits");
  } else if (((acc << (to - bits)) & maxv) != 0) {
    return absl::InvalidArgumentError("bech32: non-zero padding bits");
  }
  return out;
}

}  // namespace

absl::StatusOr<std::string> Encode(absl::string_view hrp, absl::string_view data) {
  if (hrp.empty()) return absl::InvalidArgumentError("bech32: empty human-readable part");
  const std::string lower = absl::AsciiStrToLower(hrp);
  const bool upper = lower != hrp;
  if (upper && absl::AsciiStrToUpper(hrp) != hrp)
    return absl::InvalidArgumentError("bech32: mixed-case human-readable part");
  std::vector<uint8_t> bytes(data.begin(), data.end());
  auto values = ConvertBits(bytes, 8, 5, true);
  if (!values.ok()) return values.status();
  std::vector<uint8_t> check = HrpExpand(lower);
  check.insert(check.end(), values->begin(), values->end());
  check.insert(check.end(), 6, 0);
  const uint32_t mod = Polymod(check) ^ 1;
  std::string out = lower + "1";
  for (uint8_t v : *values) out += kCharset[v];
  for (int i = 0; i < 6; ++i) out += kCharset[(mod >> (5 * (5 - i))) & 31];
  return upper ? absl::AsciiStrToUpper(out) : out;
}

absl::StatusOr<Decoded> Decode(absl::string_view text) {
  bool has_lower = false;
  bool has_upper = false;
  for (char c : text) {
    if (c < 33 || c > 126) return absl::InvalidArgumentError("bech32: invalid character");
    has_lower |= (c >= 'a' && c <= 'z');
    has_upper |= (c >= 'A' && c <= 'Z');
  }
  if (has_lower && has_upper) return absl::InvalidArgumentError("bech32: mixed case");
  const size_t pos = text.rfind('1');
  if (pos == absl::string_view::npos || pos < 1 || pos + 7 > text.size())
    return absl::InvalidArgumentError("bech32: separator '1' missing or misplaced");
  const std::string lower = absl::AsciiStrToLower(text);
  const std::string hrp = lower.substr(0, pos);
  std::vector<uint8_t> values;
  for (size_t i = pos + 1; i < lower.size(); ++i) {
    const char* p = std::char_traits<char>::find(kCharset, 32, lower[i]);
    if (p == nullptr) return absl::InvalidArgumentError("bech32: invalid data character");
    values.push_back(static_cast<uint8_t>(p - kCharset));
  }
  std::vector<uint8_t> check = HrpExpand(hrp);
  check.insert(check.end(), values.begin(), values.end());
  if (Polymod(check) != 1) return absl::InvalidArgumentError("bech32: invalid checksum");
  values.resize(values.size() - 6);
  auto bytes = ConvertBits(values, 5, 8, false);
  if (!bytes.ok()) return bytes.status();
  Decoded decoded;
  decoded.hrp = std::string(text.substr(0, pos));
  decoded.data.assign(bytes->begin(), bytes->end());
  return decoded;
}

}  // namespace reverser::sops::bech32
