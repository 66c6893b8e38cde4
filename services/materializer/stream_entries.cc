#include "services/materializer/stream_entries.h"

#include "absl/strings/match.h"
#include "absl/strings/strip.h"

namespace reverser::materializer {

std::string ObjectMetadata(const nlohmann::json& object, const char* key) {
  if (!object.is_object()) return "";
  auto meta = object.find("metadata");
  if (meta == object.end() || !meta->is_object()) return "";
  auto it = meta->find(key);
  return it != meta->end() && it->is_string() ? it->get<std::string>() : "";
}

namespace {

constexpr auto kReplaceInvalidUtf8 = nlohmann::json::error_handler_t::replace;

std::string Dump(const nlohmann::json& value) {
  return value.dump(-1, ' ', false, kReplaceInvalidUtf8);
}

// `object` dumped compactly as nlohmann does (keys in its sorted order), leaving out the member
// `skip` of its member `parent` (nullptr: nothing left out).
void DumpObjectWithout(const nlohmann::json& object, const char* parent, const char* skip,
                       std::string& out) {
  out += '{';
  bool first = true;
  for (auto it = object.begin(); it != object.end(); ++it) {
    if (parent == nullptr && it.key() == skip) continue;
    if (!first) out += ',';
    first = false;
    out += Dump(nlohmann::json(it.key()));
    out += ':';
    if (parent != nullptr && it.key() == parent && it.value().is_object()) {
      DumpObjectWithout(it.value(), nullptr, skip, out);
    } else {
      out += Dump(it.value());
    }
  }
  out += '}';
}

}  // namespace

std::string StoredObjectJson(const nlohmann::json& object) {
  // Same bytes as sanitize::RemoveManagedFields(object).dump(), without copying the object
  // first: this runs for every watch event.
  if (!object.is_object()) return Dump(object);
  auto metadata = object.find("metadata");
  if (metadata == object.end() || !metadata->is_object() || !metadata->contains("managedFields")) {
    return Dump(object);
  }
  std::string out;
  DumpObjectWithout(object, "metadata", "managedFields", out);
  return out;
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
