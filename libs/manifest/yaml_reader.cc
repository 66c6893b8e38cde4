#include "libs/manifest/yaml_reader.h"

#include <yaml.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <variant>

#include "absl/status/status.h"
#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "libs/core/status.h"
#include "libs/manifest/go_yaml.h"

// Reads with libyaml's parser (the C original of go-yaml's), not yaml-cpp: yaml-cpp 0.7
// allocates without bound on some malformed input (",|a" exhausts memory) and decodes the \N
// and \_ escapes to invalid UTF-8, and a reader of files from Git must survive anything.

namespace reverser::manifest {
namespace {

using nlohmann::json;

constexpr char kStrTag[] = "tag:yaml.org,2002:str";
constexpr char kIntTag[] = "tag:yaml.org,2002:int";
constexpr char kFloatTag[] = "tag:yaml.org,2002:float";
constexpr char kBoolTag[] = "tag:yaml.org,2002:bool";
constexpr char kNullTag[] = "tag:yaml.org,2002:null";
constexpr char kMapTag[] = "tag:yaml.org,2002:map";
constexpr char kSeqTag[] = "tag:yaml.org,2002:seq";

std::string Where(const yaml_mark_t& mark) {
  return absl::StrCat("line ", mark.line + 1, ", column ", mark.column + 1, ": ");
}

absl::Status ErrorAt(const yaml_mark_t& mark, absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat("YAML ", Where(mark), message));
}

// Owns one parser event.
class Event {
 public:
  Event() = default;
  ~Event() { Reset(); }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  void Reset() {
    if (valid_) yaml_event_delete(&event_);
    valid_ = false;
  }
  yaml_event_t* Fill() {
    Reset();
    valid_ = true;
    return &event_;
  }
  const yaml_event_t& operator*() const { return event_; }
  const yaml_event_t* operator->() const { return &event_; }

 private:
  yaml_event_t event_{};
  bool valid_ = false;
};

std::string Str(const yaml_char_t* text) {
  return text == nullptr ? std::string() : std::string(reinterpret_cast<const char*>(text));
}

constexpr char kLimitPayload[] = "reverser.manifest.YamlLimit";

absl::Status LimitAt(const yaml_mark_t& mark, YamlLimit limit, absl::string_view message) {
  absl::Status status = absl::ResourceExhaustedError(absl::StrCat("YAML ", Where(mark), message));
  status.SetPayload(kLimitPayload, absl::Cord(std::to_string(static_cast<int>(limit))));
  return status;
}

// Values as go-yaml v2 gives them to sigs.k8s.io/yaml: JSON, plain scalars resolved.
class JsonBuilder {
 public:
  using Value = json;
  using Key = std::string;

  // Quoted/block scalars and !!str are strings; plain ones resolve the way go-yaml resolves them.
  absl::StatusOr<json> Scalar(const yaml_event_t& event) {
    const std::string text(reinterpret_cast<const char*>(event.data.scalar.value),
                           event.data.scalar.length);
    const std::string tag = Str(event.data.scalar.tag);
    const bool plain = event.data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
    if (tag == kStrTag || tag == "!" || (tag.empty() && !plain))
      return json(goyaml::CoerceUtf8(text));
    if (!tag.empty() && tag != kIntTag && tag != kFloatTag && tag != kBoolTag && tag != kNullTag) {
      return ErrorAt(event.start_mark, absl::StrCat("unsupported tag ", tag));
    }
    const goyaml::Resolved resolved = goyaml::Resolve(text);
    json value;
    if (const auto* s = std::get_if<std::string>(&resolved)) {
      value = goyaml::CoerceUtf8(*s);
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
      return ErrorAt(event.start_mark,
                     absl::StrCat("\"", text, "\" (infinity/NaN) has no JSON equivalent"));
    }
    if (tag.empty()) return value;
    // Explicitly tagged: the text must resolve to the tagged kind.
    const bool ok =
        (tag == kNullTag && value.is_null()) || (tag == kBoolTag && value.is_boolean()) ||
        (tag == kIntTag && value.is_number_integer()) || (tag == kFloatTag && value.is_number());
    if (!ok)
      return ErrorAt(event.start_mark, absl::StrCat("cannot decode \"", text, "\" as ", tag));
    if (tag == kFloatTag) return json(value.get<double>());
    return value;
  }

