#include "libs/rules/claims.h"

#include <map>
#include <set>

namespace reverser::rules {

std::vector<Claim> ComputeClaims(const std::vector<const WatchedTypeTable*>& tables) {
  std::map<core::GroupVersionResource, const WatchedType*> types;
  std::map<core::GroupVersionResource, std::set<std::string>> namespaces;
  for (const WatchedTypeTable* table : tables) {
    if (table == nullptr) continue;
    for (const auto& [gvr, type] : table->types) {
      types.emplace(gvr, &type);
      for (const auto& [ns, ops] : type.namespaces) namespaces[gvr].insert(ns);
    }
  }
  std::vector<Claim> out;
  for (const auto& [gvr, nss] : namespaces) {
    const WatchedType& type = *types.at(gvr);
    auto claim = [&](core::WatchScope scope) {
      out.push_back({type.gvk, gvr, type.scope, std::move(scope)});
    };
    if (nss.count("")) {
      claim(core::WatchScope::Cluster());  // covers every namespace claim of the type
      continue;
    }
    for (const std::string& ns : nss) claim(core::WatchScope::Namespace(ns));
  }
  return out;  // map order: sorted by GVR, then namespace
}

bool ClaimTracker::Update(const std::vector<const WatchedTypeTable*>& tables) {
  std::vector<Claim> next = ComputeClaims(tables);
  bool same = next.size() == claims_.size();
  for (size_t i = 0; same && i < next.size(); ++i) {
    same = next[i] == claims_[i] && next[i].gvk == claims_[i].gvk &&
           next[i].type_scope == claims_[i].type_scope;
  }
  if (same) return false;
  claims_ = std::move(next);
  ++generation_;
  return true;
}

}  // namespace reverser::rules
