#include "libs/sops/sops_yaml.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <set>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "libs/core/status.h"
#include "libs/manifest/go_yaml.h"
#include "libs/sops/text_formats.h"

namespace reverser::sops {
namespace {

constexpr int kIndent = 4;

// strconv.ParseInt / ParseUint with base 0: optional sign (ParseInt only), 0x/0o/0b prefixes,
// a bare leading 0 means octal.
bool ParseGoUnsigned(absl::string_view s, uint64_t* out) {
  int base = 10;
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    base = 16;
    s.remove_prefix(2);
  } else if (s.size() > 2 && s[0] == '0' && (s[1] == 'o' || s[1] == 'O')) {
    base = 8;
    s.remove_prefix(2);
  } else if (s.size() > 2 && s[0] == '0' && (s[1] == 'b' || s[1] == 'B')) {
    base = 2;
    s.remove_prefix(2);
  } else if (s.size() > 1 && s[0] == '0') {
    base = 8;
    s.remove_prefix(1);
  }
  if (s.empty()) return false;
  uint64_t value = 0;
  for (char c : s) {
    int digit;
    if (c >= '0' && c <= '9') {
      digit = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      digit = c - 'a' + 10;
    } else if (c >= 'A' && c <= 'F') {
      digit = c - 'A' + 10;
    } else {
      return false;
    }
    if (digit >= base) return false;
    if (value > (UINT64_MAX - digit) / base) return false;  // overflow
    value = value * base + digit;
  }
  *out = value;
  return true;
}

bool ParseGoInt(absl::string_view s, int64_t* out) {
  bool negative = false;
  if (!s.empty() && (s[0] == '+' || s[0] == '-')) {
    negative = s[0] == '-';
    s.remove_prefix(1);
  }
  uint64_t magnitude = 0;
  if (!ParseGoUnsigned(s, &magnitude)) return false;
  if (negative) {
    if (magnitude > uint64_t{1} << 63) return false;
    *out = static_cast<int64_t>(0 - magnitude);
  } else {
    if (magnitude > uint64_t{INT64_MAX}) return false;
    *out = static_cast<int64_t>(magnitude);
  }
  return true;
}

bool ParseFiniteDouble(const std::string& s, double* out) {
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size() || std::isinf(v)) return false;  // Go: ErrRange -> not a float
  *out = v;
  return true;
}

// yaml.v3 parseTimestamp: YYYY-M-D, optionally with a [Tt ] time and (for T/t) a zone.
bool LooksLikeTimestamp(absl::string_view s) {
  const std::optional<TimestampShape> shape = MatchTimestampShape(s);
  if (!shape) return false;
  const int month = std::atoi(std::string(shape->month).c_str());
  const int day = std::atoi(std::string(shape->day).c_str());
  return month >= 1 && month <= 12 && day >= 1 && day <= 31;
}

std::string RemoveUnderscores(absl::string_view s) { return absl::StrReplaceAll(s, {{"_", ""}}); }

absl::Status ParseError(const manifest::YamlNode& node, absl::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat("SOPS YAML line ", node.line, " column ", node.column, ": ", what));
}

// Converts the reader's nodes with yaml.v3's typing. The reader has bounded nodes and depth (to
// kMaxNestingDepth), so the recursion here is bounded too.
class Converter {
 public:
  absl::StatusOr<Tree> Scalar(const manifest::YamlNode& node) {
    const std::string& tag = node.tag;
    if (tag == "!" || tag == "tag:yaml.org,2002:str" ||
        (tag.empty() && !node.is_untagged_plain())) {
      return Tree(node.value);  // quoted, block or explicitly a string
    }
    if (!tag.empty()) return ParseError(node, absl::StrCat("unsupported tag ", tag));
    const PlainScalar resolved = ResolvePlain(node.value);
    switch (resolved.kind) {
      case PlainKind::kString:
        return Tree(node.value);
      case PlainKind::kNull:
        return Tree(nullptr);
      case PlainKind::kBool:
        return Tree(resolved.bool_value);
      case PlainKind::kInt:
        return Tree(resolved.int_value);
      case PlainKind::kFloat:
        return Tree(resolved.float_value);
      case PlainKind::kUint:
        return absl::UnimplementedError(
            "integer beyond int64 (sops cannot encrypt uint64 values); quote it");
      case PlainKind::kTimestamp:
        return absl::UnimplementedError(
            "unquoted timestamp (sops <= 3.9 cannot walk timestamps); quote it");
      case PlainKind::kMerge:
        return ParseError(node, "merge keys are not supported");
    }
    return ParseError(node, "unknown scalar");
  }

