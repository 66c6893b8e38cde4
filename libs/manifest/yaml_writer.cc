#include "libs/manifest/yaml_writer.h"

#include <yaml.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "libs/core/status.h"
#include "libs/manifest/go_yaml.h"

namespace reverser::manifest {
namespace {

using nlohmann::json;

// Deep nesting would recurse without bound; real manifests stay far below this.
constexpr int kMaxDepth = 512;

// Drives libyaml's emitter — the C original go-yaml v2's emitter was ported from — with the
// events and scalar styles go-yaml's encoder would produce.
class Emitter {
 public:
  Emitter() {
    yaml_emitter_initialize(&emitter_);
    yaml_emitter_set_output(&emitter_, &Emitter::Write, &out_);
    yaml_emitter_set_unicode(&emitter_, 1);
    yaml_emitter_set_width(&emitter_, 80);
    yaml_emitter_set_indent(&emitter_, 2);
  }
  ~Emitter() { yaml_emitter_delete(&emitter_); }
  Emitter(const Emitter&) = delete;
  Emitter& operator=(const Emitter&) = delete;

  absl::Status BeginDocument() {
    yaml_event_t event;
    yaml_stream_start_event_initialize(&event, YAML_UTF8_ENCODING);
    RETURN_IF_ERROR(Emit(&event));
    yaml_document_start_event_initialize(&event, nullptr, nullptr, nullptr, 1);
    return Emit(&event);
  }

  absl::StatusOr<std::string> EndDocument() {
    yaml_event_t event;
    yaml_document_end_event_initialize(&event, 1);
    RETURN_IF_ERROR(Emit(&event));
    // go-yaml clears open_ended before the stream end, so it never writes a "..." terminator
    // (libyaml would after a keep-chomped `|+` block at the very end).
    emitter_.open_ended = 0;
    yaml_stream_end_event_initialize(&event);
    RETURN_IF_ERROR(Emit(&event));
    if (!yaml_emitter_flush(&emitter_)) return Problem();
    return std::move(out_);
  }

  absl::Status BeginMapping() {
    yaml_event_t event;
    yaml_mapping_start_event_initialize(&event, nullptr, nullptr, 1, YAML_BLOCK_MAPPING_STYLE);
    return Emit(&event);
  }
  absl::Status EndMapping() {
    yaml_event_t event;
    yaml_mapping_end_event_initialize(&event);
    return Emit(&event);
  }

  // A string scalar, styled as go-yaml's encoder.stringv does; libyaml then downgrades the
  // style when the text does not allow it (plain → single-quoted → double-quoted).
  absl::Status String(const std::string& raw, bool is_key = false) {
    const std::string text = goyaml::CoerceUtf8(raw);
    yaml_scalar_style_t style;
    if (text.find("\xE2\x80\xA8") != std::string::npos ||
        text.find("\xE2\x80\xA9") != std::string::npos) {
      // U+2028/U+2029 are YAML 1.1 line breaks: go-yaml writes them raw inside quotes, where a
      // reader folds them into spaces. Double quotes escape them (\L, \P) and keep the text.
      style = YAML_DOUBLE_QUOTED_SCALAR_STYLE;
    } else if (text.find('\n') != std::string::npos) {
      style = YAML_LITERAL_SCALAR_STYLE;
    } else if (!goyaml::NeedsQuoting(text) && !(is_key && text == "<<")) {
      // (A plain `<<` key is a YAML merge key; go-yaml writes it plain and then cannot read
      // its own output back. Quoting it is the one deliberate byte difference.)
      style = YAML_PLAIN_SCALAR_STYLE;
    } else {
      style = YAML_DOUBLE_QUOTED_SCALAR_STYLE;
    }
    return Scalar(text, style);
  }

  absl::Status Value(const json& value, int depth) {
    if (depth > kMaxDepth) {
      return absl::InvalidArgumentError(
          absl::StrCat("value nested deeper than ", kMaxDepth, " levels"));
    }
    switch (value.type()) {
      case json::value_t::object: {
        RETURN_IF_ERROR(BeginMapping());
        std::vector<const std::string*> keys;
        for (const auto& item : value.items()) keys.push_back(&item.key());
        // go-yaml's natural order is not transitive for some key sets ("0123" < "0x1F" <
        // "1.5" < "0123"); Go's own output is then nondeterministic. A merge sort stays safe
        // (std::sort may run off the range with such a comparator) and matches Go wherever Go
        // is deterministic.
        std::stable_sort(keys.begin(), keys.end(), [](const std::string* a, const std::string* b) {
          return goyaml::KeyLess(*a, *b);
        });
        for (const std::string* key : keys) {
          RETURN_IF_ERROR(String(*key, /*is_key=*/true));
          RETURN_IF_ERROR(Value(value.at(*key), depth + 1));
        }
        return EndMapping();
      }
      case json::value_t::array: {
        yaml_event_t event;
        yaml_sequence_start_event_initialize(&event, nullptr, nullptr, 1,
                                             YAML_BLOCK_SEQUENCE_STYLE);
        RETURN_IF_ERROR(Emit(&event));
        for (const json& item : value) RETURN_IF_ERROR(Value(item, depth + 1));
        yaml_sequence_end_event_initialize(&event);
        return Emit(&event);
      }
      case json::value_t::string:
        return String(value.get_ref<const std::string&>());
      case json::value_t::boolean:
        return Scalar(value.get<bool>() ? "true" : "false", YAML_PLAIN_SCALAR_STYLE);
      case json::value_t::number_integer:
        return Scalar(std::to_string(value.get<int64_t>()), YAML_PLAIN_SCALAR_STYLE);
      case json::value_t::number_unsigned:
        return Scalar(std::to_string(value.get<uint64_t>()), YAML_PLAIN_SCALAR_STYLE);
      case json::value_t::number_float:
        return Scalar(goyaml::FormatJsonFloat(value.get<double>()), YAML_PLAIN_SCALAR_STYLE);
      case json::value_t::null:
      case json::value_t::discarded:
      case json::value_t::binary:
        return Scalar("null", YAML_PLAIN_SCALAR_STYLE);
    }
    return absl::OkStatus();
  }

