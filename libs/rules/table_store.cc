#include "libs/rules/table_store.h"

namespace reverser::rules {

void TableStore::MarkDirty(const TargetKey& key) { slots_[key].dirty = true; }

void TableStore::UpsertRule(WatchRuleObject rule) {
  auto it = rules_.find(rule.key);
  if (it != rules_.end()) {
    if (it->second == rule) return;  // a resync of the same object changes nothing
    MarkDirty(it->second.target);
  }
  MarkDirty(rule.target);
  RuleKey key = rule.key;
  rules_.insert_or_assign(std::move(key), std::move(rule));
}

void TableStore::RemoveRule(const RuleKey& key) {
  auto it = rules_.find(key);
  if (it == rules_.end()) return;
  MarkDirty(it->second.target);
  rules_.erase(it);
}

void TableStore::UpsertTarget(GitTargetInfo target) {
  Slot& slot = slots_[target.key];
  if (slot.info == target) return;
  slot.info = std::move(target);
  slot.dirty = true;
}

void TableStore::RemoveTarget(const TargetKey& key) {
  auto it = slots_.find(key);
  if (it == slots_.end() || !it->second.info) return;
  it->second.info.reset();
  it->second.dirty = true;
}

RefreshResult TableStore::Refresh(const TypeSource& source) {
  RefreshResult result;
  if (!source.Ready()) return result;
  const uint64_t revision = source.Revision();
  const bool all = resolved_revision_ != revision;
  std::optional<std::vector<typeset::TypeRecord>> records;  // fetched only when needed

  for (auto it = slots_.begin(); it != slots_.end();) {
    const TargetKey& key = it->first;
    Slot& slot = it->second;
    if (!slot.info) {
      if (slot.table) result.removed.push_back(key);
      // Keep the slot only while rules still name the target (they wait for it to return).
      bool named = false;
      for (const auto& [rk, rule] : rules_) named = named || rule.target == key;
      if (named) {
        slot.table.reset();
        slot.dirty = false;
        ++it;
      } else {
        it = slots_.erase(it);
      }
      continue;
    }
    if (slot.dirty || all) {
      if (!records) records = source.Records();
      WatchedTypeTable next = ResolveTable(*slot.info, RulesFor(key), *records, revision);
      ++result.resolved;
      ++resolutions_total_;
      bool changed = !slot.table || slot.table->plan_hash != next.plan_hash ||
                     slot.table->unresolved != next.unresolved || slot.table->types != next.types;
      slot.table = std::move(next);
      if (changed) result.changed.push_back(key);
      slot.dirty = false;
    }
    ++it;
  }
  resolved_revision_ = revision;
  if (!result.changed.empty() || !result.removed.empty()) ++generation_;
  return result;
}

const WatchedTypeTable* TableStore::Table(const TargetKey& key) const {
  auto it = slots_.find(key);
  if (it == slots_.end() || !it->second.table) return nullptr;
  return &*it->second.table;
}

std::vector<const WatchedTypeTable*> TableStore::Tables() const {
  std::vector<const WatchedTypeTable*> out;
  for (const auto& [key, slot] : slots_) {
    if (slot.table) out.push_back(&*slot.table);
  }
  return out;
}

std::vector<const WatchRuleObject*> TableStore::RulesFor(const TargetKey& key) const {
  std::vector<const WatchRuleObject*> out;
  for (const auto& [rk, rule] : rules_) {
    if (rule.target == key) out.push_back(&rule);
  }
  return out;
}

}  // namespace reverser::rules