  absl::StatusOr<json> Sequence(const yaml_event_t& event) {
    RETURN_IF_ERROR(CheckTag(event.start_mark, Str(event.data.sequence_start.tag), kSeqTag));
    return json::array();
  }
  void Append(json& sequence, json item) { sequence.push_back(std::move(item)); }

  absl::StatusOr<json> Mapping(const yaml_event_t& event) {
    RETURN_IF_ERROR(CheckTag(event.start_mark, Str(event.data.mapping_start.tag), kMapTag));
    return json::object();
  }
  // Before the key is read: only scalars, and no merge keys.
  absl::Status CheckKeyStart(const yaml_event_t& event) {
    if (event.type != YAML_SCALAR_EVENT)
      return ErrorAt(event.start_mark, "map keys must be scalars");
    if (event.data.scalar.style == YAML_PLAIN_SCALAR_STYLE && event.data.scalar.tag == nullptr &&
        absl::string_view(reinterpret_cast<const char*>(event.data.scalar.value),
                          event.data.scalar.length) == "<<") {
      return ErrorAt(event.start_mark, "merge keys (<<) are not supported");
    }
    return absl::OkStatus();
  }
  // Map keys become strings the way sigs.k8s.io/yaml converts them.
  absl::StatusOr<std::string> MakeKey(const json& mapping, json value, const yaml_mark_t& mark) {
    std::string key;
    if (value.is_string()) {
      key = value.get<std::string>();
    } else if (value.is_boolean()) {
      key = value.get<bool>() ? "true" : "false";
    } else if (value.is_number_integer()) {
      key = std::to_string(value.get<int64_t>());
    } else if (value.is_number_unsigned()) {
      key = std::to_string(value.get<uint64_t>());
    } else if (value.is_number_float()) {
      key = goyaml::FormatFloat(value.get<double>(), 32);
    } else if (value.is_null()) {
      return ErrorAt(mark, "null map keys are not supported");
    } else {
      return ErrorAt(mark, absl::StrCat("unsupported map key ", value.dump()));
    }
    if (mapping.contains(key)) return ErrorAt(mark, absl::StrCat("duplicate key \"", key, "\""));
    return key;
  }
  void Insert(json& mapping, std::string key, json value) { mapping[key] = std::move(value); }

 private:
  static absl::Status CheckTag(const yaml_mark_t& mark, const std::string& tag,
                               absl::string_view standard) {
    if (!tag.empty() && tag != "!" && tag != standard) {
      return ErrorAt(mark, absl::StrCat("unsupported tag ", tag));
    }
    return absl::OkStatus();
  }
};

// Nodes as written, for readers with their own schema.
class NodeBuilder {
 public:
  using Value = YamlNode;
  using Key = YamlNode;

  absl::StatusOr<YamlNode> Scalar(const yaml_event_t& event) {
    YamlNode node = Start(YamlNode::Kind::kScalar, event.start_mark, event.data.scalar.tag);
    node.value.assign(reinterpret_cast<const char*>(event.data.scalar.value),
                      event.data.scalar.length);
    switch (event.data.scalar.style) {
      case YAML_SINGLE_QUOTED_SCALAR_STYLE:
        node.style = YamlNode::Style::kSingleQuoted;
        break;
      case YAML_DOUBLE_QUOTED_SCALAR_STYLE:
        node.style = YamlNode::Style::kDoubleQuoted;
        break;
      case YAML_LITERAL_SCALAR_STYLE:
        node.style = YamlNode::Style::kLiteral;
        break;
      case YAML_FOLDED_SCALAR_STYLE:
        node.style = YamlNode::Style::kFolded;
        break;
      default:
        node.style = YamlNode::Style::kPlain;
    }
    return node;
  }
  absl::StatusOr<YamlNode> Sequence(const yaml_event_t& event) {
    return Start(YamlNode::Kind::kSequence, event.start_mark, event.data.sequence_start.tag);
  }
  void Append(YamlNode& sequence, YamlNode item) { sequence.items.push_back(std::move(item)); }
  absl::StatusOr<YamlNode> Mapping(const yaml_event_t& event) {
    return Start(YamlNode::Kind::kMapping, event.start_mark, event.data.mapping_start.tag);
  }
  absl::Status CheckKeyStart(const yaml_event_t&) { return absl::OkStatus(); }
  absl::StatusOr<YamlNode> MakeKey(const YamlNode&, YamlNode key, const yaml_mark_t&) {
    return key;
  }
  void Insert(YamlNode& mapping, YamlNode key, YamlNode value) {
    mapping.entries.push_back({std::move(key), std::move(value)});
  }

