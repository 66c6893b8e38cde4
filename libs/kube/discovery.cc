#include "libs/kube/discovery.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "libs/core/status.h"

namespace reverser::kube {
namespace {

using nlohmann::json;

std::string Str(const json& object, const char* key) {
  if (!object.is_object()) return "";
  auto it = object.find(key);
  if (it == object.end() || !it->is_string()) return "";
  return it->get<std::string>();
}

std::vector<std::string> Strings(const json& object, const char* key) {
  std::vector<std::string> out;
  if (!object.is_object()) return out;
  auto it = object.find(key);
  if (it == object.end() || !it->is_array()) return out;
  for (const json& value : *it) {
    if (value.is_string()) out.push_back(value.get<std::string>());
  }
  return out;
}

// A responseKind with empty group/version means "the resource's own group/version".
core::GroupVersionKind ResponseKind(const json& resource, const std::string& group,
                                    const std::string& version) {
  core::GroupVersionKind gvk{group, version, ""};
  auto kind = resource.find("responseKind");
  if (kind != resource.end() && kind->is_object()) {
    gvk.kind = Str(*kind, "kind");
    if (std::string g = Str(*kind, "group"); !g.empty()) gvk.group = g;
    if (std::string v = Str(*kind, "version"); !v.empty()) gvk.version = v;
  }
  return gvk;
}

absl::Status ParseAggregatedVersion(const std::string& group, const json& version_entry,
                                    bool preferred, DiscoveryResult& into) {
  std::string version = Str(version_entry, "version");
  if (version.empty()) return absl::DataLossError("aggregated discovery: version without a name");
  auto resources = version_entry.find("resources");
  if (resources == version_entry.end() || resources->is_null()) return absl::OkStatus();
  if (!resources->is_array()) {
    return absl::DataLossError("aggregated discovery: \"resources\" is not a list");
  }
  for (const json& entry : *resources) {
    ApiResource resource;
    resource.gvr = {group, version, Str(entry, "resource")};
    if (resource.gvr.resource.empty()) continue;
    resource.gvk = ResponseKind(entry, group, version);
    resource.scope =
        Str(entry, "scope") == "Cluster" ? core::Scope::kCluster : core::Scope::kNamespaced;
    resource.singular = Str(entry, "singularResource");
    resource.verbs = Strings(entry, "verbs");
    resource.short_names = Strings(entry, "shortNames");
    resource.categories = Strings(entry, "categories");
    resource.preferred_version = preferred;
    if (auto subs = entry.find("subresources"); subs != entry.end() && subs->is_array()) {
      for (const json& sub : *subs) {
        resource.subresources.push_back(
            {Str(sub, "subresource"), ResponseKind(sub, group, version), Strings(sub, "verbs")});
      }
    }
    into.resources.push_back(std::move(resource));
  }
  return absl::OkStatus();
}

std::string JoinGroupVersion(const std::string& group, const std::string& version) {
  return group.empty() ? version : absl::StrCat(group, "/", version);
}

bool IsAggregatedResponse(const HttpResponse& response) {
  return absl::StrContains(response.Header("Content-Type"), "as=APIGroupDiscoveryList");
}

absl::StatusOr<json> ParseBody(const HttpResponse& response) {
  json parsed = json::parse(response.body, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded() || !parsed.is_object()) {
    return absl::DataLossError("discovery document is not a JSON object");
  }
  return parsed;
}

// Fetches /api/<v> or /apis/<g>/<v>, recording a failure instead of failing.
void DiscoverLegacyGroupVersion(RestClient& client, const std::string& group_version,
                                bool preferred, DiscoveryResult& into) {
  bool core = !absl::StrContains(group_version, '/');
  std::string path =
      core ? absl::StrCat("/api/", group_version) : absl::StrCat("/apis/", group_version);
  absl::Status status = [&]() -> absl::Status {
    ASSIGN_OR_RETURN(HttpResponse response, client.GetRaw(path, {{"Accept", "application/json"}}));
    ASSIGN_OR_RETURN(json list, ParseBody(response));
    return ParseApiResourceList(list, group_version, preferred, into);
  }();
  if (!status.ok()) into.failures.push_back({group_version, status});
}

// /api: aggregated (core group only) or APIVersions.
absl::Status DiscoverCore(RestClient& client, DiscoveryResult& into, bool& aggregated) {
  ASSIGN_OR_RETURN(HttpResponse response,
                   client.GetRaw("/api", {{"Accept", kAggregatedDiscoveryAccept}}));
  ASSIGN_OR_RETURN(json doc, ParseBody(response));
  if (IsAggregatedResponse(response)) {
    aggregated = true;
    return ParseAggregatedDiscovery(doc, into);
  }
  aggregated = false;
  std::vector<std::string> versions = Strings(doc, "versions");
  for (size_t i = 0; i < versions.size(); ++i) {
    DiscoverLegacyGroupVersion(client, versions[i], i == 0, into);
  }
  return absl::OkStatus();
}

// /apis: aggregated or APIGroupList.
absl::Status DiscoverGroups(RestClient& client, DiscoveryResult& into, bool& aggregated) {
  ASSIGN_OR_RETURN(HttpResponse response,
                   client.GetRaw("/apis", {{"Accept", kAggregatedDiscoveryAccept}}));
  ASSIGN_OR_RETURN(json doc, ParseBody(response));
  if (IsAggregatedResponse(response)) {
    aggregated = true;
    return ParseAggregatedDiscovery(doc, into);
  }
  aggregated = false;
  auto groups = doc.find("groups");
  if (groups == doc.end() || groups->is_null()) return absl::OkStatus();
  if (!groups->is_array()) return absl::DataLossError("APIGroupList \"groups\" is not a list");
  for (const json& group : *groups) {
    std::string preferred;
    if (auto it = group.find("preferredVersion"); it != group.end()) {
      preferred = Str(*it, "groupVersion");
    }
    auto versions = group.find("versions");
    if (versions == group.end() || !versions->is_array()) continue;
    for (const json& version : *versions) {
      std::string group_version = Str(version, "groupVersion");
      if (group_version.empty()) continue;
      DiscoverLegacyGroupVersion(client, group_version, group_version == preferred, into);
    }
  }
  return absl::OkStatus();
}

}  // namespace

bool ApiResource::HasVerb(absl::string_view verb) const {
  return std::find(verbs.begin(), verbs.end(), verb) != verbs.end();
}

const ApiResource* DiscoveryResult::FindPreferred(absl::string_view group,
                                                  absl::string_view resource) const {
  for (const ApiResource& r : resources) {
    if (r.preferred_version && r.gvr.group == group && r.gvr.resource == resource) return &r;
  }
  return nullptr;
}

const ApiResource* DiscoveryResult::Find(const core::GroupVersionResource& gvr) const {
  for (const ApiResource& r : resources) {
    if (r.gvr == gvr) return &r;
  }
  return nullptr;
}

absl::Status ParseAggregatedDiscovery(const json& list, DiscoveryResult& into) {
  if (!list.is_object() || Str(list, "kind") != "APIGroupDiscoveryList") {
    return absl::DataLossError("not an APIGroupDiscoveryList");
  }
  auto items = list.find("items");
  if (items == list.end() || items->is_null()) return absl::OkStatus();
  if (!items->is_array()) return absl::DataLossError("APIGroupDiscoveryList items is not a list");
  for (const json& item : *items) {
    std::string group;
    if (auto meta = item.find("metadata"); meta != item.end()) group = Str(*meta, "name");
    auto versions = item.find("versions");
    if (versions == item.end() || !versions->is_array()) continue;
    // Versions are listed in preference order.
    bool first = true;
    for (const json& version : *versions) {
      std::string name = Str(version, "version");
      std::string group_version = JoinGroupVersion(group, name);
      bool preferred = first;
      first = false;
      if (Str(version, "freshness") == "Stale") {
        // client-go reports stale aggregated APIs as failed group versions.
        into.failures.push_back(
            {group_version,
             absl::UnavailableError(absl::StrCat("discovery for ", group_version, " is stale"))});
        continue;
      }
      if (absl::Status status = ParseAggregatedVersion(group, version, preferred, into);
          !status.ok()) {
        into.failures.push_back({group_version, status});
      }
    }
  }
  return absl::OkStatus();
}

absl::Status ParseApiResourceList(const json& list, absl::string_view group_version, bool preferred,
                                  DiscoveryResult& into) {
  if (!list.is_object() || Str(list, "kind") != "APIResourceList") {
    return absl::DataLossError(absl::StrCat(group_version, ": not an APIResourceList"));
  }
  std::vector<std::string> parts = absl::StrSplit(group_version, absl::MaxSplits('/', 1));
  std::string group = parts.size() == 2 ? parts[0] : "";
  std::string version = parts.back();
  auto resources = list.find("resources");
  if (resources == list.end() || resources->is_null()) return absl::OkStatus();
  if (!resources->is_array()) {
    return absl::DataLossError(absl::StrCat(group_version, ": \"resources\" is not a list"));
  }
  // Subresources ("deployments/scale") arrive as separate entries; attach them to their parent.
  std::vector<const json*> subresources;
  size_t first_new = into.resources.size();
  for (const json& entry : *resources) {
    std::string name = Str(entry, "name");
    if (name.empty()) continue;
    if (absl::StrContains(name, '/')) {
      subresources.push_back(&entry);
      continue;
    }
    ApiResource resource;
    resource.gvr = {group, version, name};
    resource.gvk = {group, version, Str(entry, "kind")};
    if (std::string g = Str(entry, "group"); !g.empty()) resource.gvk.group = g;
    if (std::string v = Str(entry, "version"); !v.empty()) resource.gvk.version = v;
    auto namespaced = entry.find("namespaced");
    resource.scope = namespaced != entry.end() && namespaced->is_boolean() && *namespaced
                         ? core::Scope::kNamespaced
                         : core::Scope::kCluster;
    resource.singular = Str(entry, "singularName");
    resource.verbs = Strings(entry, "verbs");
    resource.short_names = Strings(entry, "shortNames");
    resource.categories = Strings(entry, "categories");
    resource.preferred_version = preferred;
    into.resources.push_back(std::move(resource));
  }
  for (const json* entry : subresources) {
    std::vector<std::string> name = absl::StrSplit(Str(*entry, "name"), absl::MaxSplits('/', 1));
    for (size_t i = first_new; i < into.resources.size(); ++i) {
      ApiResource& parent = into.resources[i];
      if (parent.gvr.resource != name[0]) continue;
      ApiSubresource sub{name[1], {group, version, Str(*entry, "kind")}, Strings(*entry, "verbs")};
      if (std::string g = Str(*entry, "group"); !g.empty()) sub.gvk.group = g;
      if (std::string v = Str(*entry, "version"); !v.empty()) sub.gvk.version = v;
      parent.subresources.push_back(std::move(sub));
      break;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<DiscoveryResult> Discover(RestClient& client) {
  DiscoveryResult result;
  bool core_aggregated = false;
  bool groups_aggregated = false;
  absl::Status core = DiscoverCore(client, result, core_aggregated);
  absl::Status groups = DiscoverGroups(client, result, groups_aggregated);
  if (!core.ok() && !groups.ok()) {
    return core::Annotate(core, "discovery: /api and /apis both failed; /api");
  }
  if (!core.ok()) result.failures.push_back({"v1", core});
  if (!groups.ok()) result.failures.push_back({"", groups});
  result.aggregated = core.ok() && groups.ok() && core_aggregated && groups_aggregated;
  return result;
}

}  // namespace reverser::kube
