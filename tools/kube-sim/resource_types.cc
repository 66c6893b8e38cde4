#include "tools/kube-sim/resource_types.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "tools/kube-sim/crd_schema.h"

namespace reverser::kubesim {
namespace {

const std::vector<std::string> kAllVerbs = {"create", "delete", "deletecollection", "get",
                                            "list",   "patch",  "update",           "watch"};
const std::vector<std::string> kNoCollectionDelete = {"create", "delete", "get",  "list",
                                                      "patch",  "update", "watch"};
const std::vector<std::string> kSubVerbs = {"get", "patch", "update"};

ResourceType Builtin(std::string group, std::string plural, std::string singular, std::string kind,
                     bool namespaced, std::vector<std::string> short_names = {},
                     std::vector<std::string> categories = {}) {
  ResourceType t;
  t.group = std::move(group);
  t.version = "v1";
  t.plural = std::move(plural);
  t.singular = std::move(singular);
  t.kind = std::move(kind);
  t.namespaced = namespaced;
  t.verbs = kAllVerbs;
  t.short_names = std::move(short_names);
  t.categories = std::move(categories);
  return t;
}

SubresourceType Status() { return {"status", "", "", "", kSubVerbs}; }

std::vector<ResourceType> BuiltinTypes() {
  std::vector<ResourceType> v;
  // core/v1, in the alphabetical order /api/v1 lists them.
  v.push_back(Builtin("", "configmaps", "configmap", "ConfigMap", true, {"cm"}));
  auto events = Builtin("", "events", "event", "Event", true, {"ev"});
  v.push_back(events);
  auto ns = Builtin("", "namespaces", "namespace", "Namespace", false, {"ns"});
  ns.verbs = kNoCollectionDelete;
  ns.subresources = {{"finalize", "", "", "", {"update"}}, Status()};
  v.push_back(ns);
  auto pods = Builtin("", "pods", "pod", "Pod", true, {"po"}, {"all"});
  pods.subresources = {Status()};
  v.push_back(pods);
  v.push_back(Builtin("", "secrets", "secret", "Secret", true));
  v.push_back(Builtin("", "serviceaccounts", "serviceaccount", "ServiceAccount", true, {"sa"}));
  auto svc = Builtin("", "services", "service", "Service", true, {"svc"}, {"all"});
  svc.subresources = {Status()};
  v.push_back(svc);
  // apps/v1
  auto deploy =
      Builtin("apps", "deployments", "deployment", "Deployment", true, {"deploy"}, {"all"});
  deploy.subresources = {{"scale", "autoscaling", "v1", "Scale", kSubVerbs}, Status()};
  deploy.tracks_generation = true;
  v.push_back(deploy);
  auto sts = Builtin("apps", "statefulsets", "statefulset", "StatefulSet", true, {"sts"}, {"all"});
  sts.subresources = {{"scale", "autoscaling", "v1", "Scale", kSubVerbs}, Status()};
  sts.tracks_generation = true;
  v.push_back(sts);
  // authentication.k8s.io/v1 and authorization.k8s.io/v1: reviews, create only.
  auto review = [](std::string group, std::string plural, std::string singular, std::string kind) {
    ResourceType t =
        Builtin(std::move(group), std::move(plural), std::move(singular), std::move(kind), false);
    t.verbs = {"create"};
    t.review = true;
    return t;
  };
  v.push_back(review("authentication.k8s.io", "tokenreviews", "tokenreview", "TokenReview"));
  v.push_back(review("authorization.k8s.io", "subjectaccessreviews", "subjectaccessreview",
                     "SubjectAccessReview"));
  // policy/v1
  auto pdb = Builtin("policy", "poddisruptionbudgets", "poddisruptionbudget", "PodDisruptionBudget",
                     true, {"pdb"});
  pdb.subresources = {Status()};
  pdb.tracks_generation = true;
  v.push_back(pdb);
  // rbac.authorization.k8s.io/v1
  const std::string rbac = "rbac.authorization.k8s.io";
  v.push_back(
      Builtin(rbac, "clusterrolebindings", "clusterrolebinding", "ClusterRoleBinding", false));
  v.push_back(Builtin(rbac, "clusterroles", "clusterrole", "ClusterRole", false));
  v.push_back(Builtin(rbac, "rolebindings", "rolebinding", "RoleBinding", true));
  v.push_back(Builtin(rbac, "roles", "role", "Role", true));
  // admissionregistration.k8s.io/v1
  v.push_back(Builtin("admissionregistration.k8s.io", "validatingwebhookconfigurations",
                      "validatingwebhookconfiguration", "ValidatingWebhookConfiguration", false, {},
                      {"api-extensions"}));
  // apiextensions.k8s.io/v1
  auto crd =
      Builtin("apiextensions.k8s.io", "customresourcedefinitions", "customresourcedefinition",
              "CustomResourceDefinition", false, {"crd", "crds"}, {"api-extensions"});
  crd.subresources = {Status()};
  crd.tracks_generation = true;
  v.push_back(crd);
  // coordination.k8s.io/v1
  v.push_back(Builtin("coordination.k8s.io", "leases", "lease", "Lease", true));
  return v;
}

}  // namespace

std::string ResourceType::ApiVersion() const {
  return group.empty() ? version : absl::StrCat(group, "/", version);
}
std::string ResourceType::Key() const { return absl::StrCat(group, "/", plural); }
ErrorSubject ResourceType::Subject() const { return ErrorSubject{group, plural, kind}; }

const SubresourceType* ResourceType::FindSubresource(const std::string& name) const {
  for (const auto& s : subresources) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

bool ResourceType::HasVerb(const std::string& verb) const {
  return std::find(verbs.begin(), verbs.end(), verb) != verbs.end();
}

TypeRegistry::TypeRegistry() {
  for (auto& t : BuiltinTypes()) types_.push_back(std::make_shared<const ResourceType>(t));
  // kube-apiserver's group priority order (tests/testdata/k8s/discovery).
  builtin_group_order_ = {"apps",
                          "authentication.k8s.io",
                          "authorization.k8s.io",
                          "policy",
                          "rbac.authorization.k8s.io",
                          "admissionregistration.k8s.io",
                          "apiextensions.k8s.io",
                          "coordination.k8s.io"};
}

std::shared_ptr<const ResourceType> TypeRegistry::Find(const std::string& group,
                                                       const std::string& version,
                                                       const std::string& plural) const {
  std::lock_guard lock(mu_);
  for (const auto& t : types_) {
    if (t->group == group && t->version == version && t->plural == plural) return t;
  }
  return nullptr;
}

std::shared_ptr<const ResourceType> TypeRegistry::FindByKind(const std::string& group,
                                                             const std::string& version,
                                                             const std::string& kind) const {
  std::lock_guard lock(mu_);
  for (const auto& t : types_) {
    if (t->group == group && t->version == version && t->kind == kind) return t;
  }
  return nullptr;
}

std::vector<std::shared_ptr<const ResourceType>> TypeRegistry::All() const {
  auto groups = Groups();
  std::lock_guard lock(mu_);
  std::vector<std::shared_ptr<const ResourceType>> out;
  for (const auto& t : types_) {
    if (t->group.empty()) out.push_back(t);
  }
  for (const auto& [g, versions] : groups) {
    for (const auto& v : versions) {
      for (const auto& t : types_) {
        if (t->group == g && t->version == v) out.push_back(t);
      }
    }
  }
  return out;
}

std::vector<std::pair<std::string, std::vector<std::string>>> TypeRegistry::Groups() const {
  std::lock_guard lock(mu_);
  std::vector<std::string> order = builtin_group_order_;
  std::vector<std::string> custom;
  for (const auto& t : types_) {
    if (t->group.empty()) continue;
    if (std::find(order.begin(), order.end(), t->group) == order.end() &&
        std::find(custom.begin(), custom.end(), t->group) == custom.end()) {
      custom.push_back(t->group);
    }
  }
  std::sort(custom.begin(), custom.end());
  order.insert(order.end(), custom.begin(), custom.end());
  std::vector<std::pair<std::string, std::vector<std::string>>> out;
  for (const auto& g : order) {
    std::vector<std::string> versions;
    for (const auto& t : types_) {
      if (t->group == g &&
          std::find(versions.begin(), versions.end(), t->version) == versions.end()) {
        versions.push_back(t->version);
      }
    }
    if (!versions.empty()) out.emplace_back(g, versions);
  }
  return out;
}

bool TypeRegistry::HasGroupVersion(const std::string& group, const std::string& version) const {
  std::lock_guard lock(mu_);
  for (const auto& t : types_) {
    if (t->group == group && t->version == version) return true;
  }
  return false;
}

void TypeRegistry::AddCustom(std::vector<ResourceType> versions) {
  if (versions.empty()) return;
  RemoveCustom(versions[0].group, versions[0].plural);
  std::lock_guard lock(mu_);
  for (auto& t : versions) types_.push_back(std::make_shared<const ResourceType>(std::move(t)));
  ++generation_;
}

void TypeRegistry::RemoveCustom(const std::string& group, const std::string& plural) {
  std::lock_guard lock(mu_);
  auto it = std::remove_if(types_.begin(), types_.end(), [&](const auto& t) {
    return t->custom && t->group == group && t->plural == plural;
  });
  if (it != types_.end()) {
    types_.erase(it, types_.end());
    ++generation_;
  }
}

uint64_t TypeRegistry::generation() const {
  std::lock_guard lock(mu_);
  return generation_;
}

ApiOr<std::vector<ResourceType>> TypesFromCrd(const Json& crd) {
  const Json& spec = crd.value("spec", Json::object());
  const Json& names = spec.value("names", Json::object());
  ResourceType base;
  base.custom = true;
  base.group = spec.value("group", "");
  base.plural = names.value("plural", "");
  base.singular = names.value("singular", "");
  base.kind = names.value("kind", "");
  base.namespaced = spec.value("scope", "Namespaced") == "Namespaced";
  base.verbs = kAllVerbs;
  base.tracks_generation = true;
  if (base.singular.empty()) {
    base.singular = base.kind;
    std::transform(base.singular.begin(), base.singular.end(), base.singular.begin(), ::tolower);
  }
  if (names.contains("shortNames") && names["shortNames"].is_array()) {
    for (const auto& s : names["shortNames"]) {
      if (s.is_string()) base.short_names.push_back(s.get<std::string>());
    }
  }
  if (names.contains("categories") && names["categories"].is_array()) {
    for (const auto& s : names["categories"]) {
      if (s.is_string()) base.categories.push_back(s.get<std::string>());
    }
  }
  std::vector<ResourceType> out;
  const Json versions = spec.value("versions", Json::array());
  if (!versions.is_array()) return BadRequest("spec.versions must be a list");
  for (const auto& v : versions) {
    if (!v.is_object() || !v.value("served", true)) continue;
    ResourceType t = base;
    t.version = v.value("name", "");
    const Json& schema = v.value("schema", Json::object());
    if (schema.is_object() && schema.contains("openAPIV3Schema")) {
      auto compiled = CrdSchema::Compile(schema["openAPIV3Schema"], "");
      if (auto* ok = std::get_if<std::shared_ptr<const CrdSchema>>(&compiled)) {
        t.schema = *ok;
        t.openapi_schema = schema["openAPIV3Schema"];
      }
    }
    const Json sub = v.value("subresources", Json::object());
    if (sub.is_object() && sub.contains("status")) t.subresources.push_back(Status());
    if (sub.is_object() && sub.contains("scale") && sub["scale"].is_object()) {
      t.subresources.push_back({"scale", "autoscaling", "v1", "Scale", kSubVerbs});
      t.spec_replicas_path = sub["scale"].value("specReplicasPath", ".spec.replicas");
      t.status_replicas_path = sub["scale"].value("statusReplicasPath", ".status.replicas");
    }
    // The storage version goes first: it is the preferred version in discovery.
    if (v.value("storage", false)) {
      out.insert(out.begin(), std::move(t));
    } else {
      out.push_back(std::move(t));
    }
  }
  return out;
}

}  // namespace reverser::kubesim