  // Collection tags (`!!map`, custom ones) are ignored, as sops ignores them.
  absl::StatusOr<Tree> Convert(const manifest::YamlNode& node) {
    switch (node.kind) {
      case manifest::YamlNode::Kind::kScalar:
        return Scalar(node);
      case manifest::YamlNode::Kind::kSequence: {
        Tree out = Tree::array();
        for (const manifest::YamlNode& item : node.items) {
          ASSIGN_OR_RETURN(Tree value, Convert(item));
          out.push_back(std::move(value));
        }
        return out;
      }
      case manifest::YamlNode::Kind::kMapping: {
        Tree out = Tree::object();
        // ordered_json looks keys up linearly: duplicates are found in a set instead, and
        // entries are appended without a lookup.
        absl::flat_hash_set<absl::string_view> seen;
        Tree::object_t& entries = out.get_ref<Tree::object_t&>();
        for (const manifest::YamlNode::Entry& entry : node.entries) {
          if (!entry.key.is_scalar()) return ParseError(entry.key, "non-string key");
          ASSIGN_OR_RETURN(Tree key, Scalar(entry.key));
          if (!key.is_string()) return ParseError(entry.key, "non-string key (quote it)");
          if (!seen.insert(entry.key.value).second) {
            return ParseError(entry.key, absl::StrCat("duplicate key ", entry.key.value));
          }
          ASSIGN_OR_RETURN(Tree value, Convert(entry.value));
          entries.emplace_back(key.get<std::string>(), std::move(value));
        }
        return out;
      }
    }
    return ParseError(node, "unknown node type");
  }
};

// ---- emitting ----

bool IsBreakLike(absl::string_view s, size_t i, size_t len) {
  // U+0085 (NEL), U+2028, U+2029 are line breaks to YAML 1.1 readers; U+FEFF is a BOM.
  const absl::string_view seq = s.substr(i, len);
  return seq == "\xC2\x85" || seq == "\xE2\x80\xA8" || seq == "\xE2\x80\xA9" ||
         seq == "\xEF\xBB\xBF";
}

absl::Status CheckUtf8(absl::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const size_t len = manifest::goyaml::Utf8SequenceLength(s, i);
    if (len == 0) return absl::InvalidArgumentError("string is not valid UTF-8");
    i += len;
  }
  return absl::OkStatus();
}

bool CanBePlain(absl::string_view s) {
  // Characters that begin a YAML indicator (or need care) when they come first.
  constexpr absl::string_view kBadFirst = "-?:,[]{}#&*!|>'\"%@`<= \t";
  if (s.empty() || kBadFirst.find(s[0]) != absl::string_view::npos) return false;
  if (absl::StartsWith(s, "..")) return false;  // "..." ends a document
  for (char c : s) {
    if (c < 0x20 || c > 0x7E) return false;  // control or non-ASCII: quote
  }
  if (s.back() == ' ' || s.back() == ':') return false;
  if (absl::StrContains(s, ": ") || absl::StrContains(s, " #")) return false;
  if (ResolvePlain(s).kind != PlainKind::kString) return false;
  return !manifest::goyaml::NeedsQuoting(s);  // YAML 1.1: yes/no/on/off, base-60, ...
}

std::string DoubleQuoted(absl::string_view s) {
  std::string out = "\"";
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = s[i];
    const size_t len = manifest::goyaml::Utf8SequenceLength(s, i);
    if (len > 1) {
      if (IsBreakLike(s, i, len)) {
        // Decode the (2- or 3-byte) sequence and escape it as \uXXXX.
        uint32_t cp = static_cast<unsigned char>(s[i]) & (len == 2 ? 0x1F : 0x0F);
        for (size_t k = 1; k < len; ++k)
          cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
        absl::StrAppend(&out, absl::StrFormat("\\u%04X", cp));
      } else {
        out.append(s.data() + i, len);
      }
      i += len;
      continue;
    }
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (c < 0x20 || c == 0x7F) {
          absl::StrAppend(&out, absl::StrFormat("\\x%02X", c));
        } else {
          out += static_cast<char>(c);
        }
    }
    ++i;
  }
  out += "\"";
  return out;
}

