#include "libs/typeset/kube_scan.h"

#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace reverser::typeset {

DiscoveryScan ScanFromDiscovery(const kube::DiscoveryResult& result,
                                std::vector<std::string> crd_group_resources) {
  DiscoveryScan scan;
  std::map<std::pair<std::string, std::string>, ServedGroupVersion> gvs;
  for (const kube::ApiResource& r : result.resources) {
    ServedGroupVersion& gv = gvs[{r.gvr.group, r.gvr.version}];
    gv.group = r.gvr.group;
    gv.version = r.gvr.version;
    gv.preferred = gv.preferred || r.preferred_version;
    gv.resources.push_back({r.gvr.resource, r.gvk.kind, r.scope, r.verbs});
    for (const kube::ApiSubresource& sub : r.subresources) {
      gv.resources.push_back(
          {absl::StrCat(r.gvr.resource, "/", sub.name), sub.gvk.kind, r.scope, sub.verbs});
    }
  }
  for (auto& [key, gv] : gvs) scan.group_versions.push_back(std::move(gv));
  // As in the reference, only an error-free discovery is complete: with any failure, a group
  // that is neither listed nor reported failed is carried forward rather than judged absent.
  scan.complete = result.failures.empty();
  for (const kube::GroupVersionFailure& f : result.failures) {
    if (f.group_version.empty()) continue;
    auto parsed = core::ParseApiVersion(f.group_version);
    if (!parsed.ok()) continue;
    scan.failed.push_back({parsed->first, parsed->second, std::string(f.status.message())});
  }
  scan.crd_group_resources = std::move(crd_group_resources);
  return scan;
}

std::vector<std::string> CrdGroupResources(const nlohmann::json& crds) {
  std::vector<std::string> out;
  auto add = [&out](const nlohmann::json& crd) {
    if (!crd.is_object()) return;
    auto spec = crd.find("spec");
    if (spec == crd.end() || !spec->is_object()) return;
    auto group = spec->find("group");
    auto names = spec->find("names");
    if (group == spec->end() || !group->is_string() || names == spec->end() ||
        !names->is_object()) {
      return;
    }
    auto plural = names->find("plural");
    if (plural == names->end() || !plural->is_string()) return;
    std::string g = group->get<std::string>();
    std::string p = plural->get<std::string>();
    if (p.empty()) return;
    out.push_back(g.empty() ? p : absl::StrCat(g, "/", p));
  };
  if (!crds.is_object()) return out;
  auto items = crds.find("items");
  if (items != crds.end() && items->is_array()) {
    for (const auto& item : *items) add(item);
  } else {
    add(crds);
  }
  return out;
}

}  // namespace reverser::typeset
