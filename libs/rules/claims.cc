#include "libs/rules/claims.h"

#include <map>

namespace reverser::rules {

bool ReadsClusterWide(const WatchedType& type) {
  return type.scope == core::Scope::kCluster || type.namespaces.count("") > 0;
}

std::vector<core::WatchScope> ServingScopes(const WatchedType& type) {
  if (ReadsClusterWide(type)) return {core::WatchScope::Cluster()};
  std::vector<core::WatchScope> out;
  for (const auto& [ns, ops] : type.namespaces) out.push_back(core::WatchScope::Namespace(ns));
  return out;
}

core::WatchScope ServingScope(const WatchedType& type, const std::string& namespace_) {
  if (ReadsClusterWide(type) || namespace_.empty()) return core::WatchScope::Cluster();
  return core::WatchScope::Namespace(namespace_);
}

std::vector<Claim> ComputeClaims(const std::vector<const WatchedTypeTable*>& tables) {
  std::map<std::pair<core::GroupVersionResource, core::WatchScope>, const WatchedType*> wanted;
  for (const WatchedTypeTable* table : tables) {
    if (table == nullptr) continue;
    for (const auto& [gvr, type] : table->types) {
      for (core::WatchScope& scope : ServingScopes(type)) {
        wanted.try_emplace({gvr, std::move(scope)}, &type);
      }
    }
  }
  std::vector<Claim> out;
  out.reserve(wanted.size());
  for (const auto& [key, type] : wanted) {
    out.push_back({type->gvk, key.first, type->scope, key.second, type->sensitive});
  }
  return out;  // map order: sorted by GVR, then scope
}

bool ClaimTracker::Update(const std::vector<const WatchedTypeTable*>& tables) {
  std::vector<Claim> next = ComputeClaims(tables);
  bool same = next.size() == claims_.size();
  for (size_t i = 0; same && i < next.size(); ++i) {
    same = next[i] == claims_[i] && next[i].gvk == claims_[i].gvk &&
           next[i].type_scope == claims_[i].type_scope && next[i].sensitive == claims_[i].sensitive;
  }
  if (same) return false;
  claims_ = std::move(next);
  ++generation_;
  return true;
}

}  // namespace reverser::rules
