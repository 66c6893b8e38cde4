#include "libs/manifest/yaml_reader.h"

#include <cstdlib>
#include <variant>

#include <yaml-cpp/yaml.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "libs/core/status.h"
#include "libs/manifest/go_yaml.h"

namespace reverser::manifest {
namespace {

using nlohmann::json;

constexpr int kMaxDepth = 512;
constexpr size_t kMaxNodes = 1000000;

constexpr char kStrTag[] = "tag:yaml.org,2002:str";
constexpr char kIntTag[] = "tag:yaml.org,2002:int";
constexpr char kFloatTag[] = "tag:yaml.org,2002:float";
constexpr char kBoolTag[] = "tag:yaml.org,2002:bool";
constexpr char kNullTag[] = "tag:yaml.org,2002:null";
constexpr char kMapTag[] = "tag:yaml.org,2002:map";
constexpr char kSeqTag[] = "tag:yaml.org,2002:seq";

std::string Where(const YAML::Mark& mark) {
  if (mark.is_null()) return "";
  return absl::StrCat("line ", mark.line + 1, ", column ", mark.column + 1, ": ");
}

// yaml-cpp decodes the double-quoted escapes \N and \_ to the lone bytes 0x85 / 0xA0 instead
// of the UTF-8 for U+0085 / U+00A0 (libyaml writes NEL as \N). Repair those, and make any other
// invalid byte U+FFFD so the JSON always holds valid UTF-8.
std::string RepairUtf8(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const size_t len = goyaml::Utf8SequenceLength(text, i);
    if (len > 0) {
      out.append(text, i, len);
      i += len;
      continue;
    }
    const unsigned char byte = static_cast<unsigned char>(text[i++]);
    if (byte == 0x85 || byte == 0xA0) {
      out.push_back('\xC2');
      out.push_back(static_cast<char>(byte));
    } else {
      out += "\xEF\xBF\xBD";
    }
  }
  return out;
}

absl::Status Error(const YAML::Node& node, absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat("YAML ", Where(node.Mark()), message));
}

class Converter {
 public:
  absl::StatusOr<json> Convert(const YAML::Node& node, int depth) {
    if (++nodes_ > kMaxNodes) {
      return Error(node, absl::StrCat("more than ", kMaxNodes, " nodes (alias expansion?)"));
    }
    if (depth > kMaxDepth) return Error(node, absl::StrCat("nested deeper than ", kMaxDepth));
    const std::string& tag = node.Tag();
    switch (node.Type()) {
      case YAML::NodeType::Undefined:
      case YAML::NodeType::Null:
        if (tag == kStrTag) return json("");
        return json(nullptr);
      case YAML::NodeType::Scalar:
        return ScalarValue(node);
      case YAML::NodeType::Sequence: {
        if (tag != "?" && tag != "!" && tag != kSeqTag && !tag.empty()) {
          return Error(node, absl::StrCat("unsupported tag ", tag));
        }
        json out = json::array();
        for (const YAML::Node& item : node) {
          ASSIGN_OR_RETURN(json value, Convert(item, depth + 1));
          out.push_back(std::move(value));
        }
        return out;
      }
      case YAML::NodeType::Map: {
        if (tag != "?" && tag != "!" && tag != kMapTag && !tag.empty()) {
          return Error(node, absl::StrCat("unsupported tag ", tag));
        }
        json out = json::object();
        for (const auto& entry : node) {
          ASSIGN_OR_RETURN(std::string key, Key(entry.first));
          if (out.contains(key)) return Error(entry.first, absl::StrCat("duplicate key \"", key, "\""));
          ASSIGN_OR_RETURN(json value, Convert(entry.second, depth + 1));
          out[key] = std::move(value);
        }
        return out;
      }
    }
    return Error(node, "unknown node type");
  }

