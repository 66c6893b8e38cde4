#include "libs/manifest/yaml_reader.h"

#include <yaml.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <variant>

#include "absl/status/status.h"
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

absl::Status LimitAt(const yaml_mark_t& mark, absl::string_view message) {
  return absl::ResourceExhaustedError(absl::StrCat("YAML ", Where(mark), message));
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

class Reader {
 public:
  Reader(absl::string_view text, const YamlReadLimits& limits) : limits_(limits) {
    yaml_parser_initialize(&parser_);
    yaml_parser_set_input_string(&parser_, reinterpret_cast<const unsigned char*>(text.data()),
                                 text.size());
  }
  ~Reader() { yaml_parser_delete(&parser_); }

  absl::StatusOr<std::vector<json>> Documents() {
    std::vector<json> out;
    Event event;
    RETURN_IF_ERROR(Next(&event));  // STREAM-START
    while (true) {
      RETURN_IF_ERROR(Next(&event));
      if (event->type == YAML_STREAM_END_EVENT) return out;
      if (event->type != YAML_DOCUMENT_START_EVENT) return ErrorAt(event->start_mark, "expected a document");
      // Anchors are scoped to their document; the node counts run over the whole text.
      anchors_.clear();
      RETURN_IF_ERROR(Next(&event));
      int height = 0;
      ASSIGN_OR_RETURN(json document, Node(event, 0, &height));
      out.push_back(std::move(document));
      RETURN_IF_ERROR(Next(&event));  // DOCUMENT-END
    }
  }

 private:
  struct Anchored {
    json value;
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
      return LimitAt(mark,
                     absl::StrCat("more than ", limits_.max_nodes, " nodes (alias expansion?)"));
    }
    return absl::OkStatus();
  }

  // Converts the node starting at `event` (which it may advance past the node's end); `height`
  // receives the levels below it.
  absl::StatusOr<json> Node(Event& event, int depth, int* height) {
    if (depth > limits_.max_depth) {
      return LimitAt(event->start_mark, absl::StrCat("nested too deeply (", depth, " levels)"));
    }
    const yaml_mark_t mark = event->start_mark;
    const size_t nodes_before = nodes_;
    std::string anchor;
    json value;
    *height = 0;
    switch (event->type) {
      case YAML_ALIAS_EVENT: {
        const auto it = anchors_.find(Str(event->data.alias.anchor));
        if (it == anchors_.end()) {
          return ErrorAt(mark, absl::StrCat("unknown anchor \"", Str(event->data.alias.anchor), "\""));
        }
        // An alias nests its whole value here: a chain of aliases builds depth (and size) the
        // text does not show.
        if (depth + it->second.height > limits_.max_depth) {
          return LimitAt(mark, absl::StrCat("nested too deeply (", depth + it->second.height,
                                            " levels through an alias)"));
        }
        alias_nodes_ += it->second.nodes;
        if (alias_nodes_ > limits_.max_alias_nodes) {
          return LimitAt(mark, absl::StrCat("aliases expand to more than ", limits_.max_alias_nodes,
                                            " nodes"));
        }
        RETURN_IF_ERROR(Count(mark, it->second.nodes));
        *height = it->second.height;
        return it->second.value;
      }
      case YAML_SCALAR_EVENT: {
        RETURN_IF_ERROR(Count(mark, 1));
        anchor = Str(event->data.scalar.anchor);
        ASSIGN_OR_RETURN(value, Scalar(*event));
        break;
      }
      case YAML_SEQUENCE_START_EVENT: {
        RETURN_IF_ERROR(Count(mark, 1));
        anchor = Str(event->data.sequence_start.anchor);
        const std::string tag = Str(event->data.sequence_start.tag);
        if (!tag.empty() && tag != "!" && tag != kSeqTag) {
          return ErrorAt(mark, absl::StrCat("unsupported tag ", tag));
        }
        value = json::array();
        while (true) {
          RETURN_IF_ERROR(Next(&event));
          if (event->type == YAML_SEQUENCE_END_EVENT) break;
          int below = 0;
          ASSIGN_OR_RETURN(json item, Node(event, depth + 1, &below));
          *height = std::max(*height, below + 1);
          value.push_back(std::move(item));
        }
        break;
      }
      case YAML_MAPPING_START_EVENT: {
        RETURN_IF_ERROR(Count(mark, 1));
        anchor = Str(event->data.mapping_start.anchor);
        const std::string tag = Str(event->data.mapping_start.tag);
        if (!tag.empty() && tag != "!" && tag != kMapTag) {
          return ErrorAt(mark, absl::StrCat("unsupported tag ", tag));
        }
        value = json::object();
        while (true) {
          RETURN_IF_ERROR(Next(&event));
          if (event->type == YAML_MAPPING_END_EVENT) break;
          const yaml_mark_t key_mark = event->start_mark;
          ASSIGN_OR_RETURN(std::string key, Key(event, depth + 1));
          if (value.contains(key)) return ErrorAt(key_mark, absl::StrCat("duplicate key \"", key, "\""));
          RETURN_IF_ERROR(Next(&event));
          int below = 0;
          ASSIGN_OR_RETURN(json item, Node(event, depth + 1, &below));
          *height = std::max(*height, below + 1);
          value[key] = std::move(item);
        }
        break;
      }
      default:
        return ErrorAt(mark, "unexpected YAML event");
    }
    if (!anchor.empty()) anchors_[anchor] = {value, nodes_ - nodes_before, *height};
    return value;
  }

  // What a scalar means: quoted/block scalars and !!str are strings; plain ones resolve the way
  // go-yaml resolves them.
  absl::StatusOr<json> Scalar(const yaml_event_t& event) {
    const std::string text(reinterpret_cast<const char*>(event.data.scalar.value),
                           event.data.scalar.length);
    const std::string tag = Str(event.data.scalar.tag);
    const bool plain = event.data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
    if (tag == kStrTag || tag == "!" || (tag.empty() && !plain)) return json(goyaml::CoerceUtf8(text));
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
    const bool ok = (tag == kNullTag && value.is_null()) ||
                    (tag == kBoolTag && value.is_boolean()) ||
                    (tag == kIntTag && value.is_number_integer()) ||
                    (tag == kFloatTag && value.is_number());
    if (!ok) return ErrorAt(event.start_mark, absl::StrCat("cannot decode \"", text, "\" as ", tag));
    if (tag == kFloatTag) return json(value.get<double>());
    return value;
  }

  // Map keys become strings the way sigs.k8s.io/yaml converts them.
  absl::StatusOr<std::string> Key(Event& event, int depth) {
    const yaml_mark_t mark = event->start_mark;
    if (event->type != YAML_SCALAR_EVENT) {
      // Consume it for a clean error position, then refuse.
      return ErrorAt(mark, "map keys must be scalars");
    }
    if (event->data.scalar.style == YAML_PLAIN_SCALAR_STYLE && event->data.scalar.tag == nullptr &&
        event->data.scalar.length == 2 &&
        std::string(reinterpret_cast<const char*>(event->data.scalar.value), 2) == "<<") {
      return ErrorAt(mark, "merge keys (<<) are not supported");
    }
    int height = 0;
    ASSIGN_OR_RETURN(json value, Node(event, depth, &height));
    if (value.is_string()) return value.get<std::string>();
    if (value.is_boolean()) return std::string(value.get<bool>() ? "true" : "false");
    if (value.is_number_integer()) return std::to_string(value.get<int64_t>());
    if (value.is_number_unsigned()) return std::to_string(value.get<uint64_t>());
    if (value.is_number_float()) return goyaml::FormatFloat(value.get<double>(), 32);
    if (value.is_null()) return ErrorAt(mark, "null map keys are not supported");
    return ErrorAt(mark, absl::StrCat("unsupported map key ", value.dump()));
  }

  const YamlReadLimits limits_;
  yaml_parser_t parser_;
  std::map<std::string, Anchored> anchors_;
  size_t nodes_ = 0;        // over the whole text
  size_t alias_nodes_ = 0;  // over the whole text
};

}  // namespace

absl::StatusOr<std::vector<nlohmann::json>> ParseYamlDocuments(absl::string_view text,
                                                               const YamlReadLimits& limits) {
  Reader reader(text, limits);
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
