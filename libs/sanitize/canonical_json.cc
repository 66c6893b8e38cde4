#include "libs/sanitize/canonical_json.h"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <system_error>

#include "libs/core/utf8.h"

namespace reverser::sanitize {
namespace {

using nlohmann::json;

void AppendString(const std::string& s, std::string* out) {
  static constexpr char kHex[] = "0123456789abcdef";
  out->push_back('"');
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      switch (c) {
        case '"': out->append("\\\""); break;
        case '\\': out->append("\\\\"); break;
        case '\b': out->append("\\b"); break;
        case '\f': out->append("\\f"); break;
        case '\n': out->append("\\n"); break;
        case '\r': out->append("\\r"); break;
        case '\t': out->append("\\t"); break;
        default:
          // Go escapes control characters and, by default, the HTML-significant <, >, &.
          if (c < 0x20 || c == '<' || c == '>' || c == '&') {
            out->append("\\u00");
            out->push_back(kHex[c >> 4]);
            out->push_back(kHex[c & 0xF]);
          } else {
            out->push_back(static_cast<char>(c));
          }
      }
      ++i;
      continue;
    }
    char32_t rune = 0;
    const size_t len = core::DecodeUtf8(s, i, &rune);
    if (len == 0) {
      out->append("\\ufffd");
      ++i;
    } else if (rune == 0x2028 || rune == 0x2029) {
      out->append(rune == 0x2028 ? "\\u2028" : "\\u2029");
      i += len;
    } else {
      out->append(s, i, len);
      i += len;
    }
  }
  out->push_back('"');
}

// strconv.AppendFloat(f, fmt, -1, 64) plus encoding/json's exponent clean-up.
void AppendFloat(double f, std::string* out) {
  char buf[64];
  const double abs = std::fabs(f);
  const bool exponent = abs != 0 && (abs < 1e-6 || abs >= 1e21);
  const auto result = std::to_chars(buf, buf + sizeof(buf), f,
                                    exponent ? std::chars_format::scientific
                                             : std::chars_format::fixed);
  std::string text(buf, result.ptr);
  if (exponent) {
    // C++ and Go both print at least two exponent digits; Go's JSON encoder then trims
    // "e-07" to "e-7" (and keeps "e+21").
    const size_t n = text.size();
    if (n >= 4 && text[n - 4] == 'e' && text[n - 3] == '-' && text[n - 2] == '0') {
      text.erase(n - 2, 1);
    }
  }
  out->append(text);
}

void Append(const json& value, std::string* out) {
  switch (value.type()) {
    case json::value_t::null:
    case json::value_t::discarded:
    case json::value_t::binary:  // never produced by the JSON parser
      out->append("null");
      break;
    case json::value_t::boolean:
      out->append(value.get<bool>() ? "true" : "false");
      break;
    case json::value_t::number_integer:
      out->append(std::to_string(value.get<int64_t>()));
      break;
    case json::value_t::number_unsigned:
      out->append(std::to_string(value.get<uint64_t>()));
      break;
    case json::value_t::number_float:
      AppendFloat(value.get<double>(), out);
      break;
    case json::value_t::string:
      AppendString(value.get_ref<const std::string&>(), out);
      break;
    case json::value_t::array: {
      out->push_back('[');
      bool first = true;
      for (const json& item : value) {
        if (!first) out->push_back(',');
        first = false;
        Append(item, out);
      }
      out->push_back(']');
      break;
    }
    case json::value_t::object: {
      // nlohmann::json keeps object keys in a std::map: already bytewise sorted, like Go.
      out->push_back('{');
      bool first = true;
      for (const auto& [key, item] : value.items()) {
        if (!first) out->push_back(',');
        first = false;
        AppendString(key, out);
        out->push_back(':');
        Append(item, out);
      }
      out->push_back('}');
      break;
    }
  }
}

}  // namespace

std::string CanonicalJson(const nlohmann::json& value) {
  std::string out;
  Append(value, &out);
  return out;
}

}  // namespace reverser::sanitize
