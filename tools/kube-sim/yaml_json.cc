#include "tools/kube-sim/yaml_json.h"

#include <regex>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "yaml-cpp/yaml.h"

namespace reverser::kubesim {
namespace {

Json ScalarToJson(const YAML::Node& node) {
  const std::string& s = node.Scalar();
  if (node.Tag() == "!" || node.Tag() == "tag:yaml.org,2002:str") return s;  // quoted
  static const std::regex kInt("[-+]?[0-9]+");
  static const std::regex kFloat("[-+]?(\\.[0-9]+|[0-9]+(\\.[0-9]*)?)([eE][-+]?[0-9]+)?");
  if (s == "null" || s == "Null" || s == "NULL" || s == "~" || s.empty()) return nullptr;
  if (s == "true" || s == "True" || s == "TRUE") return true;
  if (s == "false" || s == "False" || s == "FALSE") return false;
  if (std::regex_match(s, kInt)) {
    int64_t v;
    if (absl::SimpleAtoi(s, &v)) return v;
  }
  if (std::regex_match(s, kFloat)) {
    double d;
    if (absl::SimpleAtod(s, &d)) return d;
  }
  return s;
}

Json ToJson(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      return nullptr;
    case YAML::NodeType::Scalar:
      return ScalarToJson(node);
    case YAML::NodeType::Sequence: {
      Json a = Json::array();
      for (const auto& e : node) a.push_back(ToJson(e));
      return a;
    }
    case YAML::NodeType::Map: {
      Json o = Json::object();
      for (const auto& kv : node) o[kv.first.as<std::string>()] = ToJson(kv.second);
      return o;
    }
  }
  return nullptr;
}

}  // namespace

ApiOr<Json> ParseYamlOrJson(const std::string& text) {
  Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_discarded()) return j;
  try {
    return ToJson(YAML::Load(text));
  } catch (const std::exception& e) {
    return BadRequest(absl::StrCat("error converting YAML to JSON: ", e.what()));
  }
}

}  // namespace reverser::kubesim
