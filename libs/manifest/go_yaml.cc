#include "libs/manifest/go_yaml.h"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "libs/core/utf8.h"

namespace reverser::manifest::goyaml {
namespace {

using core::DecodeUtf8;

std::vector<char32_t> Runes(absl::string_view s) {
  std::vector<char32_t> runes;
  for (size_t i = 0; i < s.size();) {
    char32_t r = 0xFFFD;
    const size_t len = DecodeUtf8(s, i, &r);
    runes.push_back(len == 0 ? 0xFFFD : r);
    i += len == 0 ? 1 : len;
  }
  return runes;
}

// unicode.IsLetter, exact for ASCII and approximated elsewhere: the common blocks of
// punctuation, symbols, separators, emoji and private use are non-letters, the rest letters.
bool IsLetter(char32_t r) {
  if (r < 0x80) return absl::ascii_isalpha(static_cast<char>(r));
  if (r <= 0xBF) return r == 0xAA || r == 0xB5 || r == 0xBA;
  if (r == 0xD7 || r == 0xF7) return false;
  if (r >= 0x2000 && r <= 0x2BFF) {
    return r == 0x2071 || r == 0x207F || (r >= 0x2090 && r <= 0x209C) ||
           (r >= 0x2100 && r <= 0x214F && r != 0x2100 && r != 0x2101 && r != 0x2103 &&
            r != 0x2109 && r != 0x2116 && r != 0x2117 && r != 0x2118 && r != 0x2122 &&
            r != 0x2125 && r != 0x2127 && r != 0x2129 && r != 0x212E);
  }
  if (r >= 0x3000 && r <= 0x303F) return r == 0x3005 || r == 0x3006;
  if (r >= 0xE000 && r <= 0xF8FF) return false;
  if (r >= 0xFE00 && r <= 0xFE6F) return false;
  if (r == 0xFEFF || r >= 0xFFF0) return false;
  if (r >= 0xFF00 && r <= 0xFF20) return false;
  if (r >= 0x1F000 && r <= 0x1FAFF) return false;
  return true;
}
bool IsDigit(char32_t r) { return r >= '0' && r <= '9'; }

bool IsDigitIn(char c, int base) {
  if (base == 16) return absl::ascii_isxdigit(c);
  return c >= '0' && c < '0' + base;
}

enum class IntParse { kOk, kSyntax, kRange };

// strconv.ParseUint(s, 0, 64) on a string without underscores.
IntParse ParseUint0(absl::string_view s, uint64_t* out) {
  if (s.empty()) return IntParse::kSyntax;
  int base = 10;
  if (s.size() >= 2 && s[0] == '0') {
    const char p = absl::ascii_tolower(s[1]);
    if (p == 'x' || p == 'o' || p == 'b') {
      base = p == 'x' ? 16 : p == 'o' ? 8 : 2;
      s.remove_prefix(2);
    } else {
      base = 8;
      s.remove_prefix(1);
    }
    if (s.empty()) return IntParse::kSyntax;
  } else if (s == "0") {
    *out = 0;
    return IntParse::kOk;
  }
  uint64_t value = 0;
  bool overflow = false;
  for (char c : s) {
    if (!IsDigitIn(c, base)) return IntParse::kSyntax;
    const int digit = absl::ascii_isdigit(c) ? c - '0' : absl::ascii_tolower(c) - 'a' + 10;
    if (value > (UINT64_MAX - digit) / base) overflow = true;
    value = value * base + digit;
  }
  if (overflow) return IntParse::kRange;
  *out = value;
  return IntParse::kOk;
}

// strconv.ParseInt(s, 0, 64).
IntParse ParseInt0(absl::string_view s, int64_t* out) {
  bool negative = false;
  if (!s.empty() && (s[0] == '+' || s[0] == '-')) {
    negative = s[0] == '-';
    s.remove_prefix(1);
  }
  uint64_t magnitude = 0;
  const IntParse result = ParseUint0(s, &magnitude);
  if (result != IntParse::kOk) return result;
  if (!negative && magnitude > static_cast<uint64_t>(INT64_MAX)) return IntParse::kRange;
  if (negative && magnitude > static_cast<uint64_t>(INT64_MAX) + 1) return IntParse::kRange;
  *out = negative ? static_cast<int64_t>(0 - magnitude) : static_cast<int64_t>(magnitude);
  return IntParse::kOk;
}

}  // namespace

bool IsYamlStyleFloat(absl::string_view s) {
  size_t i = 0;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
  const auto digits = [&] {
    const size_t start = i;
    while (i < s.size() && absl::ascii_isdigit(s[i])) ++i;
    return i - start;
  };
  if (i < s.size() && s[i] == '.') {
    ++i;
    if (digits() == 0) return false;
  } else {
    if (digits() == 0) return false;
    if (i < s.size() && s[i] == '.') {
      ++i;
      digits();
    }
  }
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
    if (digits() == 0) return false;
  }
  return i == s.size();
}

