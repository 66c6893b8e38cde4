#include "services/materializer/stream_entries.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "libs/fastjson/canonical.h"

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

namespace {

// metadata.<key> of a parsed root, "" when absent or not a string.
std::string DomMetadata(simdjson::dom::element root, const char* key) {
  std::string_view value;
  if (root.at_key("metadata").at_key(key).get_string().get(value)) return "";
  return std::string(value);
}

absl::StatusOr<StoredObject> StoreObjectWithNlohmann(absl::string_view text) {
  nlohmann::json object =
      nlohmann::json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (object.is_discarded()) return absl::InvalidArgumentError("object is not valid JSON");
  return StoredObject{StoredObjectJson(object), ObjectMetadata(object, "uid"),
                      ObjectMetadata(object, "namespace"), ObjectMetadata(object, "name"),
                      ObjectMetadata(object, "resourceVersion")};
}

}  // namespace

absl::StatusOr<StoredObject> StoreObjectJson(absl::string_view text) {
  thread_local fastjson::CanonicalWriter writer;
  // Whatever the fast path does not take (floats, duplicate keys, and errors — nlohmann has the
  // last word on what is valid) goes through nlohmann.
  absl::StatusOr<simdjson::dom::element> root = writer.Parse(text);
  if (!root.ok()) return StoreObjectWithNlohmann(text);
  StoredObject stored;
  stored.json.reserve(text.size());
  if (!writer.Append(*root, stored.json, {"metadata", "managedFields"}).ok()) {
    return StoreObjectWithNlohmann(text);
  }
  stored.uid = DomMetadata(*root, "uid");
  stored.namespace_ = DomMetadata(*root, "namespace");
  stored.name = DomMetadata(*root, "name");
  stored.resource_version = DomMetadata(*root, "resourceVersion");
  return stored;
}

redisstore::StreamEntry MakeStreamEntry(redisstore::ChangeOp op, StoredObject object,
                                        redisstore::ChangeSource source) {
  redisstore::StreamEntry entry;
  entry.op = op;
  entry.uid = std::move(object.uid);
  entry.namespace_ = std::move(object.namespace_);
  entry.name = std::move(object.name);
  entry.resource_version = std::move(object.resource_version);
  entry.object_json = std::move(object.json);
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
