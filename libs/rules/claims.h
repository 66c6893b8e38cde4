#pragma once

// Claims: the units of materialization, one per (type, scope) that some GitTarget needs. The
// claim set is the union over every watched-type table; a namespace claim is dropped when a
// cluster-wide claim of the same type covers it.

#include <cstdint>
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

  // Claims are identified by (GVR, scope); the kind and type scope ride along.
  bool operator==(const Claim& o) const { return gvr == o.gvr && scope == o.scope; }
  bool operator<(const Claim& o) const { return std::tie(gvr, scope) < std::tie(o.gvr, o.scope); }
};

// The union of the tables' (GVR, scope) pairs, sorted, with covered namespace claims removed.
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
