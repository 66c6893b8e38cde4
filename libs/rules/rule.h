#pragma once

// WatchRule and ClusterWatchRule as reverser understands them, parsed from the objects the API
// server serves (JSON). Parsing re-checks the CRD's validation so a rule that slipped past it
// (older CRD, direct etcd write, test input) yields a clear error instead of a surprising plan.

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json_fwd.hpp"

namespace reverser::rules {

enum class Operation { kCreate, kUpdate, kDelete };

absl::string_view OperationName(Operation op);  // "CREATE", "UPDATE", "DELETE"

// The operations a rule selects. `all` is the `*` sentinel, which is also what an empty list
// and a list naming all three operations mean.
struct OperationSet {
  bool all = false;
  std::set<Operation> operations;  // empty when `all`

  static OperationSet All() { return {true, {}}; }
  // Parses a rule's `operations` list: CREATE, UPDATE, DELETE or `*`.
  static absl::StatusOr<OperationSet> Parse(const std::vector<std::string>& values);

  bool Contains(Operation op) const { return all || operations.count(op) > 0; }
  // Union; collapses to `all` when every operation is present.
  void Merge(const OperationSet& other);
  // "*" or "CREATE,DELETE" (canonical, used in plan hashes).
  std::string ToString() const;
  bool operator==(const OperationSet&) const = default;
};

// Which objects a ClusterWatchRule rule covers.
enum class ClusterRuleScope {
  kCluster,     // cluster-scoped resources
  kNamespaced,  // namespaced resources, in every namespace
};

// One entry of spec.rules (ResourceRule / ClusterResourceRule).
struct ResourceRule {
  OperationSet operations;
  // Empty (omitted or []): any group, but a named resource must be served by exactly one.
  std::vector<std::string> api_groups;
  std::vector<std::string> api_versions;  // empty: the preferred served version
  std::vector<std::string> resources;     // exact plurals or "*"
  std::optional<ClusterRuleScope> scope;  // ClusterWatchRule only
  bool operator==(const ResourceRule&) const = default;
};

// The identity of a rule object.
struct RuleKey {
  bool cluster = false;    // ClusterWatchRule
  std::string namespace_;  // WatchRule only
  std::string name;

  // "WatchRule team-a/r1" / "ClusterWatchRule r2", for messages.
  std::string ToString() const;
  auto operator<=>(const RuleKey&) const = default;
};

// A GitTarget by namespace and name.
struct TargetKey {
  std::string namespace_;
  std::string name;

  std::string ToString() const;  // "namespace/name"
  auto operator<=>(const TargetKey&) const = default;
};

// A parsed WatchRule or ClusterWatchRule.
struct WatchRuleObject {
  RuleKey key;
  std::string uid;
  int64_t generation = 0;
  TargetKey target;
  std::vector<ResourceRule> rules;  // OR-ed
  bool operator==(const WatchRuleObject&) const = default;
};

// Parse a WatchRule / ClusterWatchRule object (apiVersion, kind, metadata, spec). Errors are
// InvalidArgument and name the offending field ("spec.rules[0].resources[1]: ...").
absl::StatusOr<WatchRuleObject> ParseWatchRule(const nlohmann::json& object);
absl::StatusOr<WatchRuleObject> ParseClusterWatchRule(const nlohmann::json& object);
// Parses JSON text and dispatches on `kind`.
absl::StatusOr<WatchRuleObject> ParseRuleObject(absl::string_view json_text);

}  // namespace reverser::rules