bool CanBeLiteralBlock(absl::string_view s) {
  if (s.size() < 2 || s.back() != '\n' || s[s.size() - 2] == '\n') return false;
  if (s[0] == ' ' || s[0] == '\n' || s[0] == '\t') return false;
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = s[i];
    const size_t len = manifest::goyaml::Utf8SequenceLength(s, i);
    if (len > 1 && IsBreakLike(s, i, len)) return false;
    if (len == 1 && ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7F)) return false;
    i += len == 0 ? 1 : len;
  }
  return true;
}

// A scalar and the rest of its line(s), after "key:" or "-".
absl::StatusOr<std::string> ScalarText(const Tree& value, int content_indent, bool allow_block) {
  switch (value.type()) {
    case Tree::value_t::null:
      return std::string(" null\n");
    case Tree::value_t::boolean:
      return std::string(value.get<bool>() ? " true\n" : " false\n");
    case Tree::value_t::number_integer:
      return absl::StrCat(" ", value.get<int64_t>(), "\n");
    case Tree::value_t::number_unsigned: {
      const uint64_t u = value.get<uint64_t>();
      if (u > uint64_t{INT64_MAX})
        return absl::InvalidArgumentError("integer beyond int64 cannot be encrypted by sops");
      return absl::StrCat(" ", u, "\n");
    }
    case Tree::value_t::number_float: {
      std::string text = manifest::goyaml::FormatFloat(value.get<double>());
      // Keep it a float for readers (1 -> 1.0); sops hashes both as "1".
      if (text.find_first_of(".eEn") == std::string::npos) text += ".0";
      return absl::StrCat(" ", text, "\n");
    }
    case Tree::value_t::string: {
      const std::string& s = value.get_ref<const std::string&>();
      RETURN_IF_ERROR(CheckUtf8(s));
      if (CanBePlain(s)) return absl::StrCat(" ", s, "\n");
      if (allow_block && CanBeLiteralBlock(s)) {
        std::string out = " |\n";
        const std::string indent(content_indent, ' ');
        for (absl::string_view line : absl::StrSplit(s.substr(0, s.size() - 1), '\n')) {
          absl::StrAppend(&out, line.empty() ? "" : indent, line, "\n");
        }
        return out;
      }
      return absl::StrCat(" ", DoubleQuoted(s), "\n");
    }
    default:
      return absl::InvalidArgumentError("unsupported value type");
  }
}

absl::StatusOr<std::string> KeyText(const std::string& key) {
  RETURN_IF_ERROR(CheckUtf8(key));
  return CanBePlain(key) ? key : DoubleQuoted(key);
}

absl::Status EmitSequence(const Tree& seq, int dash_col, bool inline_first, std::string* out);

// Keys at `key_col`; nested collections and block scalars at `level` + 4 (for a mapping that
// starts on a sequence item's line, `level` is the dash column).
absl::Status EmitMapping(const Tree& map, int key_col, int level, bool inline_first,
                         std::string* out) {
  bool first = true;
  for (const auto& [key, value] : map.items()) {
    if (!(first && inline_first)) out->append(key_col, ' ');
    first = false;
    ASSIGN_OR_RETURN(std::string key_text, KeyText(key));
    absl::StrAppend(out, key_text, ":");
    if (value.is_object() && !value.empty()) {
      out->append("\n");
      RETURN_IF_ERROR(EmitMapping(value, level + kIndent, level + kIndent, false, out));
    } else if (value.is_array() && !value.empty()) {
      out->append("\n");
      RETURN_IF_ERROR(EmitSequence(value, level + kIndent, false, out));
    } else if (value.is_object()) {
      out->append(" {}\n");
    } else if (value.is_array()) {
      out->append(" []\n");
    } else {
      ASSIGN_OR_RETURN(std::string text, ScalarText(value, level + kIndent, true));
      out->append(text);
    }
  }
  return absl::OkStatus();
}