namespace {

// strconv.ParseFloat(s, 64) for decimal syntax (the only syntax reaching it here). Fails on
// overflow, as Go's ErrRange does.
bool ParseDecimalFloat(absl::string_view s, double* out) {
  // Go accepts '_' between digits; the callers pass strings that are otherwise decimal.
  std::string text;
  char prev = 0;
  for (char c : s) {
    if (c == '_') {
      if (!absl::ascii_isdigit(prev)) return false;
    } else {
      if (prev == '_' && !absl::ascii_isdigit(c)) return false;
      text.push_back(c);
    }
    prev = c;
  }
  if (prev == '_') return false;
  if (text.empty()) return false;
  for (char c : text) {
    if (!(absl::ascii_isdigit(c) || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-')) {
      return false;
    }
  }
  errno = 0;
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size()) return false;
  if (errno == ERANGE && std::isinf(value)) return false;
  *out = value;
  return true;
}

int DaysIn(int month, int year) {
  static constexpr int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  const bool leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
  return month == 2 && leap ? 29 : kDays[month - 1];
}

// Reads 1-2 digits (Go's non-fixed getnum) into *value, within [lo, hi].
bool Num12(absl::string_view s, size_t* i, int lo, int hi, int* value) {
  if (*i >= s.size() || !absl::ascii_isdigit(s[*i])) return false;
  int v = s[(*i)++] - '0';
  if (*i < s.size() && absl::ascii_isdigit(s[*i])) v = v * 10 + (s[(*i)++] - '0');
  if (v < lo || v > hi) return false;
  *value = v;
  return true;
}

// go-yaml's parseTimestamp: "2006-1-2", "2006-1-2[Tt]15:4:5[.frac](Z|±hh:mm)",
// "2006-1-2 15:4:5[.frac]".
bool IsTimestamp(absl::string_view s) {
  if (s.size() < 5) return false;
  for (int k = 0; k < 4; ++k) {
    if (!absl::ascii_isdigit(s[k])) return false;
  }
  if (s[4] != '-') return false;
  const int year = (s[0] - '0') * 1000 + (s[1] - '0') * 100 + (s[2] - '0') * 10 + (s[3] - '0');
  size_t i = 5;
  int month, day, hour, minute, second;
  if (!Num12(s, &i, 1, 12, &month) || i >= s.size() || s[i++] != '-') return false;
  if (!Num12(s, &i, 1, 31, &day) || day > DaysIn(month, year)) return false;
  if (i == s.size()) return true;
  const char sep = s[i++];
  if (sep != 'T' && sep != 't' && sep != ' ') return false;
  if (!Num12(s, &i, 0, 23, &hour) || i >= s.size() || s[i++] != ':') return false;
  if (!Num12(s, &i, 0, 59, &minute) || i >= s.size() || s[i++] != ':') return false;
  if (!Num12(s, &i, 0, 59, &second)) return false;
  if (i + 1 < s.size() && (s[i] == '.' || s[i] == ',') && absl::ascii_isdigit(s[i + 1])) {
    ++i;
    while (i < s.size() && absl::ascii_isdigit(s[i])) ++i;
  }
  if (sep == ' ') return i == s.size();
  if (i < s.size() && s[i] == 'Z') return i + 1 == s.size();
  // ±hh:mm
  if (s.size() - i != 6 || (s[i] != '+' && s[i] != '-') || s[i + 3] != ':') return false;
  for (size_t k : {i + 1, i + 2, i + 4, i + 5}) {
    if (!absl::ascii_isdigit(s[k])) return false;
  }
  return true;
}

// `^[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?$`
bool IsBase60Float(absl::string_view s) {
  size_t i = 0;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
  if (i >= s.size() || !absl::ascii_isdigit(s[i])) return false;
  while (i < s.size() && (absl::ascii_isdigit(s[i]) || s[i] == '_')) ++i;
  int groups = 0;
  while (i < s.size() && s[i] == ':') {
    ++i;
    // [0-5]?[0-9]: one or two digits, the first of two at most 5.
    if (i >= s.size() || !absl::ascii_isdigit(s[i])) return false;
    if (i + 1 < s.size() && absl::ascii_isdigit(s[i + 1]) && s[i] <= '5') {
      i += 2;
    } else {
      i += 1;
    }
    ++groups;
  }
  if (groups == 0) return false;
  if (i < s.size() && s[i] == '.') {
    ++i;
    while (i < s.size() && (absl::ascii_isdigit(s[i]) || s[i] == '_')) ++i;
  }
  return i == s.size();
}

}  // namespace

