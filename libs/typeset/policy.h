#pragma once

// Policies that refuse or flag types by group/resource, independent of what discovery says.
// Entries are written like core::GroupVersionResource::GroupResource(): "secrets" for the core
// group, "apps/controllerrevisions" otherwise.

#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace reverser::typeset {

// Types reverser never watches however rules select them: high-churn or derived state.
class WatchPolicy {
 public:
  // The reference's default exclusions (pods, events, endpoints, endpointslices, leases,
  // controllerrevisions, flowschemas, prioritylevelconfigurations, jobs, cronjobs).
  static WatchPolicy Default();
  static WatchPolicy AllowAll() { return WatchPolicy({}); }
  explicit WatchPolicy(std::set<std::string> excluded) : excluded_(std::move(excluded)) {}

  bool Excluded(absl::string_view group, absl::string_view resource) const;
  // The refusal detail shown in type summaries.
  static constexpr absl::string_view kExclusionDetail =
      "excluded by GitOps Reverser default watch policy";

 private:
  std::set<std::string> excluded_;
};

// Types whose objects must never reach Git in plaintext: core secrets always, plus the
// operator's --additional-sensitive-resources entries ("resource" = core group,
// "group/resource" otherwise).
class SensitivePolicy {
 public:
  SensitivePolicy() = default;  // core secrets only
  // Rejects empty entries, more than one "/", and empty halves.
  static absl::StatusOr<SensitivePolicy> Create(const std::vector<std::string>& additional);

  bool IsSensitive(absl::string_view group, absl::string_view resource) const;

 private:
  std::set<std::string> additional_;
};

}  // namespace reverser::typeset
