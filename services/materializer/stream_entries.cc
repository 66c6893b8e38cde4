#include "services/materializer/stream_entries.h"

#include "absl/strings/match.h"
#include "absl/strings/strip.h"
#include "libs/sanitize/sanitize.h"

namespace reverser::materializer {

std::string ObjectMetadata(const nlohmann::json& object, const char* key) {
  if (!object.is_object()) return "";
  auto meta = object.find("metadata");
  if (meta == object.end() || !meta->is_object()) return "";
  auto it = meta->find(key);
  return it != meta->end() && it->is_string() ? it->get<std::string>() : "";
}

std::string StoredObjectJson(const nlohmann::json& object) {
  return sanitize::RemoveManagedFields(object).dump(-1, ' ', false,
                                                    nlohmann::json::error_handler_t::replace);
}

redisstore::StreamEntry MakeStreamEntry(redisstore::ChangeOp op, const nlohmann::json& object,
                                        redisstore::ChangeSource source) {
  redisstore::StreamEntry entry;
  entry.op = op;
  entry.uid = ObjectMetadata(object, "uid");
  entry.namespace_ = ObjectMetadata(object, "namespace");
  entry.name = ObjectMetadata(object, "name");
  entry.resource_version = ObjectMetadata(object, "resourceVersion");
  entry.object_json = StoredObjectJson(object);
  entry.source = source;
  return entry;
}

void SetTypeFromList(nlohmann::json& item, const std::string& list_kind,
                     const std::string& list_api_version) {
  if (!item.is_object()) return;
  if (!item.contains("apiVersion") && !list_api_version.empty()) {
    item["apiVersion"] = list_api_version;
  }
  if (!item.contains("kind") && absl::EndsWith(list_kind, "List") && list_kind != "List") {
    item["kind"] = std::string(absl::StripSuffix(list_kind, "List"));
  }
}

}  // namespace reverser::materializer
