#include "services/materializer/audit_changes.h"

#include "nlohmann/json.hpp"
#include "services/materializer/stream_entries.h"

namespace reverser::materializer {
namespace {

using nlohmann::json;
using redisstore::ChangeOp;

std::string Str(const json& object, const char* key) {
  if (!object.is_object()) return "";
  auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : "";
}

const json& Member(const json& object, const char* key) {
  static const json* null_value = new json();
  if (!object.is_object()) return *null_value;
  auto it = object.find(key);
  return it == object.end() ? *null_value : *it;
}

// A delete that only marked the object (finalizers or a grace period hold it) is a MODIFIED in
// the watch; the DELETED follows when the object really goes.
bool OnlyMarkedForDeletion(const json& object) {
  const json& meta = Member(object, "metadata");
  if (!Member(meta, "deletionTimestamp").is_string()) return false;
  const json& finalizers = Member(meta, "finalizers");
  if (finalizers.is_array() && !finalizers.empty()) return true;
  const json& grace = Member(meta, "deletionGracePeriodSeconds");
  return grace.is_number_integer() && grace.get<int64_t>() > 0;
}

}  // namespace

absl::string_view AuditSkipName(AuditSkip skip) {
  switch (skip) {
    case AuditSkip::kNone:
      return "none";
    case AuditSkip::kNotAccepted:
      return "not_accepted";
    case AuditSkip::kSubresource:
      return "subresource";
    case AuditSkip::kNoResponseBody:
      return "no_response_body";
    case AuditSkip::kNoIdentity:
      return "no_identity";
  }
  return "unknown";
}

AuditChanges ChangesFromAuditEvent(const audit::AuditEvent& event) {
  AuditChanges out;
  auto skip = [&](AuditSkip reason) {
    out.changes.clear();
    out.skipped = reason;
    return out;
  };
  const audit::ObjectReference& ref = event.object_ref;
  const core::GroupVersionResource gvr{std::string(ref.api_group), std::string(ref.api_version),
                                       std::string(ref.resource)};
  const std::string request_namespace(ref.namespace_);
  out.gvr = gvr;
  out.namespace_ = request_namespace;
  if (audit::Classify(event) != audit::Outcome::kQueued) return skip(AuditSkip::kNotAccepted);
  if (!ref.subresource.empty()) return skip(AuditSkip::kSubresource);
  if (gvr.resource.empty() || gvr.version.empty()) return skip(AuditSkip::kNoIdentity);
  const audit::EmbeddedObject& response_object = event.response_object;
  if (!response_object.present) return skip(AuditSkip::kNoResponseBody);
  const absl::string_view verb = event.verb;
  const bool is_status = response_object.kind == "Status";

  if (verb == "delete" && is_status) {
    AuditChange change;
    change.gvr = gvr;
    change.namespace_ = request_namespace;
    change.entry.op = ChangeOp::kDeleted;
    change.entry.source = redisstore::ChangeSource::kAudit;
    change.entry.namespace_ = request_namespace;
    change.entry.name = std::string(ref.name);
    if (change.entry.name.empty()) change.entry.name = std::string(response_object.details_name);
    change.entry.uid = std::string(response_object.details_uid);
    if (change.entry.uid.empty()) change.entry.uid = std::string(ref.uid);
    change.body_from_materialization = true;
    if (change.entry.name.empty()) return skip(AuditSkip::kNoIdentity);
    out.changes.push_back(std::move(change));
    return out;
  }
  if (is_status && verb != "deletecollection") return skip(AuditSkip::kNoResponseBody);

  if (verb != "delete" && verb != "deletecollection") {
    // create / update / patch: the response object stored as the watch stores it, straight from
    // its text (the fast path; the same bytes as through nlohmann).
    absl::StatusOr<StoredObject> stored = StoreObjectJson(response_object.json);
    if (!stored.ok()) return skip(AuditSkip::kNoResponseBody);
    const ChangeOp op =
        verb == "create" || event.response_code == 201 ? ChangeOp::kAdded : ChangeOp::kModified;
    AuditChange change;
    change.gvr = gvr;
    change.entry = MakeStreamEntry(op, *std::move(stored), redisstore::ChangeSource::kAudit);
    change.namespace_ = change.entry.namespace_;
    if (change.entry.name.empty()) return skip(AuditSkip::kNoIdentity);
    out.changes.push_back(std::move(change));
    return out;
  }

  // delete and deletecollection read the whole body: decoded now, for this event only. Never
  // copied (a copy recurses once per level; parsing and destroying do not).
  json response = json::parse(response_object.json, nullptr, /*allow_exceptions=*/false);
  if (!response.is_object()) return skip(AuditSkip::kNoResponseBody);

  auto add = [&](ChangeOp op, const json& object) {
    AuditChange change;
    change.gvr = gvr;
    change.entry = MakeStreamEntry(op, object, redisstore::ChangeSource::kAudit);
    change.namespace_ = change.entry.namespace_;
    if (!change.entry.name.empty()) out.changes.push_back(std::move(change));
  };

  if (verb == "deletecollection") {
    auto found = response.find("items");
    if (found == response.end() || !found->is_array()) return skip(AuditSkip::kNoResponseBody);
    json& items = *found;
    const std::string list_kind = Str(response, "kind");
    const std::string list_api_version = Str(response, "apiVersion");
    for (json& item : items) {
      SetTypeFromList(item, list_kind, list_api_version);
      add(OnlyMarkedForDeletion(item) ? ChangeOp::kModified : ChangeOp::kDeleted, item);
    }
    if (out.changes.empty() && !items.empty()) return skip(AuditSkip::kNoIdentity);
    return out;
  }

  // delete, answered with the object.
  const ChangeOp op = event.response_code == 202 || OnlyMarkedForDeletion(response)
                          ? ChangeOp::kModified
                          : ChangeOp::kDeleted;
  add(op, response);
  if (out.changes.empty()) return skip(AuditSkip::kNoIdentity);
  return out;
}

}  // namespace reverser::materializer