 private:
  static int Write(void* data, unsigned char* buffer, size_t size) {
    static_cast<std::string*>(data)->append(reinterpret_cast<const char*>(buffer), size);
    return 1;
  }

  absl::Status Scalar(const std::string& text, yaml_scalar_style_t style) {
    yaml_event_t event;
    if (!yaml_scalar_event_initialize(
            &event, nullptr, nullptr,
            reinterpret_cast<yaml_char_t*>(const_cast<char*>(text.data())),
            static_cast<int>(text.size()), 1, 1, style)) {
      return absl::InternalError("libyaml could not allocate a scalar event");
    }
    return Emit(&event);
  }

  absl::Status Emit(yaml_event_t* event) {
    // yaml_emitter_emit takes ownership of the event, also on failure.
    if (!yaml_emitter_emit(&emitter_, event)) return Problem();
    return absl::OkStatus();
  }

  absl::Status Problem() const {
    return absl::InternalError(absl::StrCat(
        "YAML emitter: ", emitter_.problem != nullptr ? emitter_.problem : "unknown problem"));
  }

  yaml_emitter_t emitter_;
  std::string out_;
};

absl::Status RequireString(const json& object, const char* field) {
  const auto it = object.find(field);
  if (it == object.end() || !it->is_string()) {
    return absl::InvalidArgumentError(absl::StrCat("object ", field, " must be a string"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> MarshalYaml(const nlohmann::json& value) {
  Emitter emitter;
  RETURN_IF_ERROR(emitter.BeginDocument());
  RETURN_IF_ERROR(emitter.Value(value, 0));
  return emitter.EndDocument();
}

absl::StatusOr<std::string> RenderManifest(const nlohmann::json& object,
                                           const RenderOptions& options) {
  if (!object.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat("a manifest must be a map, got ", object.type_name()));
  }
  RETURN_IF_ERROR(RequireString(object, "apiVersion"));
  RETURN_IF_ERROR(RequireString(object, "kind"));

  // metadata: only the non-empty identity fields, in the chosen order.
  std::vector<std::pair<const char*, const json*>> metadata;
  if (const auto it = object.find("metadata"); it != object.end() && !it->is_null()) {
    if (!it->is_object()) return absl::InvalidArgumentError("metadata must be a map");
    const auto present = [&](const char* field) -> const json* {
      const auto f = it->find(field);
      if (f == it->end() || f->is_null()) return nullptr;
      // (json::empty() is false for every string, so strings are checked by value.)
      if (f->is_string() && f->get_ref<const std::string&>().empty()) return nullptr;
      if (f->is_object() && f->empty()) return nullptr;
      return &*f;
    };
    const std::vector<const char*> order =
        options.metadata_order == MetadataOrder::kIdentityFirst
            ? std::vector<const char*>{"name", "namespace", "labels", "annotations"}
            : std::vector<const char*>{"annotations", "labels", "name", "namespace"};
    for (const char* field : order) {
      const json* value = present(field);
      if (value == nullptr) continue;
      const bool want_string = std::string_view(field) == "name" ||
                               std::string_view(field) == "namespace";
      if (want_string ? !value->is_string() : !value->is_object()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "metadata.", field, " must be a ", want_string ? "string" : "map", ", got ",
            value->type_name()));
      }
      metadata.emplace_back(field, value);
    }
  }

  Emitter emitter;
  RETURN_IF_ERROR(emitter.BeginDocument());
  RETURN_IF_ERROR(emitter.BeginMapping());
  RETURN_IF_ERROR(emitter.String("apiVersion"));
  RETURN_IF_ERROR(emitter.Value(object["apiVersion"], 1));
  RETURN_IF_ERROR(emitter.String("kind"));
  RETURN_IF_ERROR(emitter.Value(object["kind"], 1));
  RETURN_IF_ERROR(emitter.String("metadata"));
  RETURN_IF_ERROR(emitter.BeginMapping());
  for (const auto& [field, value] : metadata) {
    RETURN_IF_ERROR(emitter.String(field));
    RETURN_IF_ERROR(emitter.Value(*value, 2));
  }
  RETURN_IF_ERROR(emitter.EndMapping());

  std::vector<std::string> payload;
  for (const auto& item : object.items()) {
    const std::string& key = item.key();
    if (key != "apiVersion" && key != "kind" && key != "metadata" && key != "status") {
      payload.push_back(key);
    }
  }
  std::stable_sort(payload.begin(), payload.end(), goyaml::KeyLess);
  for (const std::string& key : payload) {
    RETURN_IF_ERROR(emitter.String(key, /*is_key=*/true));
    RETURN_IF_ERROR(emitter.Value(object[key], 1));
  }
  RETURN_IF_ERROR(emitter.EndMapping());
  return emitter.EndDocument();
}

}  // namespace reverser::manifest