bool KeyLess(absl::string_view a_text, absl::string_view b_text) {
  const std::vector<char32_t> a = Runes(a_text);
  const std::vector<char32_t> b = Runes(b_text);
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    if (a[i] == b[i]) continue;
    const bool al = IsLetter(a[i]);
    const bool bl = IsLetter(b[i]);
    if (al && bl) return a[i] < b[i];
    if (al || bl) return bl;
    uint64_t an = 0, bn = 0;  // Go's int64 arithmetic, wrapping
    if (a[i] == '0' || b[i] == '0') {
      for (size_t j = i; j-- > 0 && IsDigit(a[j]);) {
        if (a[j] != '0') {
          an = 1;
          bn = 1;
          break;
        }
      }
    }
    size_t ai = i, bi = i;
    for (; ai < a.size() && IsDigit(a[ai]); ++ai) an = an * 10 + (a[ai] - '0');
    for (; bi < b.size() && IsDigit(b[bi]); ++bi) bn = bn * 10 + (b[bi] - '0');
    if (an != bn) return static_cast<int64_t>(an) < static_cast<int64_t>(bn);
    if (ai != bi) return ai < bi;
    return a[i] < b[i];
  }
  return a.size() < b.size();
}

Resolved Resolve(absl::string_view in) {
  // The first byte hints at what the scalar may be (resolve.go resolveTable).
  char hint = 'N';
  if (!in.empty()) {
    const char c = in[0];
    if (c == '+' || c == '-') {
      hint = 'S';
    } else if (absl::ascii_isdigit(c)) {
      hint = 'D';
    } else if (absl::string_view("yYnNtTfFoO~").find(c) != absl::string_view::npos) {
      hint = 'M';
    } else if (c == '.') {
      hint = '.';
    } else {
      hint = 0;
    }
  }
  if (hint == 0) return std::string(in);

  static const std::pair<const char*, int> kMap[] = {
      {"y", 1},     {"Y", 1},     {"yes", 1},   {"Yes", 1},   {"YES", 1},  {"true", 1},
      {"True", 1},  {"TRUE", 1},  {"on", 1},    {"On", 1},    {"ON", 1},   {"n", 0},
      {"N", 0},     {"no", 0},    {"No", 0},    {"NO", 0},    {"false", 0}, {"False", 0},
      {"FALSE", 0}, {"off", 0},   {"Off", 0},   {"OFF", 0},   {"", 2},     {"~", 2},
      {"null", 2},  {"Null", 2},  {"NULL", 2},  {".nan", 3},  {".NaN", 3}, {".NAN", 3},
      {".inf", 3},  {".Inf", 3},  {".INF", 3},  {"+.inf", 3}, {"+.Inf", 3}, {"+.INF", 3},
      {"-.inf", 3}, {"-.Inf", 3}, {"-.INF", 3},
  };
  for (const auto& [text, meaning] : kMap) {
    if (in == text) {
      if (meaning == 2) return Null{};
      if (meaning == 3) return Special{};
      return meaning == 1;
    }
  }

  switch (hint) {
    case '.': {
      double value;
      if (ParseDecimalFloat(in, &value)) return value;
      break;
    }
    case 'D':
    case 'S': {
      if (IsTimestamp(in)) return Timestamp{};
      std::string plain;
      for (char c : in) {
        if (c != '_') plain.push_back(c);
      }
      int64_t i64;
      if (ParseInt0(plain, &i64) == IntParse::kOk) return i64;
      uint64_t u64;
      const IntParse uint_result = ParseUint0(plain, &u64);
      if (uint_result == IntParse::kOk) return u64;
      if (IsYamlStyleFloat(plain)) {
        double value;
        if (ParseDecimalFloat(plain, &value)) return value;
      }
      // "0b..." and "-0b..." are covered by ParseInt0's base prefixes.
      if (uint_result == IntParse::kRange) return BigInt{plain};
      break;
    }
    default:
      break;
  }
  return std::string(in);
}

