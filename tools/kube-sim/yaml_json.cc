#include "tools/kube-sim/yaml_json.h"

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "libs/manifest/yaml_reader.h"

namespace reverser::kubesim {
namespace {

// Read with libs/manifest's libyaml reader (yaml-cpp 0.7 allocates without bound on some
// malformed input), which caps depth and nodes, alias copies included. Without aliases every
// value takes at least one byte of text, so the node cap (a base plus one per byte) never
// refuses an alias-free document.
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

using manifest::YamlNode;

Json ScalarToJson(const YamlNode& node) {
  const std::string& s = node.value;
  if (node.tag == "!" || node.tag == "tag:yaml.org,2002:str" ||
      (node.tag.empty() && node.style != YamlNode::Style::kPlain)) {
    return s;  // quoted
  }
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

// The reader bounds the depth (kMaxYamlDepth), so this recursion is bounded too.
ApiOr<Json> NodeToJson(const YamlNode& node) {
  switch (node.kind) {
    case YamlNode::Kind::kScalar:
      return ScalarToJson(node);
    case YamlNode::Kind::kSequence: {
      Json a = Json::array();
      for (const YamlNode& e : node.items) {
        ApiOr<Json> item = NodeToJson(e);
        if (!item.ok()) return item;
        a.push_back(std::move(*item));
      }
      return a;
    }
    case YamlNode::Kind::kMapping: {
      Json o = Json::object();
      for (const YamlNode::Entry& entry : node.entries) {
        if (!entry.key.is_scalar()) {
          return BadRequest(absl::StrCat("error converting YAML to JSON: yaml: line ",
                                         entry.key.line, ": map keys must be scalars"));
        }
        ApiOr<Json> value = NodeToJson(entry.value);
        if (!value.ok()) return value;
        o[entry.key.value] = std::move(*value);
      }
      return o;
    }
  }
  return Json(nullptr);
}

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
  manifest::YamlReadLimits limits;
  limits.max_depth = kMaxYamlDepth;
  limits.max_nodes = kBaseYamlNodes + text.size();
  limits.max_alias_nodes = limits.max_nodes;
  absl::StatusOr<std::vector<YamlNode>> documents = manifest::ParseYamlNodes(text, limits);
  if (!documents.ok()) {
    const std::optional<manifest::YamlLimit> limit =
        manifest::ExceededYamlLimit(documents.status());
    if (limit == manifest::YamlLimit::kDepth) {
      return BadRequest(absl::StrCat("error converting YAML to JSON: yaml: exceeded max depth of ",
                                     kMaxYamlDepth));
    }
    if (limit) {
      return BadRequest(
          "error converting YAML to JSON: yaml: document contains excessive aliasing");
    }
    return BadRequest(
        absl::StrCat("error converting YAML to JSON: ", documents.status().message()));
  }
  // The first document, as sigs.k8s.io/yaml reads a body; an empty text is null.
  if (documents->empty()) return Json(nullptr);
  return NodeToJson(documents->front());
}

}  // namespace reverser::kubesim
