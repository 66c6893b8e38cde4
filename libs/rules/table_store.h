#pragma once

// The rule store and the per-GitTarget watched-type tables. A table is re-resolved only when its
// GitTarget's rules (or the target itself) change, or when the registry revision moves; a rule
// change on one GitTarget never touches another's table.
//
// Not thread-safe: owned by one actor.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "libs/rules/rule.h"
#include "libs/rules/table.h"
#include "libs/typeset/model.h"
#include "libs/typeset/registry.h"

namespace reverser::rules {

// What the registry offers resolution. typeset::Registry provides both (All(), revision()).
class TypeSource {
 public:
  virtual ~TypeSource() = default;
  virtual std::vector<typeset::TypeRecord> Records() const = 0;
  virtual uint64_t Revision() const = 0;
  // False until the first discovery scan: nothing is resolved (fail-closed, no empty plans).
  virtual bool Ready() const { return true; }
};

// The live registry as a TypeSource.
class RegistrySource final : public TypeSource {
 public:
  explicit RegistrySource(const typeset::Registry& registry) : registry_(registry) {}
  std::vector<typeset::TypeRecord> Records() const override { return registry_.All(); }
  uint64_t Revision() const override { return registry_.revision(); }
  bool Ready() const override { return registry_.Ready(); }

 private:
  const typeset::Registry& registry_;
};

struct RefreshResult {
  std::vector<TargetKey> changed;  // tables whose plan or unresolved set changed (or are new)
  std::vector<TargetKey> removed;  // tables dropped since the last refresh
  size_t resolved = 0;             // tables recomputed (changed or not)
};

class TableStore {
 public:
  // Rules, keyed by RuleKey. Re-pointing a rule at another target dirties both targets.
  void UpsertRule(WatchRuleObject rule);
  void RemoveRule(const RuleKey& key);
  // GitTargets that may hold a table. Rules naming an unknown target wait for it.
  void UpsertTarget(GitTargetInfo target);
  void RemoveTarget(const TargetKey& key);

  // Recomputes the dirty tables (all of them when the source revision moved). Does nothing
  // while the source is not Ready(); the dirt waits.
  RefreshResult Refresh(const TypeSource& source);

  const WatchedTypeTable* Table(const TargetKey& key) const;
  std::vector<const WatchedTypeTable*> Tables() const;
  // The rules naming a target, sorted by rule key.
  std::vector<const WatchRuleObject*> RulesFor(const TargetKey& key) const;
  // Moves whenever a Refresh reports a change.
  uint64_t generation() const { return generation_; }
  size_t resolutions_total() const { return resolutions_total_; }

 private:
  struct Slot {
    std::optional<GitTargetInfo> info;
    std::optional<WatchedTypeTable> table;
    bool dirty = true;
  };

  void MarkDirty(const TargetKey& key);

  std::map<RuleKey, WatchRuleObject> rules_;
  std::map<TargetKey, Slot> slots_;
  std::vector<TargetKey> pending_removed_;
  std::optional<uint64_t> resolved_revision_;
  uint64_t generation_ = 0;
  size_t resolutions_total_ = 0;
};

}  // namespace reverser::rules