 private:
  static YamlNode Start(YamlNode::Kind kind, const yaml_mark_t& mark, const yaml_char_t* tag) {
    YamlNode node;
    node.kind = kind;
    node.tag = Str(tag);
    node.line = static_cast<int>(mark.line) + 1;
    node.column = static_cast<int>(mark.column) + 1;
    return node;
  }
};

// Walks libyaml's events under the limits; the builder makes values of them.
template <typename Builder>
class Reader {
 public:
  using Value = typename Builder::Value;

  Reader(absl::string_view text, const YamlReadLimits& limits) : limits_(limits) {
    yaml_parser_initialize(&parser_);
    yaml_parser_set_input_string(&parser_, reinterpret_cast<const unsigned char*>(text.data()),
                                 text.size());
  }
  ~Reader() { yaml_parser_delete(&parser_); }

  absl::StatusOr<std::vector<Value>> Documents() {
    std::vector<Value> out;
    Event event;
    RETURN_IF_ERROR(Next(&event));  // STREAM-START
    while (true) {
      RETURN_IF_ERROR(Next(&event));
      if (event->type == YAML_STREAM_END_EVENT) return out;
      if (event->type != YAML_DOCUMENT_START_EVENT)
        return ErrorAt(event->start_mark, "expected a document");
      // Anchors are scoped to their document; the node counts run over the whole text.
      anchors_.clear();
      RETURN_IF_ERROR(Next(&event));
      int height = 0;
      ASSIGN_OR_RETURN(Value document, Node(event, 0, &height));
      out.push_back(std::move(document));
      RETURN_IF_ERROR(Next(&event));  // DOCUMENT-END
    }
  }

 private:
  struct Anchored {
    Value value;
    size_t nodes;
    int height;  // levels below the value's root
  };

  absl::Status Next(Event* event) {
    if (!yaml_parser_parse(&parser_, event->Fill())) {
      event->Reset();
      std::string message = parser_.problem != nullptr ? parser_.problem : "syntax error";
      if (parser_.context != nullptr) absl::StrAppend(&message, " (", parser_.context, ")");
      return ErrorAt(parser_.problem_mark, message);
    }
    return absl::OkStatus();
  }

  absl::Status Count(const yaml_mark_t& mark, size_t n) {
    nodes_ += n;
    if (nodes_ > limits_.max_nodes) {
      return LimitAt(mark, YamlLimit::kNodes,
                     absl::StrCat("more than ", limits_.max_nodes, " nodes (alias expansion?)"));
    }
    return absl::OkStatus();
  }