 private:
  // What a scalar means: quoted/block scalars and !!str are strings; plain ones resolve.
  absl::StatusOr<json> ScalarValue(const YAML::Node& node) {
    const std::string& tag = node.Tag();
    const std::string text = RepairUtf8(node.Scalar());
    if (tag == "!" || tag == kStrTag) return json(text);
    if (tag != "?" && tag != kIntTag && tag != kFloatTag && tag != kBoolTag && tag != kNullTag) {
      return Error(node, absl::StrCat("unsupported tag ", tag));
    }
    const goyaml::Resolved resolved = goyaml::Resolve(text);
    json value;
    if (const auto* s = std::get_if<std::string>(&resolved)) {
      value = *s;
    } else if (std::holds_alternative<goyaml::Timestamp>(resolved)) {
      value = text;  // go-yaml hands timestamps to interface{} targets as the original string
    } else if (std::holds_alternative<goyaml::Null>(resolved)) {
      value = nullptr;
    } else if (const auto* b = std::get_if<bool>(&resolved)) {
      value = *b;
    } else if (const auto* i = std::get_if<int64_t>(&resolved)) {
      value = *i;
    } else if (const auto* u = std::get_if<uint64_t>(&resolved)) {
      value = *u;
    } else if (const auto* d = std::get_if<double>(&resolved)) {
      value = *d;
    } else if (const auto* big = std::get_if<goyaml::BigInt>(&resolved)) {
      // Beyond 64 bits: Kubernetes' JSON decoding would make this a float64 as well.
      value = std::strtod(big->digits.c_str(), nullptr);
    } else {
      return Error(node, absl::StrCat("\"", text, "\" (infinity/NaN) has no JSON equivalent"));
    }
    if (tag == "?") return value;
    // Explicitly tagged: the text must resolve to the tagged kind.
    const bool ok = (tag == kNullTag && value.is_null()) || (tag == kBoolTag && value.is_boolean()) ||
                    (tag == kIntTag && value.is_number_integer()) ||
                    (tag == kFloatTag && value.is_number());
    if (!ok) return Error(node, absl::StrCat("cannot decode \"", text, "\" as ", tag));
    if (tag == kFloatTag) return json(value.get<double>());
    return value;
  }

  // Map keys become strings the way sigs.k8s.io/yaml converts them.
  absl::StatusOr<std::string> Key(const YAML::Node& node) {
    if (node.Type() == YAML::NodeType::Null) return Error(node, "null map keys are not supported");
    if (node.Type() != YAML::NodeType::Scalar) {
      return Error(node, "map keys must be scalars");
    }
    if (node.Tag() == "?" && node.Scalar() == "<<") {
      return Error(node, "merge keys (<<) are not supported");
    }
    ASSIGN_OR_RETURN(json value, ScalarValue(node));
    if (value.is_string()) return value.get<std::string>();
    if (value.is_boolean()) return std::string(value.get<bool>() ? "true" : "false");
    if (value.is_number_integer()) return std::to_string(value.get<int64_t>());
    if (value.is_number_unsigned()) return std::to_string(value.get<uint64_t>());
    if (value.is_number_float()) return goyaml::FormatFloat(value.get<double>(), 32);
    return Error(node, absl::StrCat("unsupported map key ", value.dump()));
  }

  size_t nodes_ = 0;
};

absl::StatusOr<std::vector<YAML::Node>> LoadAll(absl::string_view text) {
  try {
    return YAML::LoadAll(std::string(text));
  } catch (const YAML::ParserException& e) {
    return absl::InvalidArgumentError(absl::StrCat("YAML ", Where(e.mark), e.msg));
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("YAML: ", e.what()));
  }
}

}  // namespace

absl::StatusOr<std::vector<nlohmann::json>> ParseYamlDocuments(absl::string_view text) {
  ASSIGN_OR_RETURN(std::vector<YAML::Node> documents, LoadAll(text));
  std::vector<json> out;
  try {
    for (const YAML::Node& document : documents) {
      Converter converter;
      ASSIGN_OR_RETURN(json value, converter.Convert(document, 0));
      out.push_back(std::move(value));
    }
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("YAML: ", e.what()));
  }
  return out;
}

absl::StatusOr<nlohmann::json> ParseYaml(absl::string_view text) {
  ASSIGN_OR_RETURN(std::vector<json> documents, ParseYamlDocuments(text));
  if (documents.size() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected one YAML document, found ", documents.size()));
  }
  return std::move(documents.front());
}

}  // namespace reverser::manifest
