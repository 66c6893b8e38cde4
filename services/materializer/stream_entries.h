#pragma once

// The one place an API object becomes a stream entry or a checkpoint item, so the watch intake
// and the audit intake produce the same bytes: managedFields removed, keys in sorted order
// (nlohmann's default object), invalid UTF-8 replaced.

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "libs/redisstore/stream_entry.h"
#include "nlohmann/json.hpp"

namespace reverser::materializer {

// metadata.<key> as a string, "" when absent or not a string.
std::string ObjectMetadata(const nlohmann::json& object, const char* key);

// The object as stored: managedFields removed, compact JSON.
std::string StoredObjectJson(const nlohmann::json& object);

// A stream entry for `object` (uid, namespace, name and resourceVersion from its metadata).
redisstore::StreamEntry MakeStreamEntry(redisstore::ChangeOp op, const nlohmann::json& object,
                                        redisstore::ChangeSource source);

// An object's stored form and identity, decoded from its JSON text (a raw watch object).
struct StoredObject {
  std::string json;  // exactly StoredObjectJson(nlohmann::json::parse(text))
  std::string uid;
  std::string namespace_;
  std::string name;
  std::string resource_version;
};

// The fast path for every watch event: simdjson + libs/fastjson's canonical writer, ~10x less CPU
// than building an nlohmann DOM and dumping it; documents that writer leaves to nlohmann (floats,
// duplicate keys) take the nlohmann path, so the bytes never depend on which path ran. Text
// nlohmann does not take either is InvalidArgument.
absl::StatusOr<StoredObject> StoreObjectJson(absl::string_view text);

redisstore::StreamEntry MakeStreamEntry(redisstore::ChangeOp op, StoredObject object,
                                        redisstore::ChangeSource source);

// Items of a LIST carry no kind/apiVersion; fill them in from the list's (`ConfigMapList`, `v1`)
// so checkpoint items look like watch objects.
void SetTypeFromList(nlohmann::json& item, const std::string& list_kind,
                     const std::string& list_api_version);

}  // namespace reverser::materializer
