#include "tools/kube-sim/discovery.h"

#include <openssl/sha.h>

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace reverser::kubesim {
namespace {

Json GroupVersionFor(const std::string& group, const std::string& version) {
  return {{"groupVersion", absl::StrCat(group, "/", version)}, {"version", version}};
}

Json GroupJson(const std::string& group, const std::vector<std::string>& versions) {
  Json vs = Json::array();
  for (const auto& v : versions) vs.push_back(GroupVersionFor(group, v));
  return {
      {"name", group}, {"versions", vs}, {"preferredVersion", GroupVersionFor(group, versions[0])}};
}

Json StringList(const std::vector<std::string>& v) {
  Json a = Json::array();
  for (const auto& s : v) a.push_back(s);
  return a;
}

}  // namespace

Json LegacyApiVersions(const std::string& server_address) {
  return {{"kind", "APIVersions"},
          {"versions", {"v1"}},
          {"serverAddressByClientCIDRs",
           {{{"clientCIDR", "0.0.0.0/0"}, {"serverAddress", server_address}}}}};
}

Json LegacyGroupList(const TypeRegistry& registry) {
  Json groups = Json::array();
  for (const auto& [g, versions] : registry.Groups()) groups.push_back(GroupJson(g, versions));
  return {{"kind", "APIGroupList"}, {"apiVersion", "v1"}, {"groups", groups}};
}

Json LegacyGroup(const TypeRegistry& registry, const std::string& group) {
  for (const auto& [g, versions] : registry.Groups()) {
    if (g != group) continue;
    Json j = GroupJson(g, versions);
    j["kind"] = "APIGroup";
    j["apiVersion"] = "v1";
    return j;
  }
  return nullptr;
}

Json LegacyResourceList(const TypeRegistry& registry, const std::string& group,
                        const std::string& version) {
  if (!registry.HasGroupVersion(group, version)) return nullptr;
  Json resources = Json::array();
  for (const auto& t : registry.All()) {
    if (t->group != group || t->version != version) continue;
    Json r = {{"name", t->plural},
              {"singularName", t->singular},
              {"namespaced", t->namespaced},
              {"kind", t->kind},
              {"verbs", StringList(t->verbs)}};
    if (!t->short_names.empty()) r["shortNames"] = StringList(t->short_names);
    if (!t->categories.empty()) r["categories"] = StringList(t->categories);
    resources.push_back(r);
    for (const auto& s : t->subresources) {
      Json sr = {{"name", absl::StrCat(t->plural, "/", s.name)},
                 {"singularName", ""},
                 {"namespaced", t->namespaced},
                 {"kind", s.kind.empty() ? t->kind : s.kind},
                 {"verbs", StringList(s.verbs)}};
      if (!s.group.empty()) {
        sr["group"] = s.group;
        sr["version"] = s.version;
      }
      resources.push_back(sr);
    }
  }
  Json list = {{"kind", "APIResourceList"},
               {"groupVersion", group.empty() ? version : absl::StrCat(group, "/", version)},
               {"resources", resources}};
  if (!group.empty()) list["apiVersion"] = "v1";  // the core list has none (real quirk)
  return list;
}

Json AggregatedDiscovery(const TypeRegistry& registry, bool core, Profile profile,
                         const std::string& version) {
  Json items = Json::array();
  auto version_entry = [&](const std::string& group, const std::string& version) {
    Json resources = Json::array();
    for (const auto& t : registry.All()) {
      if (t->group != group || t->version != version) continue;
      // Built-ins carry empty group/version in responseKind; CRDs carry theirs.
      Json kind = {{"group", t->custom ? t->group : ""},
                   {"version", t->custom ? t->version : ""},
                   {"kind", t->kind}};
      Json r = {{"resource", t->plural},
                {"singularResource", t->singular},
                {"scope", t->namespaced ? "Namespaced" : "Cluster"},
                {"responseKind", kind},
                {"verbs", StringList(t->verbs)}};
      if (!t->short_names.empty()) r["shortNames"] = StringList(t->short_names);
      if (!t->categories.empty()) r["categories"] = StringList(t->categories);
      if (!t->subresources.empty()) {
        Json subs = Json::array();
        for (const auto& s : t->subresources) {
          Json sk = s.kind.empty()
                        ? kind
                        : Json{{"group", s.group}, {"version", s.version}, {"kind", s.kind}};
          subs.push_back(
              {{"subresource", s.name}, {"responseKind", sk}, {"verbs", StringList(s.verbs)}});
        }
        r["subresources"] = subs;
      }
      resources.push_back(r);
    }
    return Json{{"version", version}, {"freshness", "Current"}, {"resources", resources}};
  };
  if (core) {
    Json meta = profile == Profile::kLegacy ? Json{{"creationTimestamp", nullptr}} : Json::object();
    items.push_back({{"metadata", meta}, {"versions", {version_entry("", "v1")}}});
  } else {
    for (const auto& [g, versions] : registry.Groups()) {
      Json vs = Json::array();
      for (const auto& v : versions) vs.push_back(version_entry(g, v));
      Json meta = {{"name", g}};
      if (profile == Profile::kLegacy) meta["creationTimestamp"] = nullptr;
      items.push_back({{"metadata", meta}, {"versions", vs}});
    }
  }
  return {{"kind", "APIGroupDiscoveryList"},
          {"apiVersion", "apidiscovery.k8s.io/" + version},
          {"metadata", Json::object()},
          {"items", items}};
}

std::string NegotiateAggregatedDiscovery(const std::string& accept, bool allow_v2beta1) {
  for (absl::string_view part : absl::StrSplit(accept, ',')) {
    bool g = false, as = false;
    std::string v;
    for (absl::string_view param : absl::StrSplit(part, ';')) {
      param = absl::StripAsciiWhitespace(param);
      if (param == "g=apidiscovery.k8s.io") g = true;
      if (param == "as=APIGroupDiscoveryList") as = true;
      if (absl::ConsumePrefix(&param, "v=")) v = std::string(param);
    }
    if (!g || !as) continue;
    if (v == "v2" || (v == "v2beta1" && allow_v2beta1)) return v;
  }
  return "";
}

std::string AggregatedContentType(const std::string& version) {
  return absl::StrCat("application/json;g=apidiscovery.k8s.io;v=", version,
                      ";as=APIGroupDiscoveryList");
}

Json MinimalOpenApiV3(const TypeRegistry& registry, const std::string& group,
                      const std::string& version) {
  Json paths = Json::object();
  Json schemas = Json::object();
  Json field_validation = {{"name", "fieldValidation"},
                           {"in", "query"},
                           {"description",
                            "fieldValidation instructs the server on how to handle "
                            "objects in the request containing unknown or "
                            "duplicate fields."},
                           {"schema", {{"type", "string"}, {"uniqueItems", true}}}};
  for (const auto& t : registry.All()) {
    if (t->group != group || t->version != version) continue;
    std::string prefix = group.empty() ? absl::StrCat("/api/", version)
                                       : absl::StrCat("/apis/", group, "/", version);
    std::string path = t->namespaced
                           ? absl::StrCat(prefix, "/namespaces/{namespace}/", t->plural, "/{name}")
                           : absl::StrCat(prefix, "/", t->plural, "/{name}");
    Json gvk = {{"group", group}, {"version", version}, {"kind", t->kind}};
    if (t->review) {
      // Reviews are created on the collection and have no other operations.
      Json post = {{"parameters", {field_validation}},
                   {"x-kubernetes-action", "post"},
                   {"x-kubernetes-group-version-kind", gvk},
                   {"responses", {{"201", {{"description", "Created"}}}}}};
      paths[absl::StrCat(prefix, "/", t->plural)] = {{"post", post}};
      continue;
    }
    Json op = {{"parameters", {field_validation}},
               {"x-kubernetes-action", "patch"},
               {"x-kubernetes-group-version-kind", gvk},
               {"responses", {{"200", {{"description", "OK"}}}}}};
    paths[path] = {{"patch", op}, {"put", op}};
    paths[path]["put"]["x-kubernetes-action"] = "put";
    if (t->openapi_schema.is_object()) {
      // As kube-apiserver names a CRD's schema: the group's labels reversed, version, kind.
      std::vector<std::string> labels = absl::StrSplit(group, '.');
      std::reverse(labels.begin(), labels.end());
      Json schema = t->openapi_schema;
      schema["x-kubernetes-group-version-kind"] = Json::array({gvk});
      schemas[absl::StrCat(absl::StrJoin(labels, "."), ".", version, ".", t->kind)] = schema;
    }
  }
  return {{"openapi", "3.0.0"},
          {"info", {{"title", "Kubernetes"}, {"version", "v1.34.0"}}},
          {"paths", paths},
          {"components", {{"schemas", schemas}}}};
}

std::string Sha512Hex(const std::string& data) {
  unsigned char digest[SHA512_DIGEST_LENGTH];
  SHA512(reinterpret_cast<const unsigned char*>(data.data()), data.size(), digest);
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : digest) {
    out.push_back(kHex[c >> 4]);
    out.push_back(kHex[c & 15]);
  }
  return out;
}

}  // namespace reverser::kubesim
