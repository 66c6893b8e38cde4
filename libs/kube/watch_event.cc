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
  if (name == "ADDED") {
    event.type = WatchEventType::kAdded;
  } else if (name == "MODIFIED") {
    event.type = WatchEventType::kModified;
  } else if (name == "DELETED") {
    event.type = WatchEventType::kDeleted;
  } else if (name == "BOOKMARK") {
    event.type = WatchEventType::kBookmark;
  } else if (name == "ERROR") {
    event.type = WatchEventType::kError;
  } else {
    return absl::DataLossError(absl::StrCat("unknown watch event type \"", name, "\""));
  }
  event.object = std::move(*object);
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
