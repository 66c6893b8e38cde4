#pragma once

// metadata.managedFields bookkeeping: FieldsV1 sets per (manager, operation, subresource).
// An approximation of structured-merge-diff good enough for clients that read managedFields:
// a manager owns the fields it set or changed; a change by one manager takes the field from
// the others.

#include <optional>
#include <string>

#include "absl/time/time.h"
#include "nlohmann/json.hpp"
#include "tools/kube-sim/api_error.h"

namespace reverser::kubesim {

using Json = nlohmann::json;

struct ManagerWrite {
  std::string manager;      // fieldManager (default from the User-Agent)
  std::string operation;    // "Update" | "Apply"
  std::string subresource;  // "" | "status" | "scale"
  std::string api_version;  // apiVersion of the entry
  absl::Time time;
};

// Returns `updated` with metadata.managedFields recomputed after a write from `previous`
// (null for create). `applied` is the apply configuration for Apply operations (the fields the
// manager now owns), null otherwise.
Json UpdateManagedFields(const Json& previous, const Json& updated, const Json& applied,
                         const ManagerWrite& write);

// Server-side apply: fields `manager` applied before but left out of `applied` now are removed
// from `merged`, unless another manager also owns them.
Json PruneUnapplied(const Json& current, Json merged, const std::string& manager,
                    const Json& applied);

// Server-side apply without force: fields in `applied` whose live value differs and that another
// manager owns. Empty: no conflict. Otherwise the real 409 (reason Conflict, causes of type
// FieldManagerConflict, "Apply failed with N conflict(s): ...").
std::optional<ApiError> ApplyConflicts(const Json& current, const Json& applied,
                                       const std::string& manager);

// The FieldsV1 set of every field present in `object` (identity metadata excluded).
Json FieldsV1Of(const Json& object);

// RFC 3339 with seconds, UTC ("2026-11-29T14:30:00Z").
std::string Rfc3339(absl::Time t);
// MicroTime ("2026-06-02T11:16:29.161836Z").
std::string Rfc3339Micro(absl::Time t);

}  // namespace reverser::kubesim
