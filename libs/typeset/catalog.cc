#include "libs/typeset/catalog.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace reverser::typeset {
namespace {

// Built-in API groups: the core group, dot-less groups (apps, batch, policy, ...) and the
// Kubernetes-owned *.k8s.io groups. CRD evidence wins over this guess (Gateway API is a CRD
// in networking.k8s.io's family).
bool LooksBuiltin(absl::string_view group) {
  return group.empty() || !absl::StrContains(group, ".") || absl::EndsWith(group, ".k8s.io");
}

std::string GroupResourceKey(absl::string_view group, absl::string_view resource) {
  return group.empty() ? std::string(resource) : absl::StrCat(group, "/", resource);
}

template <typename T>
void SortUnique(std::vector<T>& values) {
  std::sort(values.begin(), values.end());
  values.erase(std::unique(values.begin(), values.end()), values.end());
}

}  // namespace

absl::string_view OriginName(Origin origin) {
  switch (origin) {
    case Origin::kBuiltin:
      return "builtin";
    case Origin::kCrd:
      return "crd";
    case Origin::kAggregated:
      return "aggregated";
    case Origin::kUnknown:
      break;
  }
  return "unknown";
}

std::string GroupVersion::ToString() const {
  return group.empty() ? version : absl::StrCat(group, "/", version);
}

CatalogSnapshot Normalize(const DiscoveryScan& scan) {
  CatalogSnapshot out;
  out.complete = scan.complete;
  std::set<std::string> crd_resources(scan.crd_group_resources.begin(),
                                      scan.crd_group_resources.end());
  std::map<core::GroupVersionResource, CatalogEntry> entries;
  std::set<GroupVersion> scanned;

  for (const ServedGroupVersion& gv : scan.group_versions) {
    if (gv.version.empty()) continue;  // malformed listing: nothing to identify types by
    scanned.insert({gv.group, gv.version});
    std::map<std::string, std::vector<std::string>> subresources;  // parent -> subs
    std::map<std::string, CatalogEntry> top;                       // resource -> entry
    for (const ServedResource& r : gv.resources) {
      if (r.name.empty()) continue;
      auto slash = r.name.find('/');
      if (slash != std::string::npos) {
        subresources[r.name.substr(0, slash)].push_back(r.name.substr(slash + 1));
        continue;
      }
      CatalogEntry e;
      e.gvr = {gv.group, gv.version, r.name};
      e.gvk = {gv.group, gv.version, r.kind};
      e.scope = r.scope;
      e.verbs = r.verbs;
      SortUnique(e.verbs);
      e.preferred = gv.preferred;
      if (gv.origin != Origin::kUnknown) {
        e.origin = gv.origin;
      } else if (crd_resources.count(GroupResourceKey(gv.group, r.name))) {
        e.origin = Origin::kCrd;
      } else if (LooksBuiltin(gv.group)) {
        e.origin = Origin::kBuiltin;
      }
      auto [it, inserted] = top.emplace(r.name, e);
      if (!inserted) {
        CatalogEntry& existing = it->second;
        if (existing.gvk != e.gvk || existing.scope != e.scope)
          existing.conflicting_listings = true;
        existing.verbs.insert(existing.verbs.end(), e.verbs.begin(), e.verbs.end());
        SortUnique(existing.verbs);
      }
    }
    for (auto& [parent, subs] : subresources) {
      auto it = top.find(parent);
      if (it == top.end()) {
        // A subresource with no servable parent: kept so the registry can say why.
        CatalogEntry e;
        e.gvr = {gv.group, gv.version, parent};
        e.gvk = {gv.group, gv.version, ""};
        e.preferred = gv.preferred;
        e.subresource_only = true;
        it = top.emplace(parent, e).first;
      }
      it->second.subresources.insert(it->second.subresources.end(), subs.begin(), subs.end());
      SortUnique(it->second.subresources);
    }
    // GVK must map to exactly one resource within the group/version.
    std::map<std::string, std::vector<std::string>> by_kind;
    for (const auto& [name, e] : top) {
      if (!e.subresource_only && !e.gvk.kind.empty()) by_kind[e.gvk.kind].push_back(name);
    }
    for (auto& [name, e] : top) {
      auto k = by_kind.find(e.gvk.kind);
      if (k == by_kind.end() || k->second.size() < 2) continue;
      for (const std::string& other : k->second) {
        if (other != name) e.kind_shared_with.push_back(other);
      }
    }
    for (auto& [name, e] : top) {
      auto [it, inserted] = entries.emplace(e.gvr, e);
      // The same group/version listed twice: keep the first, flag disagreement.
      if (!inserted && !(it->second == e)) it->second.conflicting_listings = true;
    }
  }
  for (auto& [gvr, e] : entries) out.entries.push_back(std::move(e));
  out.scanned.assign(scanned.begin(), scanned.end());

  std::map<GroupVersion, std::string> degraded;
  for (const FailedGroupVersion& f : scan.failed) {
    GroupVersion gv{f.group, f.version};
    if (scanned.count(gv)) continue;  // listed successfully elsewhere in the same pass
    degraded.emplace(gv, f.error);
  }
  for (auto& [gv, error] : degraded) {
    out.degraded.push_back(gv);
    out.degraded_errors.push_back(error);
  }
  return out;
}

const CatalogSnapshot& ApiResourceCatalog::Update(const DiscoveryScan& scan) {
  ++scans_;
  CatalogSnapshot next = Normalize(scan);
  bool same = scans_ > 1 && next.complete == current_.complete &&
              next.entries == current_.entries && next.scanned == current_.scanned &&
              next.degraded == current_.degraded;
  next.generation = same ? current_.generation : current_.generation + 1;
  current_ = std::move(next);
  return current_;
}

CatalogStats ApiResourceCatalog::stats() const {
  CatalogStats s;
  s.scans = scans_;
  s.generation = current_.generation;
  s.group_versions = current_.scanned.size();
  s.entries = current_.entries.size();
  for (const CatalogEntry& e : current_.entries) s.subresources += e.subresources.size();
  s.degraded_group_versions = current_.degraded.size();
  return s;
}

}  // namespace reverser::typeset