  // Converts the node starting at `event` (which it may advance past the node's end); `height`
  // receives the levels below it.
  absl::StatusOr<Value> Node(Event& event, int depth, int* height) {
    if (depth > limits_.max_depth) {
      return LimitAt(event->start_mark, YamlLimit::kDepth,
                     absl::StrCat("nested too deeply (", depth, " levels)"));
    }
    const yaml_mark_t mark = event->start_mark;
    const size_t nodes_before = nodes_;
    std::string anchor;
    Value value;
    *height = 0;
    switch (event->type) {
      case YAML_ALIAS_EVENT: {
        const auto it = anchors_.find(Str(event->data.alias.anchor));
        if (it == anchors_.end()) {
          return ErrorAt(mark,
                         absl::StrCat("unknown anchor \"", Str(event->data.alias.anchor), "\""));
        }
        // An alias nests its whole value here: a chain of aliases builds depth (and size) the
        // text does not show.
        if (depth + it->second.height > limits_.max_depth) {
          return LimitAt(mark, YamlLimit::kDepth,
                         absl::StrCat("nested too deeply (", depth + it->second.height,
                                      " levels through an alias)"));
        }
        alias_nodes_ += it->second.nodes;
        if (alias_nodes_ > limits_.max_alias_nodes) {
          return LimitAt(
              mark, YamlLimit::kAliasNodes,
              absl::StrCat("aliases expand to more than ", limits_.max_alias_nodes, " nodes"));
        }
        RETURN_IF_ERROR(Count(mark, it->second.nodes));
        *height = it->second.height;
        return it->second.value;
      }
      case YAML_SCALAR_EVENT: {
        RETURN_IF_ERROR(Count(mark, 1));
        anchor = Str(event->data.scalar.anchor);
        ASSIGN_OR_RETURN(value, builder_.Scalar(*event));
        break;
      }
      case YAML_SEQUENCE_START_EVENT: {
        RETURN_IF_ERROR(Count(mark, 1));
        anchor = Str(event->data.sequence_start.anchor);
        ASSIGN_OR_RETURN(value, builder_.Sequence(*event));
        while (true) {
          RETURN_IF_ERROR(Next(&event));
          if (event->type == YAML_SEQUENCE_END_EVENT) break;
          int below = 0;
          ASSIGN_OR_RETURN(Value item, Node(event, depth + 1, &below));
          *height = std::max(*height, below + 1);
          builder_.Append(value, std::move(item));
        }
        break;
      }
      case YAML_MAPPING_START_EVENT: {
        RETURN_IF_ERROR(Count(mark, 1));
        anchor = Str(event->data.mapping_start.anchor);
        ASSIGN_OR_RETURN(value, builder_.Mapping(*event));
        while (true) {
          RETURN_IF_ERROR(Next(&event));
          if (event->type == YAML_MAPPING_END_EVENT) break;
          const yaml_mark_t key_mark = event->start_mark;
          RETURN_IF_ERROR(builder_.CheckKeyStart(*event));
          int below = 0;
          ASSIGN_OR_RETURN(Value key_value, Node(event, depth + 1, &below));
          *height = std::max(*height, below + 1);
          ASSIGN_OR_RETURN(typename Builder::Key key,
                           builder_.MakeKey(value, std::move(key_value), key_mark));
          RETURN_IF_ERROR(Next(&event));
          ASSIGN_OR_RETURN(Value item, Node(event, depth + 1, &below));
          *height = std::max(*height, below + 1);
          builder_.Insert(value, std::move(key), std::move(item));
        }
        break;
      }
      default:
        return ErrorAt(mark, "unexpected YAML event");
    }
    if (!anchor.empty()) anchors_[anchor] = {value, nodes_ - nodes_before, *height};
    return value;
  }

  const YamlReadLimits limits_;
  Builder builder_;
  yaml_parser_t parser_;
  std::map<std::string, Anchored> anchors_;
  size_t nodes_ = 0;        // over the whole text
  size_t alias_nodes_ = 0;  // over the whole text
};

}  // namespace

std::optional<YamlLimit> ExceededYamlLimit(const absl::Status& status) {
  if (status.code() != absl::StatusCode::kResourceExhausted) return std::nullopt;
  const absl::optional<absl::Cord> payload = status.GetPayload(kLimitPayload);
  int limit = 0;
  if (!payload || !absl::SimpleAtoi(std::string(*payload), &limit)) return std::nullopt;
  return static_cast<YamlLimit>(limit);
}

const YamlNode* YamlNode::Find(absl::string_view key) const {
  for (const Entry& entry : entries) {
    if (entry.key.is_scalar() && entry.key.value == key) return &entry.value;
  }
  return nullptr;
}

absl::StatusOr<std::vector<YamlNode>> ParseYamlNodes(absl::string_view text,
                                                     const YamlReadLimits& limits) {
  Reader<NodeBuilder> reader(text, limits);
  return reader.Documents();
}

absl::StatusOr<std::vector<nlohmann::json>> ParseYamlDocuments(absl::string_view text,
                                                               const YamlReadLimits& limits) {
  Reader<JsonBuilder> reader(text, limits);
  return reader.Documents();
}

absl::StatusOr<nlohmann::json> ParseYaml(absl::string_view text, const YamlReadLimits& limits) {
  ASSIGN_OR_RETURN(std::vector<json> documents, ParseYamlDocuments(text, limits));
  if (documents.size() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected one YAML document, found ", documents.size()));
  }
  return std::move(documents.front());
}

}  // namespace reverser::manifest
