#pragma once

// One change in a per-type materialization stream, its Redis field encoding, and the fold that
// turns a checkpoint plus stream entries into the current object set (last writer wins by
// stream order, deletes drop). Pure: no Redis I/O here.

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "libs/core/stream_position.h"

namespace reverser::redisstore {

enum class ChangeOp { kAdded, kModified, kDeleted };
enum class ChangeSource { kWatch, kAudit, kList };

absl::string_view ChangeOpName(ChangeOp op);  // ADDED, MODIFIED, DELETED
absl::StatusOr<ChangeOp> ParseChangeOp(absl::string_view name);
absl::string_view ChangeSourceName(ChangeSource src);  // watch, audit, list
absl::StatusOr<ChangeSource> ParseChangeSource(absl::string_view name);

// identity -> object JSON (managedFields removed). Identity is `ns/name`, or `name` when
// cluster-scoped — the checkpoint hash field.
using ObjectMap = std::map<std::string, std::string>;
std::string ObjectIdentity(absl::string_view ns, absl::string_view name);

struct StreamEntry {
  // Assigned by the store on append (ignored there); set on entries read back.
  core::StreamPosition position;
  ChangeOp op = ChangeOp::kModified;
  std::string uid;
  std::string namespace_;  // empty for cluster-scoped objects
  std::string name;
  // The object's resourceVersion after the change; empty when the source had none (an audit
  // delete without a body): such an entry is attached to the stream top.
  std::string resource_version;
  std::string object_json;
  ChangeSource source = ChangeSource::kWatch;
  std::string audit_id;  // optional
  std::string user;      // optional

  std::string Identity() const { return ObjectIdentity(namespace_, name); }
  bool operator==(const StreamEntry&) const = default;
};

// Stream field names (XADD field/value pairs).
inline constexpr absl::string_view kFieldOp = "op";
inline constexpr absl::string_view kFieldUid = "uid";
inline constexpr absl::string_view kFieldNamespace = "ns";
inline constexpr absl::string_view kFieldName = "name";
inline constexpr absl::string_view kFieldRv = "rv";
inline constexpr absl::string_view kFieldObject = "obj";
inline constexpr absl::string_view kFieldSource = "src";
inline constexpr absl::string_view kFieldAuditId = "audit_id";
inline constexpr absl::string_view kFieldUser = "user";

// Flat [field, value, ...]; optional fields only when non-empty.
std::vector<std::string> EncodeEntryFields(const StreamEntry& entry);
// The same fields as views into `entry` (and static names), appended to `out`: for building a
// command without copying the bodies. Valid while `entry` lives unchanged.
void AppendEntryFieldViews(const StreamEntry& entry, std::vector<absl::string_view>& out);
// Parses an entry read back from the stream; InvalidArgument names the offending field.
absl::StatusOr<StreamEntry> DecodeEntry(absl::string_view id,
                                        const std::vector<std::string>& flat_fields);

// Applies one entry to an object set: upsert (ADDED/MODIFIED) or drop (DELETED).
void ApplyEntry(const StreamEntry& entry, ObjectMap& objects);

}  // namespace reverser::redisstore
