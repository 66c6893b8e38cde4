#pragma once

// One decoded `metav1.WatchEvent` frame: {"type":"ADDED","object":{...}}.

#include <nlohmann/json.hpp>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace reverser::kube {

enum class WatchEventType { kAdded, kModified, kDeleted, kBookmark, kError };

// "ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR".
absl::string_view WatchEventTypeName(WatchEventType type);

struct WatchEvent {
  WatchEventType type = WatchEventType::kAdded;
  // The full object (kind/apiVersion set); for kError a Status; for kBookmark an empty object
  // of the watched kind carrying only metadata.resourceVersion (and maybe annotations).
  nlohmann::json object;
};

// Parses one frame. Unknown types, missing objects and invalid JSON are errors.
absl::StatusOr<WatchEvent> ParseWatchEvent(absl::string_view frame);

// metadata.resourceVersion of an object, or "".
std::string ResourceVersionOf(const nlohmann::json& object);

// The WatchList end marker: a BOOKMARK annotated k8s.io/initial-events-end: "true".
inline constexpr char kInitialEventsEndAnnotation[] = "k8s.io/initial-events-end";
bool IsInitialEventsEndBookmark(const WatchEvent& event);

}  // namespace reverser::kube
