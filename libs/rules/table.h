#pragma once

// The WatchedTypeTable: one GitTarget's projection of the followable types through its rules —
// which types, in which namespaces, for which operations, at which served version — and the
// resolution that builds it.

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "libs/core/types.h"
#include "libs/rules/rule.h"
#include "libs/typeset/model.h"

namespace reverser::rules {

// Where a GitTarget writes (immutable in the CRD).
struct GitDestination {
  std::string provider_namespace;
  std::string provider_name;
  std::string branch;
  std::string path;
  bool operator==(const GitDestination&) const = default;
};

struct GitTargetInfo {
  TargetKey key;
  std::string uid;
  GitDestination destination;
  bool operator==(const GitTargetInfo&) const = default;
};

// One type a GitTarget follows.
struct WatchedType {
  core::GroupVersionKind gvk;
  core::GroupVersionResource gvr;
  core::Scope scope = core::Scope::kNamespaced;
  // Namespace ("" = cluster-wide) -> operations. An object in namespace n is selected by the
  // union of namespaces[n] and namespaces[""].
  std::map<std::string, OperationSet> namespaces;
  // Inside the removal grace or over failed discovery: keep watching, set nothing up anew.
  bool retained = false;
  // The registry's verdict (typeset::TypeRecord::sensitive), carried to every service.
  bool sensitive = false;
  bool operator==(const WatchedType&) const = default;
};

// A rule entry that selects nothing it explicitly names (fail-closed), for ResourcesResolved.
struct UnresolvedResource {
  RuleKey rule;
  size_t rule_index = 0;
  std::string resource;
  std::string message;
  bool operator==(const UnresolvedResource&) const = default;
};

struct WatchedTypeTable {
  GitTargetInfo target;
  std::map<core::GroupVersionResource, WatchedType> types;
  std::vector<UnresolvedResource> unresolved;
  // What each rule selects: (type, namespace) pairs, namespace "" for cluster-wide. For a
  // rule's own status (status.streams); not part of the plan.
  std::map<RuleKey, std::set<std::pair<core::GroupVersionResource, std::string>>> selections;
  uint64_t registry_revision = 0;  // typeset::Registry::revision() resolved against
  // Hex digest of destination + types + namespaces + operations: changes iff the plan does.
  std::string plan_hash;

  bool HasRetained() const;
  // The operations selected for objects of `gvr` in `namespace_` ("" for cluster-scoped).
  OperationSet OperationsFor(const core::GroupVersionResource& gvr,
                             const std::string& namespace_) const;
};

// A rule's ResourcesResolved condition: reason "Resolved" or "UnresolvedResources".
struct RuleResolution {
  bool resolved = true;
  std::string reason;
  std::string message;
};
RuleResolution ResolutionOf(const WatchedTypeTable& table, const RuleKey& rule);

// Kubernetes version priority: GA before beta before alpha, higher numbers first
// ("v2" < "v1" < "v1beta2" < "v1beta1" < "v1alpha1" < "foo" in this order of preference).
bool VersionPreferred(absl::string_view a, absl::string_view b);

// Resolves `rules` (all naming `target`) against registry records (typeset::Registry::All()).
// A record is eligible when it is live (followable or retained) and settled; a fully
// specified group/version/resource needs only a non-refused record (no settle wait).
// Resolution is fail-closed: wildcard and version-less rules expand over eligible records only,
// a named resource under omitted apiGroups must be served by exactly one group, and what is named
// but resolves to nothing is reported in `unresolved`.
WatchedTypeTable ResolveTable(const GitTargetInfo& target,
                              const std::vector<const WatchRuleObject*>& rules,
                              const std::vector<typeset::TypeRecord>& records,
                              uint64_t registry_revision);

// The digest ResolveTable stores in plan_hash.
std::string PlanHash(const WatchedTypeTable& table);

}  // namespace reverser::rules