bool NeedsQuoting(absl::string_view s) {
  return !std::holds_alternative<std::string>(Resolve(s)) || IsBase60Float(s);
}

std::string FormatFloat(double f, int bits) {
  // strconv narrows to float32 first, so a double beyond its range (a map key `1e39`) is
  // infinite here too; found by //fuzz:yaml_reader_fuzzer.
  if (bits == 32) f = static_cast<float>(f);
  if (std::isnan(f)) return ".nan";
  if (std::isinf(f)) return f > 0 ? ".inf" : "-.inf";
  char buf[64];
  const auto scientific =
      bits == 32 ? std::to_chars(buf, buf + sizeof(buf), static_cast<float>(f),
                                 std::chars_format::scientific)
                 : std::to_chars(buf, buf + sizeof(buf), f, std::chars_format::scientific);
  const std::string sci(buf, scientific.ptr);
  const size_t e = sci.find('e');
  const int exponent = std::atoi(sci.c_str() + e + 1);
  if (exponent < -4 || exponent >= 6) {
    // Go prints at least two exponent digits, as C++ does: "1e+06", "1.5e-05".
    return sci;
  }
  const auto fixed = bits == 32 ? std::to_chars(buf, buf + sizeof(buf), static_cast<float>(f),
                                                std::chars_format::fixed)
                                : std::to_chars(buf, buf + sizeof(buf), f,
                                                std::chars_format::fixed);
  return std::string(buf, fixed.ptr);
}

std::string FormatJsonFloat(double f) {
  if (std::isfinite(f) && f == std::floor(f)) {
    if (f >= -9223372036854775808.0 && f < 9223372036854775808.0) {
      return std::to_string(static_cast<int64_t>(f));
    }
    if (f >= 0 && f < 18446744073709551616.0) return std::to_string(static_cast<uint64_t>(f));
  }
  return FormatFloat(f, 64);
}

size_t Utf8SequenceLength(absl::string_view s, size_t i) {
  char32_t rune;
  return i < s.size() ? DecodeUtf8(s, i, &rune) : 0;
}

std::string CoerceUtf8(absl::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    char32_t rune;
    const size_t len = DecodeUtf8(s, i, &rune);
    if (len == 0) {
      out += "\xEF\xBF\xBD";
      ++i;
    } else {
      out.append(s.data() + i, len);
      i += len;
    }
  }
  return out;
}

}  // namespace reverser::manifest::goyaml
