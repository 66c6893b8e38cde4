#pragma once

// One decoded `metav1.WatchEvent` frame: {"type":"ADDED","object":{...}}.

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "simdjson.h"

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace reverser::kube {

enum class WatchEventType { kAdded, kModified, kDeleted, kBookmark, kError };

// "ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR".
absl::string_view WatchEventTypeName(WatchEventType type);
// The inverse: nullopt for any other name.
std::optional<WatchEventType> WatchEventTypeNamed(absl::string_view name);

struct WatchEvent {
  WatchEventType type = WatchEventType::kAdded;
  // The full object (kind/apiVersion set); for kError a Status; for kBookmark an empty object
  // of the watched kind carrying only metadata.resourceVersion (and maybe annotations).
  nlohmann::json object;
  // Raw-object decoding only (WatchEventDecoder with raw_objects): an ADDED/MODIFIED/DELETED
  // object stays the server's JSON text here and `object` is null. BOOKMARK and ERROR objects
  // are always parsed.
  std::string object_json;
  // metadata.resourceVersion of the object, or "" (both modes).
  std::string resource_version;
};

// Parses one frame. Unknown types, missing objects and invalid JSON are errors.
absl::StatusOr<WatchEvent> ParseWatchEvent(absl::string_view frame);

// Decodes the frames of one watch stream, reusing simdjson's buffers between frames. With
// `raw_objects`, objects are not parsed into nlohmann::json at all (consumers that only store
// them re-serialise the text far faster; see libs/fastjson). Results and errors are those of
// ParseWatchEvent: any frame simdjson does not take goes through it.
class WatchEventDecoder {
 public:
  explicit WatchEventDecoder(bool raw_objects) : raw_objects_(raw_objects) {}
  absl::StatusOr<WatchEvent> Decode(absl::string_view frame);

 private:
  bool raw_objects_;
  simdjson::ondemand::parser parser_;
  std::string padded_;  // the frame copied with SIMDJSON_PADDING bytes of room
};

// metadata.resourceVersion of an object, or "".
std::string ResourceVersionOf(const nlohmann::json& object);

// The WatchList end marker: a BOOKMARK annotated k8s.io/initial-events-end: "true".
inline constexpr char kInitialEventsEndAnnotation[] = "k8s.io/initial-events-end";
bool IsInitialEventsEndBookmark(const WatchEvent& event);

}  // namespace reverser::kube
