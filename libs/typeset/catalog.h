#pragma once

// APIResourceCatalog: turns one discovery pass into normalized, sorted facts per served type, and
// numbers the result with a generation that moves only when those facts change (so a periodic
// rescan of an unchanged cluster causes no downstream work).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "libs/core/types.h"
#include "libs/typeset/scan.h"

namespace reverser::typeset {

struct GroupVersion {
  std::string group;
  std::string version;

  // "v1" for core, "apps/v1" otherwise.
  std::string ToString() const;
  auto operator<=>(const GroupVersion&) const = default;
};

// The normalized facts of one served top-level type.
struct CatalogEntry {
  core::GroupVersionKind gvk;
  core::GroupVersionResource gvr;
  std::optional<core::Scope> scope;
  std::vector<std::string> verbs;         // sorted, unique
  std::vector<std::string> subresources;  // sorted, unique ("scale", "status")
  bool preferred = false;                 // served in its group's preferred version
  Origin origin = Origin::kUnknown;
  // Only "<resource>/<sub>" entries were listed: there is no top-level resource to follow.
  bool subresource_only = false;
  // Other resources of the same group/version that share this kind (GVK is not 1:1).
  std::vector<std::string> kind_shared_with;
  // The resource was listed more than once with different kind or scope (GVR is not 1:1).
  bool conflicting_listings = false;

  bool operator==(const CatalogEntry&) const = default;
};

// The catalog after a scan.
struct CatalogSnapshot {
  uint64_t generation = 0;  // 0: no scan yet
  bool complete = false;
  std::vector<CatalogEntry> entries;         // sorted by GVR
  std::vector<GroupVersion> scanned;         // sorted
  std::vector<GroupVersion> degraded;        // failed group/versions, sorted
  std::vector<std::string> degraded_errors;  // parallel to `degraded`, for operators
};

struct CatalogStats {
  uint64_t scans = 0;
  uint64_t generation = 0;
  size_t group_versions = 0;
  size_t entries = 0;
  size_t subresources = 0;
  size_t degraded_group_versions = 0;
};

class ApiResourceCatalog {
 public:
  // Normalizes `scan` and returns the new snapshot. The generation moves iff the normalized
  // facts (entries, scanned and degraded group/versions, completeness) differ from the last
  // scan's; error texts alone never move it.
  const CatalogSnapshot& Update(const DiscoveryScan& scan);

  const CatalogSnapshot& current() const { return current_; }
  CatalogStats stats() const;

 private:
  CatalogSnapshot current_;
  uint64_t scans_ = 0;
};

// Normalization without generation bookkeeping (exposed for tests and tools).
CatalogSnapshot Normalize(const DiscoveryScan& scan);

}  // namespace reverser::typeset
