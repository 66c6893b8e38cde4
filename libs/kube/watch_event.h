#pragma once

// One decoded `metav1.WatchEvent` frame: {"type":"ADDED","object":{...}}.

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "libs/core/json_depth.h"
#include "simdjson.h"

namespace reverser::kube {

enum class WatchEventType { kAdded, kModified, kDeleted, kBookmark, kError };

// "ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR".
absl::string_view WatchEventTypeName(WatchEventType type);
// The inverse: nullopt for any other name.
std::optional<WatchEventType> WatchEventTypeNamed(absl::string_view name);

// An object the client did not take: nested deeper than its limit (core::kApiObjectMaxDepth by
// default, which no object a real API server holds can pass). Whatever of its identity could be
// read names it in the refusal's log line and status; fields that could not be read are "".
struct RefusedObject {
  std::string reason;   // "too_deep"
  std::string message;  // for people: what the limit is
  std::string kind;
  std::string api_version;
  std::string namespace_;
  std::string name;
  std::string uid;
  std::string resource_version;
};

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
  // Set when the object was refused: `object` stays null and `object_json` empty, while `type`
  // and `resource_version` are the frame's, so the watch can move past it.
  std::optional<RefusedObject> refused;
};

// Parses one frame. Unknown types, missing objects and invalid JSON are errors. An object
// nested deeper than `max_object_depth` (the frame itself adds one level) is not an error: the
// event comes back with `refused` set.
absl::StatusOr<WatchEvent> ParseWatchEvent(absl::string_view frame,
                                           int64_t max_object_depth = core::kApiObjectMaxDepth);

// Decodes the frames of one watch stream, reusing simdjson's buffers between frames. With
// `raw_objects`, objects are not parsed into nlohmann::json at all (consumers that only store
// them re-serialise the text far faster; see libs/fastjson). Results and errors are those of
// ParseWatchEvent: any frame simdjson does not take goes through it.
class WatchEventDecoder {
 public:
  explicit WatchEventDecoder(bool raw_objects, int64_t max_object_depth = core::kApiObjectMaxDepth)
      : raw_objects_(raw_objects), max_object_depth_(max_object_depth) {}
  // `frame_depth`: the frame's nesting depth when the caller has measured it already
  // (FrameDecoder::frame_depth); otherwise it is measured here.
  absl::StatusOr<WatchEvent> Decode(absl::string_view frame,
                                    std::optional<int64_t> frame_depth = std::nullopt);

 private:
  bool raw_objects_;
  int64_t max_object_depth_;
  simdjson::ondemand::parser parser_;
  std::string padded_;  // the frame copied with SIMDJSON_PADDING bytes of room
};

// metadata.resourceVersion of an object, or "".
std::string ResourceVersionOf(const nlohmann::json& object);

// A refusal for `object` (parsed: a LIST item), naming it from its kind, apiVersion and metadata.
RefusedObject RefuseTooDeep(const nlohmann::json& object, int64_t max_object_depth);

// The deepest nesting of a parsed value (`{}` is 1), measured without recursion; stops early and
// returns `stop_above + 1` once it passes `stop_above`.
int64_t NestingDepth(const nlohmann::json& value, int64_t stop_above);

// The WatchList end marker: a BOOKMARK annotated k8s.io/initial-events-end: "true".
inline constexpr char kInitialEventsEndAnnotation[] = "k8s.io/initial-events-end";
bool IsInitialEventsEndBookmark(const WatchEvent& event);

}  // namespace reverser::kube
