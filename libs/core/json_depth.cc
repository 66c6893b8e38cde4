#include "libs/core/json_depth.h"

#include <cstring>

namespace reverser::core {

size_t NextQuoteOrBackslash(absl::string_view text, size_t from) {
  const char* begin = text.data() + from;
  const size_t length = text.size() - from;
  const void* quote = std::memchr(begin, '"', length);
  const size_t quote_at = quote ? static_cast<const char*>(quote) - begin : length;
  const void* backslash = std::memchr(begin, '\\', quote_at);
  const size_t at = backslash ? static_cast<const char*>(backslash) - begin : quote_at;
  return from + at;
}

int64_t JsonNestingDepth(absl::string_view text, int64_t stop_above) {
  const char* p = text.data();
  const char* const end = p + text.size();
  int64_t depth = 0;
  int64_t deepest = 0;
  while (p < end) {
    const char c = *p++;
    switch (c) {
      case '"':
        // Jump over the string: to the next quote not escaped (memchr is vectorised).
        while (p < end) {
          const void* quote = std::memchr(p, '"', static_cast<size_t>(end - p));
          if (quote == nullptr) return deepest;  // unterminated: nothing more to count
          const char* q = static_cast<const char*>(quote);
          size_t backslashes = 0;
          while (q - backslashes > p && q[-1 - static_cast<std::ptrdiff_t>(backslashes)] == '\\') {
            ++backslashes;
          }
          p = q + 1;
          if (backslashes % 2 == 0) break;  // an even run of backslashes escapes itself
        }
        break;
      case '{':
      case '[':
        if (++depth > deepest) {
          deepest = depth;
          if (deepest > stop_above) return stop_above + 1;
        }
        break;
      case '}':
      case ']':
        --depth;
        break;
      default:
        break;
    }
  }
  return deepest;
}

}  // namespace reverser::core
