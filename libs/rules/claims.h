#pragma once

// Claims: the units of materialization, one per (type, scope) that some GitTarget reads. Which
// materialization serves a GitTarget is decided per target, from its own rules only
// (docs/behaviour.md, Claims):
//
//  * the type's cluster-wide materialization when the target itself follows the type
//    cluster-wide (a ClusterWatchRule, or a cluster-scoped type);
//  * else one materialization per namespace its WatchRules name.
//
// Another target's ClusterWatchRule never widens what is asked of the API server on behalf of a
// namespaced WatchRule (RBAC may allow only that namespace), so a type can be claimed both
// cluster-wide and per namespace. The claim set is the union over every table; targets needing
// the same (type, scope) share its materialization.

#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "libs/core/types.h"
#include "libs/rules/table.h"

namespace reverser::rules {

struct Claim {
  core::GroupVersionKind gvk;
  core::GroupVersionResource gvr;
  core::Scope type_scope = core::Scope::kNamespaced;
  core::WatchScope scope;  // cluster-wide or one namespace
  bool sensitive = false;  // the registry's verdict: its bodies are sealed in Redis

  // Claims are identified by (GVR, scope); the kind and type scope ride along.
  bool operator==(const Claim& o) const { return gvr == o.gvr && scope == o.scope; }
  bool operator<(const Claim& o) const { return std::tie(gvr, scope) < std::tie(o.gvr, o.scope); }
};

// Whether one GitTarget reads `type` from the cluster-wide materialization: it follows the type
// cluster-wide itself (namespace "" in its table) or the type is cluster-scoped.
bool ReadsClusterWide(const WatchedType& type);
// The materializations that serve `type` for one GitTarget: {cluster} or one per namespace.
std::vector<core::WatchScope> ServingScopes(const WatchedType& type);
// The one of them that serves objects of `type` in `namespace_` for that GitTarget.
core::WatchScope ServingScope(const WatchedType& type, const std::string& namespace_);

// The union of every table's serving scopes, sorted by (GVR, scope).
std::vector<Claim> ComputeClaims(const std::vector<const WatchedTypeTable*>& tables);

// Holds the current claim set and its generation, which moves only when the set changes.
class ClaimTracker {
 public:
  // Returns true when the set changed (and the generation moved).
  bool Update(const std::vector<const WatchedTypeTable*>& tables);

  const std::vector<Claim>& claims() const { return claims_; }
  uint64_t generation() const { return generation_; }

 private:
  std::vector<Claim> claims_;
  uint64_t generation_ = 0;
};

}  // namespace reverser::rules
