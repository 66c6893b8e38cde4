#include "libs/redisstore/stream_entry.h"

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "libs/core/status.h"

namespace reverser::redisstore {

absl::string_view ChangeOpName(ChangeOp op) {
  switch (op) {
    case ChangeOp::kAdded:
      return "ADDED";
    case ChangeOp::kModified:
      return "MODIFIED";
    case ChangeOp::kDeleted:
      return "DELETED";
  }
  return "MODIFIED";
}

absl::StatusOr<ChangeOp> ParseChangeOp(absl::string_view name) {
  if (name == "ADDED") return ChangeOp::kAdded;
  if (name == "MODIFIED") return ChangeOp::kModified;
  if (name == "DELETED") return ChangeOp::kDeleted;
  return absl::InvalidArgumentError(
      absl::StrCat("stream entry op \"", name, "\" is not ADDED, MODIFIED or DELETED"));
}

absl::string_view ChangeSourceName(ChangeSource src) {
  switch (src) {
    case ChangeSource::kWatch:
      return "watch";
    case ChangeSource::kAudit:
      return "audit";
    case ChangeSource::kList:
      return "list";
  }
  return "watch";
}

absl::StatusOr<ChangeSource> ParseChangeSource(absl::string_view name) {
  if (name == "watch") return ChangeSource::kWatch;
  if (name == "audit") return ChangeSource::kAudit;
  if (name == "list") return ChangeSource::kList;
  return absl::InvalidArgumentError(
      absl::StrCat("stream entry src \"", name, "\" is not watch, audit or list"));
}

std::string ObjectIdentity(absl::string_view ns, absl::string_view name) {
  return ns.empty() ? std::string(name) : absl::StrCat(ns, "/", name);
}

void AppendEntryFieldViews(const StreamEntry& entry, std::vector<absl::string_view>& out) {
  out.insert(out.end(),
             {kFieldOp, ChangeOpName(entry.op), kFieldUid, entry.uid, kFieldNamespace,
              entry.namespace_, kFieldName, entry.name, kFieldRv, entry.resource_version,
              kFieldObject, entry.object_json, kFieldSource, ChangeSourceName(entry.source)});
  if (!entry.audit_id.empty()) out.insert(out.end(), {kFieldAuditId, entry.audit_id});
  if (!entry.user.empty()) out.insert(out.end(), {kFieldUser, entry.user});
}

std::vector<std::string> EncodeEntryFields(const StreamEntry& entry) {
  std::vector<absl::string_view> views;
  views.reserve(18);
  AppendEntryFieldViews(entry, views);
  return std::vector<std::string>(views.begin(), views.end());
}

absl::StatusOr<StreamEntry> DecodeEntry(absl::string_view id,
                                        const std::vector<std::string>& flat_fields) {
  auto context = [&](const absl::Status& s) {
    return core::Annotate(s, absl::StrCat("stream entry ", id));
  };
  if (flat_fields.size() % 2 != 0) {
    return context(absl::InvalidArgumentError("odd number of field/value items"));
  }
  absl::flat_hash_map<absl::string_view, absl::string_view> fields;
  for (size_t i = 0; i < flat_fields.size(); i += 2) fields[flat_fields[i]] = flat_fields[i + 1];
  auto get = [&](absl::string_view name) -> absl::string_view {
    auto it = fields.find(name);
    return it == fields.end() ? absl::string_view() : it->second;
  };
  StreamEntry entry;
  auto position = core::StreamPosition::Parse(id);
  if (!position.ok()) return context(position.status());
  entry.position = *position;
  auto op = ParseChangeOp(get(kFieldOp));
  if (!op.ok()) return context(op.status());
  entry.op = *op;
  auto source = ParseChangeSource(get(kFieldSource));
  if (!source.ok()) return context(source.status());
  entry.source = *source;
  entry.name = std::string(get(kFieldName));
  if (entry.name.empty()) return context(absl::InvalidArgumentError("no name"));
  entry.uid = std::string(get(kFieldUid));
  entry.namespace_ = std::string(get(kFieldNamespace));
  entry.resource_version = std::string(get(kFieldRv));
  entry.object_json = std::string(get(kFieldObject));
  if (entry.op != ChangeOp::kDeleted && entry.object_json.empty()) {
    return context(absl::InvalidArgumentError("an upsert without an object body"));
  }
  entry.audit_id = std::string(get(kFieldAuditId));
  entry.user = std::string(get(kFieldUser));
  return entry;
}

void ApplyEntry(const StreamEntry& entry, ObjectMap& objects) {
  if (entry.op == ChangeOp::kDeleted) {
    objects.erase(entry.Identity());
  } else {
    objects[entry.Identity()] = entry.object_json;
  }
}

}  // namespace reverser::redisstore
