#include "tools/kube-sim/yaml_json.h"

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "yaml-cpp/yaml.h"

namespace reverser::kubesim {
namespace {

// yaml-cpp stops plain nesting itself (DeepRecursion), but an alias inside its own anchor
// (`a: &x [*x]`) is a cycle in its node graph, and aliases can multiply a small document:
// the conversion caps both. Without aliases every value takes at least one byte of text, so the
// node cap (a base plus one per byte) never refuses an alias-free document.
constexpr int kMaxYamlDepth = 1000;
constexpr size_t kBaseYamlNodes = 100'000;

// Runs of ASCII digits from `i`; returns how many.
size_t SkipDigits(absl::string_view s, size_t& i) {
  const size_t start = i;
  while (i < s.size() && absl::ascii_isdigit(s[i])) ++i;
  return i - start;
}

void SkipSign(absl::string_view s, size_t& i) {
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
}

// `[-+]?[0-9]+`, in linear time (plain scalars from the network can be megabytes long).
bool IsDecimalInteger(absl::string_view s) {
  size_t i = 0;
  SkipSign(s, i);
  return SkipDigits(s, i) > 0 && i == s.size();
}

// `[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?`, in linear time.
bool IsFloat(absl::string_view s) {
  size_t i = 0;
  SkipSign(s, i);
  if (i < s.size() && s[i] == '.') {
    ++i;
    if (SkipDigits(s, i) == 0) return false;
  } else {
    if (SkipDigits(s, i) == 0) return false;
    if (i < s.size() && s[i] == '.') {
      ++i;
      SkipDigits(s, i);
    }
  }
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    SkipSign(s, i);
    if (SkipDigits(s, i) == 0) return false;
  }
  return i == s.size();
}

Json ScalarToJson(const YAML::Node& node) {
  const std::string& s = node.Scalar();
  if (node.Tag() == "!" || node.Tag() == "tag:yaml.org,2002:str") return s;  // quoted
  if (s == "null" || s == "Null" || s == "NULL" || s == "~" || s.empty()) return nullptr;
  if (s == "true" || s == "True" || s == "TRUE") return true;
  if (s == "false" || s == "False" || s == "FALSE") return false;
  if (IsDecimalInteger(s)) {
    int64_t v;
    if (absl::SimpleAtoi(s, &v)) return v;
  }
  if (IsFloat(s)) {
    double d;
    if (absl::SimpleAtod(s, &d)) return d;
  }
  return s;
}

struct YamlToJson {
  size_t max_nodes = kBaseYamlNodes;
  size_t nodes = 0;

  ApiOr<Json> Convert(const YAML::Node& node, int depth) {
    if (depth > kMaxYamlDepth)
      return BadRequest(absl::StrCat("error converting YAML to JSON: yaml: exceeded max depth of ",
                                     kMaxYamlDepth));
    if (++nodes > max_nodes)
      return BadRequest(
          "error converting YAML to JSON: yaml: document contains excessive aliasing");
    switch (node.Type()) {
      case YAML::NodeType::Null:
      case YAML::NodeType::Undefined:
        return Json(nullptr);
      case YAML::NodeType::Scalar:
        return ScalarToJson(node);
      case YAML::NodeType::Sequence: {
        Json a = Json::array();
        for (const auto& e : node) {
          ApiOr<Json> item = Convert(e, depth + 1);
          if (!item.ok()) return item;
          a.push_back(std::move(*item));
        }
        return a;
      }
      case YAML::NodeType::Map: {
        Json o = Json::object();
        for (const auto& kv : node) {
          ApiOr<Json> value = Convert(kv.second, depth + 1);
          if (!value.ok()) return value;
          o[kv.first.as<std::string>()] = std::move(*value);
        }
        return o;
      }
    }
    return Json(nullptr);
  }
};

}  // namespace

bool JsonNestingWithin(absl::string_view text, int max_depth) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;  // the escaped character, whatever it is
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) return false;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return true;
}

Json ParseJson(const std::string& text) {
  if (!JsonNestingWithin(text)) return Json(Json::value_t::discarded);
  return Json::parse(text, nullptr, /*allow_exceptions=*/false);
}

std::string JsonParseError(const std::string& text) {
  if (!JsonNestingWithin(text)) return absl::StrCat("exceeded max depth of ", kMaxJsonDepth);
  try {
    Json ignored = Json::parse(text);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

ApiOr<Json> ParseYamlOrJson(const std::string& text) {
  if (!JsonNestingWithin(text)) {
    return BadRequest(
        absl::StrCat("error converting YAML to JSON: exceeded max depth of ", kMaxJsonDepth));
  }
  Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_discarded()) return j;
  try {
    YamlToJson converter;
    converter.max_nodes = kBaseYamlNodes + text.size();
    return converter.Convert(YAML::Load(text), 0);
  } catch (const std::exception& e) {
    return BadRequest(absl::StrCat("error converting YAML to JSON: ", e.what()));
  }
}

}  // namespace reverser::kubesim