absl::Status EmitSequence(const Tree& seq, int dash_col, bool inline_first, std::string* out) {
  bool first = true;
  for (const Tree& item : seq) {
    if (!(first && inline_first)) out->append(dash_col, ' ');
    first = false;
    out->append("-");
    if (item.is_object() && !item.empty()) {
      out->append(" ");
      RETURN_IF_ERROR(EmitMapping(item, dash_col + 2, dash_col, true, out));
    } else if (item.is_array() && !item.empty()) {
      out->append(" ");
      RETURN_IF_ERROR(EmitSequence(item, dash_col + 2, true, out));
    } else if (item.is_object()) {
      out->append(" {}\n");
    } else if (item.is_array()) {
      out->append(" []\n");
    } else {
      ASSIGN_OR_RETURN(std::string text, ScalarText(item, dash_col + kIndent, true));
      out->append(text);
    }
  }
  return absl::OkStatus();
}

}  // namespace

PlainScalar ResolvePlain(absl::string_view in) {
  PlainScalar r;
  static const std::set<std::string, std::less<>> kNull = {"", "~", "null", "Null", "NULL"};
  if (kNull.count(in)) {
    r.kind = PlainKind::kNull;
    return r;
  }
  if (in == "true" || in == "True" || in == "TRUE" || in == "false" || in == "False" ||
      in == "FALSE") {
    r.kind = PlainKind::kBool;
    r.bool_value = in[0] == 't' || in[0] == 'T';
    return r;
  }
  if (in == ".nan" || in == ".NaN" || in == ".NAN") {
    r.kind = PlainKind::kFloat;
    r.float_value = std::nan("");
    return r;
  }
  for (absl::string_view inf : {".inf", ".Inf", ".INF"}) {
    if (in == inf || in == absl::StrCat("+", inf) || in == absl::StrCat("-", inf)) {
      r.kind = PlainKind::kFloat;
      r.float_value = in[0] == '-' ? -HUGE_VAL : HUGE_VAL;
      return r;
    }
  }
  if (in == "<<") {
    r.kind = PlainKind::kMerge;
    return r;
  }
  const char c = in[0];
  if (c == '.') {
    // `\.[0-9]+([eE][-+]?[0-9]+)?`: the float shape, given the leading dot.
    if (manifest::goyaml::IsYamlStyleFloat(in) &&
        ParseFiniteDouble(std::string(in), &r.float_value)) {
      r.kind = PlainKind::kFloat;
    }
    return r;
  }
  if (!(c == '+' || c == '-' || (c >= '0' && c <= '9'))) return r;
  if (c >= '0' && c <= '9' && LooksLikeTimestamp(in)) {
    r.kind = PlainKind::kTimestamp;
    return r;
  }
  const std::string plain = RemoveUnderscores(in);
  if (ParseGoInt(plain, &r.int_value)) {
    r.kind = PlainKind::kInt;
    return r;
  }
  uint64_t u = 0;
  if (c != '+' && c != '-' && ParseGoUnsigned(plain, &u)) {
    r.kind = PlainKind::kUint;
    return r;
  }
  if (manifest::goyaml::IsYamlStyleFloat(plain) && ParseFiniteDouble(plain, &r.float_value)) {
    r.kind = PlainKind::kFloat;
    return r;
  }
  return r;
}

absl::StatusOr<Tree> ParseSopsYaml(absl::string_view text, const manifest::YamlReadLimits& limits) {
  manifest::YamlReadLimits bounded = limits;
  bounded.max_depth = std::min(bounded.max_depth, kMaxNestingDepth);
  absl::StatusOr<std::vector<manifest::YamlNode>> documents =
      manifest::ParseYamlNodes(text, bounded);
  if (!documents.ok()) return core::Annotate(documents.status(), "SOPS");
  if (documents->empty()) return absl::InvalidArgumentError("SOPS YAML: empty file");
  if (documents->size() > 1)
    return absl::UnimplementedError("SOPS YAML: multi-document files are not supported");
  if (!documents->front().is_mapping())
    return absl::InvalidArgumentError("SOPS YAML: the document must be a mapping");
  Converter converter;
  return converter.Convert(documents->front());
}

absl::StatusOr<std::string> EmitSopsYaml(const Tree& document) {
  if (!document.is_object())
    return absl::InvalidArgumentError("SOPS YAML: top level must be a mapping");
  if (!NestingDepthWithin(document))
    return absl::InvalidArgumentError(
        absl::StrCat("SOPS YAML: nesting deeper than ", kMaxNestingDepth, " levels"));
  std::string out;
  if (document.empty()) return std::string("{}\n");
  RETURN_IF_ERROR(EmitMapping(document, 0, 0, false, &out));
  return out;
}

}  // namespace reverser::sops
