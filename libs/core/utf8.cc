#include "libs/core/utf8.h"

namespace reverser::core {

size_t DecodeUtf8(absl::string_view s, size_t i, char32_t* rune) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char b0 = byte(i);
  if (b0 < 0x80) {
    *rune = b0;
    return 1;
  }
  size_t len;
  char32_t r, min;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    len = 2, r = b0 & 0x1F, min = 0x80;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    len = 3, r = b0 & 0x0F, min = 0x800;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    len = 4, r = b0 & 0x07, min = 0x10000;
  } else {
    return 0;
  }
  if (i + len > s.size()) return 0;
  for (size_t k = 1; k < len; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
    r = (r << 6) | (byte(i + k) & 0x3F);
  }
  if (r < min || r > 0x10FFFF || (r >= 0xD800 && r <= 0xDFFF)) return 0;
  *rune = r;
  return len;
}

}  // namespace reverser::core
