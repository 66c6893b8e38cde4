#include "libs/kube/watch_event.h"

#include "absl/strings/str_cat.h"

namespace reverser::kube {

using nlohmann::json;

absl::string_view WatchEventTypeName(WatchEventType type) {
  switch (type) {
    case WatchEventType::kAdded:
      return "ADDED";
    case WatchEventType::kModified:
      return "MODIFIED";
    case WatchEventType::kDeleted:
      return "DELETED";
    case WatchEventType::kBookmark:
      return "BOOKMARK";
    case WatchEventType::kError:
      return "ERROR";
  }
  return "UNKNOWN";
}

std::optional<WatchEventType> WatchEventTypeNamed(absl::string_view name) {
  for (WatchEventType type : {WatchEventType::kAdded, WatchEventType::kModified,
                              WatchEventType::kDeleted, WatchEventType::kBookmark,
                              WatchEventType::kError}) {
    if (WatchEventTypeName(type) == name) return type;
  }
  return std::nullopt;
}

absl::StatusOr<WatchEvent> ParseWatchEvent(absl::string_view frame) {
  json parsed = json::parse(frame.begin(), frame.end(), nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded() || !parsed.is_object()) {
    return absl::DataLossError(
        absl::StrCat("watch event is not a JSON object: ", frame.substr(0, 200)));
  }
  auto type = parsed.find("type");
  auto object = parsed.find("object");
  if (type == parsed.end() || !type->is_string()) {
    return absl::DataLossError("watch event has no \"type\"");
  }
  if (object == parsed.end() || !object->is_object()) {
    return absl::DataLossError("watch event has no \"object\"");
  }
  WatchEvent event;
  const std::string& name = type->get_ref<const std::string&>();
  std::optional<WatchEventType> known = WatchEventTypeNamed(name);
  if (!known) {
    return absl::DataLossError(absl::StrCat("unknown watch event type \"", name, "\""));
  }
  event.type = *known;
  event.object = std::move(*object);
  event.resource_version = ResourceVersionOf(event.object);
  return event;
}

absl::StatusOr<WatchEvent> WatchEventDecoder::Decode(absl::string_view frame) {
  if (!raw_objects_) return ParseWatchEvent(frame);
  // Anything simdjson does not take (malformed JSON, odd shapes) goes through ParseWatchEvent,
  // which gives the error or the event exactly as before.
  auto fallback = [&] { return ParseWatchEvent(frame); };
  padded_.assign(frame.data(), frame.size());
  padded_.reserve(frame.size() + simdjson::SIMDJSON_PADDING);
  simdjson::ondemand::document doc;
  simdjson::ondemand::object root;
  if (parser_.iterate(simdjson::padded_string_view(padded_.data(), frame.size(),
                                                   padded_.capacity()))
          .get(doc) ||
      doc.get_object().get(root)) {
    return fallback();
  }
  std::string_view type_name;
  std::string object_text;
  std::string rv;
  bool has_type = false, has_object = false;
  // Every member is visited, so a frame cut short inside the root object is noticed.
  for (auto field : root) {
    std::string_view key;
    if (field.unescaped_key().get(key)) return fallback();
    if (key == "type") {
      if (field.value().get_string().get(type_name)) return fallback();
      has_type = true;
    } else if (key == "object") {
      simdjson::ondemand::object object;
      std::string_view raw;
      if (field.value().get_object().get(object) || object.raw_json().get(raw)) return fallback();
      object_text.assign(raw.data(), raw.size());
      has_object = true;
      // The RV: rewind the object and look it up (cheaper than parsing its text again).
      std::string_view rv_text;
      if (object.reset().error()) return fallback();
      if (!object.find_field_unordered("metadata")
               .find_field_unordered("resourceVersion")
               .get_string()
               .get(rv_text)) {
        rv.assign(rv_text.data(), rv_text.size());
      }
    }  // other members are skipped by the iteration itself
  }
  if (!has_type || !has_object) return fallback();
  WatchEvent event;
  std::optional<WatchEventType> known =
      WatchEventTypeNamed(absl::string_view(type_name.data(), type_name.size()));
  if (!known || *known == WatchEventType::kBookmark || *known == WatchEventType::kError) {
    return fallback();  // BOOKMARK and ERROR are small and read as JSON objects
  }
  event.type = *known;
  event.resource_version = std::move(rv);
  event.object_json = std::move(object_text);
  return event;
}

std::string ResourceVersionOf(const json& object) {
  if (!object.is_object()) return "";
  auto metadata = object.find("metadata");
  if (metadata == object.end() || !metadata->is_object()) return "";
  auto rv = metadata->find("resourceVersion");
  if (rv == metadata->end() || !rv->is_string()) return "";
  return rv->get<std::string>();
}

bool IsInitialEventsEndBookmark(const WatchEvent& event) {
  if (event.type != WatchEventType::kBookmark) return false;
  const json* annotations = nullptr;
  if (auto metadata = event.object.find("metadata");
      metadata != event.object.end() && metadata->is_object()) {
    if (auto it = metadata->find("annotations"); it != metadata->end() && it->is_object()) {
      annotations = &*it;
    }
  }
  if (annotations == nullptr) return false;
  auto marker = annotations->find(kInitialEventsEndAnnotation);
  return marker != annotations->end() && marker->is_string() && *marker == "true";
}

}  // namespace reverser::kube
