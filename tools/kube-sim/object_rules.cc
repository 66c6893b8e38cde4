#include "tools/kube-sim/object_rules.h"

#include <random>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "tools/kube-sim/admission.h"
#include "tools/kube-sim/crd_schema.h"
#include "tools/kube-sim/managed_fields.h"
#include "tools/kube-sim/names.h"

namespace reverser::kubesim {
namespace {

std::mt19937_64& Rng() {
  thread_local std::mt19937_64 rng(std::random_device{}());
  return rng;
}

std::vector<std::string> ValidateDns1035(const std::string& value) {
  std::vector<std::string> errs;
  if (value.size() > 63) errs.push_back("must be no more than 63 characters");
  if (!IsDns1035Label(value)) {
    errs.push_back(
        "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with "
        "an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or "
        "'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')");
  }
  return errs;
}

void DefaultContainers(Json& pod_spec) {
  if (!pod_spec.is_object()) return;
  for (const char* list : {"containers", "initContainers"}) {
    if (!pod_spec.contains(list) || !pod_spec[list].is_array()) continue;
    for (auto& c : pod_spec[list]) {
      if (!c.is_object()) continue;
      if (!c.contains("imagePullPolicy")) {
        std::string image = c.value("image", "");
        std::string tail = image.substr(
            image.find_last_of('/') == std::string::npos ? 0 : image.find_last_of('/'));
        bool latest = tail.find(':') == std::string::npos || absl::EndsWith(image, ":latest");
        c["imagePullPolicy"] = latest ? "Always" : "IfNotPresent";
      }
      if (!c.contains("terminationMessagePath")) {
        c["terminationMessagePath"] = "/dev/termination-log";
      }
      if (!c.contains("terminationMessagePolicy")) c["terminationMessagePolicy"] = "File";
      if (!c.contains("resources")) c["resources"] = Json::object();
      if (c.contains("ports") && c["ports"].is_array()) {
        for (auto& p : c["ports"]) {
          if (p.is_object() && !p.contains("protocol")) p["protocol"] = "TCP";
        }
      }
    }
  }
  if (!pod_spec.contains("restartPolicy")) pod_spec["restartPolicy"] = "Always";
  if (!pod_spec.contains("terminationGracePeriodSeconds")) {
    pod_spec["terminationGracePeriodSeconds"] = 30;
  }
  if (!pod_spec.contains("dnsPolicy")) pod_spec["dnsPolicy"] = "ClusterFirst";
  if (!pod_spec.contains("securityContext")) pod_spec["securityContext"] = Json::object();
  if (!pod_spec.contains("schedulerName")) pod_spec["schedulerName"] = "default-scheduler";
}

}  // namespace

std::optional<ApiError> CheckFieldTypes(const ResourceType& type, const Json& o) {
  auto fail = [&](const std::string& field, const Json& v, const std::string& go_type) {
    return BadRequest(absl::StrCat(type.kind, " in version \"", type.version,
                                   "\" cannot be handled as a ", type.kind,
                                   ": json: cannot unmarshal ", v.type_name(),
                                   " into Go struct field ", field, " of type ", go_type));
  };
  if (!o.is_object()) return BadRequest("the body must be a JSON object");
  if (!o.contains("metadata")) return std::nullopt;
  const Json& m = o["metadata"];
  if (!m.is_object()) return fail("ObjectMeta.metadata", m, "v1.ObjectMeta");
  for (const char* k : {"name", "generateName", "namespace", "uid", "resourceVersion"}) {
    if (m.contains(k) && !m[k].is_string() && !m[k].is_null()) {
      return fail(absl::StrCat("ObjectMeta.metadata.", k), m[k], "string");
    }
  }
  for (const char* k : {"labels", "annotations"}) {
    if (!m.contains(k) || m[k].is_null()) continue;
    if (!m[k].is_object())
      return fail(absl::StrCat("ObjectMeta.metadata.", k), m[k], "map[string]string");
    for (const auto& [mk, mv] : m[k].items()) {
      if (!mv.is_string()) return fail(absl::StrCat("ObjectMeta.metadata.", k), mv, "string");
    }
  }
  if (m.contains("finalizers") && !m["finalizers"].is_null()) {
    if (!m["finalizers"].is_array())
      return fail("ObjectMeta.metadata.finalizers", m["finalizers"], "[]string");
    for (const auto& f : m["finalizers"]) {
      if (!f.is_string()) return fail("ObjectMeta.metadata.finalizers", f, "string");
    }
  }
  if (type.plural == "configmaps" || type.plural == "secrets") {
    for (const char* k : {"data", "binaryData", "stringData"}) {
      if (!o.contains(k) || o[k].is_null()) continue;
      if (!o[k].is_object())
        return fail(absl::StrCat(type.kind, ".", k), o[k], "map[string]string");
      for (const auto& [dk, dv] : o[k].items()) {
        if (!dv.is_string()) return fail(absl::StrCat(type.kind, ".", k), dv, "string");
      }
    }
  }
  return std::nullopt;
}

std::string NewUid() {
  std::uniform_int_distribution<uint64_t> dist;
  uint64_t a = dist(Rng()), b = dist(Rng());
  a = (a & 0xFFFFFFFFFFFF0FFFULL) | 0x0000000000004000ULL;  // version 4
  b = (b & 0x3FFFFFFFFFFFFFFFULL) | 0x8000000000000000ULL;  // variant
  return absl::StrFormat("%08x-%04x-%04x-%04x-%012x", a >> 32, (a >> 16) & 0xFFFF, a & 0xFFFF,
                         b >> 48, b & 0xFFFFFFFFFFFFULL);
}

std::string GenerateName(const std::string& prefix) {
  static const char kAlphabet[] = "bcdfghjklmnpqrstvwxz2456789";
  std::uniform_int_distribution<int> dist(0, sizeof(kAlphabet) - 2);
  std::string out = prefix.size() > 58 ? prefix.substr(0, 58) : prefix;
  for (int i = 0; i < 5; ++i) out.push_back(kAlphabet[dist(Rng())]);
  return out;
}

std::vector<StatusCause> ValidateObject(const ResourceType& type, const Json& object) {
  std::vector<StatusCause> causes;
  const Json& meta = object.value("metadata", Json::object());
  std::string name = meta.value("name", "");
  if (name.empty()) {
    causes.push_back(FieldRequired("metadata.name", "name or generateName is required"));
    return causes;
  }
  std::vector<std::string> errs;
  if (!type.group.empty() && absl::StartsWith(type.group, "rbac.authorization.k8s.io")) {
    errs = ValidatePathSegment(name);
  } else if (type.plural == "namespaces") {
    errs = ValidateLabel(name);
  } else if (type.plural == "services") {
    errs = ValidateDns1035(name);
  } else {
    errs = ValidateSubdomain(name);
  }
  for (const auto& e : errs) causes.push_back(FieldInvalid("metadata.name", name, e));
  if (type.plural == "customresourcedefinitions" && causes.empty()) {
    const Json& spec = object.value("spec", Json::object());
    std::string want = absl::StrCat(spec.value("names", Json::object()).value("plural", ""), ".",
                                    spec.value("group", ""));
    if (name != want) {
      causes.push_back(
          FieldInvalid("metadata.name", name, "must be spec.names.plural+\".\"+spec.group"));
    }
    if (!spec.contains("versions") || !spec["versions"].is_array() || spec["versions"].empty()) {
      causes.push_back(FieldRequired("spec.versions",
                                     "must have exactly one version marked as "
                                     "storage version"));
    } else {
      const Json& versions = spec["versions"];
      for (size_t i = 0; i < versions.size(); ++i) {
        const std::string field = absl::StrCat("spec.versions[", i, "].schema.openAPIV3Schema");
        const Json& v = versions[i];
        if (!v.is_object() || !v.contains("schema") || !v["schema"].is_object() ||
            !v["schema"].contains("openAPIV3Schema")) {
          causes.push_back(FieldRequired(field, "schemas are required"));
          continue;
        }
        auto compiled = CrdSchema::Compile(v["schema"]["openAPIV3Schema"], field);
        if (auto* errs = std::get_if<std::vector<StatusCause>>(&compiled)) {
          causes.insert(causes.end(), errs->begin(), errs->end());
        }
      }
    }
  }
  if (type.plural == "validatingwebhookconfigurations") {
    std::vector<StatusCause> webhook_causes = ValidateWebhookConfiguration(object);
    causes.insert(causes.end(), webhook_causes.begin(), webhook_causes.end());
  }
  if (meta.contains("labels") && !meta["labels"].is_object()) {
    causes.push_back(FieldInvalid("metadata.labels", meta["labels"], "must be a map"));
  }
  return causes;
}

Json ApplyDefaults(const ResourceType& type, Json o) {
  if (type.custom) return o;
  const std::string& p = type.plural;
  if (p == "namespaces") {
    o["metadata"]["labels"]["kubernetes.io/metadata.name"] = o["metadata"].value("name", "");
    // The namespace controller's finalizer, whatever the client sent (an empty spec too).
    if (!o["spec"].is_object()) o["spec"] = Json::object();
    if (!o["spec"].contains("finalizers")) o["spec"]["finalizers"] = {"kubernetes"};
    if (!o.contains("status")) o["status"] = {{"phase", "Active"}};
  } else if (p == "secrets") {
    if (!o.contains("type")) o["type"] = "Opaque";
    if (o.contains("stringData") && o["stringData"].is_object()) {
      for (const auto& [k, v] : o["stringData"].items()) {
        if (v.is_string()) o["data"][k] = absl::Base64Escape(v.get<std::string>());
      }
      o.erase("stringData");
    }
  } else if (p == "services") {
    Json& spec = o["spec"];
    if (!spec.is_object()) spec = Json::object();
    if (!spec.contains("type")) spec["type"] = "ClusterIP";
    if (!spec.contains("sessionAffinity")) spec["sessionAffinity"] = "None";
    if (spec["type"] != "ExternalName") {
      if (!spec.contains("ipFamilies")) spec["ipFamilies"] = {"IPv4"};
      if (!spec.contains("ipFamilyPolicy")) spec["ipFamilyPolicy"] = "SingleStack";
      if (!spec.contains("internalTrafficPolicy")) spec["internalTrafficPolicy"] = "Cluster";
    }
    if (spec.contains("ports") && spec["ports"].is_array()) {
      for (auto& port : spec["ports"]) {
        if (!port.is_object()) continue;
        if (!port.contains("protocol")) port["protocol"] = "TCP";
        if (!port.contains("targetPort") && port.contains("port"))
          port["targetPort"] = port["port"];
      }
    }
    if (!o.contains("status")) o["status"] = {{"loadBalancer", Json::object()}};
  } else if (p == "deployments") {
    Json& spec = o["spec"];
    if (!spec.is_object()) spec = Json::object();
    if (!spec.contains("replicas")) spec["replicas"] = 1;
    if (!spec.contains("strategy") || !spec["strategy"].is_object() ||
        !spec["strategy"].contains("type")) {
      spec["strategy"] = {{"type", "RollingUpdate"},
                          {"rollingUpdate", {{"maxUnavailable", "25%"}, {"maxSurge", "25%"}}}};
    }
    if (!spec.contains("revisionHistoryLimit")) spec["revisionHistoryLimit"] = 10;
    if (!spec.contains("progressDeadlineSeconds")) spec["progressDeadlineSeconds"] = 600;
    if (spec.contains("template") && spec["template"].is_object()) {
      DefaultContainers(spec["template"]["spec"]);
    }
  } else if (p == "statefulsets") {
    Json& spec = o["spec"];
    if (!spec.is_object()) spec = Json::object();
    if (!spec.contains("replicas")) spec["replicas"] = 1;
    if (!spec.contains("podManagementPolicy")) spec["podManagementPolicy"] = "OrderedReady";
    if (!spec.contains("updateStrategy") || !spec["updateStrategy"].is_object() ||
        !spec["updateStrategy"].contains("type")) {
      spec["updateStrategy"] = {{"type", "RollingUpdate"}, {"rollingUpdate", {{"partition", 0}}}};
    }
    if (!spec.contains("revisionHistoryLimit")) spec["revisionHistoryLimit"] = 10;
    if (!spec.contains("persistentVolumeClaimRetentionPolicy")) {
      spec["persistentVolumeClaimRetentionPolicy"] = {{"whenDeleted", "Retain"},
                                                      {"whenScaled", "Retain"}};
    }
    if (spec.contains("template") && spec["template"].is_object()) {
      DefaultContainers(spec["template"]["spec"]);
    }
  } else if (p == "validatingwebhookconfigurations") {
    o = DefaultWebhookConfiguration(std::move(o));
  } else if (p == "poddisruptionbudgets") {
    // No defaults beyond metadata.
  } else if (p == "pods") {
    DefaultContainers(o["spec"]);
    if (!o.contains("status")) o["status"] = {{"phase", "Pending"}, {"qosClass", "BestEffort"}};
  } else if (p == "serviceaccounts" || p == "configmaps" || p == "roles" || p == "clusterroles" ||
             p == "rolebindings" || p == "clusterrolebindings") {
    // No defaults beyond metadata.
  } else if (p == "customresourcedefinitions") {
    const Json& spec = o.value("spec", Json::object());
    Json stored = Json::array();
    for (const auto& v : spec.value("versions", Json::array())) {
      if (v.is_object() && v.value("storage", false)) stored.push_back(v.value("name", ""));
    }
    o["status"] = {{"acceptedNames", spec.value("names", Json::object())},
                   {"conditions",
                    {{{"type", "NamesAccepted"},
                      {"status", "True"},
                      {"reason", "NoConflicts"},
                      {"message", "no conflicts found"}},
                     {{"type", "Established"},
                      {"status", "True"},
                      {"reason", "InitialNamesAccepted"},
                      {"message", "the initial names have been accepted"}}}},
                   {"storedVersions", stored}};
  }
  return o;
}

Json PrepareForCreate(const ResourceType& type, Json object, absl::Time now) {
  Json& meta = object["metadata"];
  meta["uid"] = NewUid();
  meta["creationTimestamp"] = Rfc3339(now);
  for (const char* k :
       {"resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds", "selfLink"}) {
    meta.erase(k);
  }
  if (type.tracks_generation) {
    meta["generation"] = 1;
  } else {
    meta.erase("generation");
  }
  // Custom resources with a status subresource drop status on create (built-ins keep it).
  if (type.custom && type.HasStatus()) object.erase("status");
  return ApplyDefaults(type, std::move(object));
}

Json PrepareForUpdate(const ResourceType& type, const Json& current, Json next,
                      const std::string& subresource) {
  const Json& cur_meta = current["metadata"];
  if (subresource == "status") {
    // Only status moves through /status.
    Json status = next.contains("status") ? next["status"] : Json(nullptr);
    next = current;
    if (status.is_null()) {
      next.erase("status");
    } else {
      next["status"] = status;
    }
    return next;
  }
  const bool is_namespace = type.group.empty() && type.plural == "namespaces";
  if (is_namespace && subresource == "finalize") {
    // Only spec.finalizers moves through /finalize.
    Json finalizers = next.value("spec", Json::object()).value("finalizers", Json::array());
    next = current;
    next["spec"]["finalizers"] = finalizers.is_array() ? finalizers : Json::array();
    return next;
  }
  if (is_namespace && current.contains("spec") && current["spec"].is_object()) {
    // The main resource keeps spec.finalizers: only /finalize changes them.
    if (!next["spec"].is_object()) next["spec"] = Json::object();
    if (current["spec"].contains("finalizers")) {
      next["spec"]["finalizers"] = current["spec"]["finalizers"];
    } else {
      next["spec"].erase("finalizers");
    }
  }
  Json& meta = next["metadata"];
  if (!meta.is_object()) meta = Json::object();
  for (const char* k : {"uid", "creationTimestamp", "deletionTimestamp",
                        "deletionGracePeriodSeconds", "generation", "namespace", "name"}) {
    if (cur_meta.contains(k)) {
      meta[k] = cur_meta[k];
    } else {
      meta.erase(k);
    }
  }
  if (!meta.contains("managedFields") && cur_meta.contains("managedFields")) {
    meta["managedFields"] = cur_meta["managedFields"];
  }
  if (type.HasStatus() && subresource.empty()) {
    // The main resource ignores status changes when a status subresource exists.
    if (current.contains("status")) {
      next["status"] = current["status"];
    } else {
      next.erase("status");
    }
  }
  next = ApplyDefaults(type, std::move(next));
  if (type.tracks_generation) {
    Json a = current, b = next;
    for (Json* j : {&a, &b}) {
      j->erase("metadata");
      j->erase("status");
    }
    int64_t gen = cur_meta.value("generation", 1);
    next["metadata"]["generation"] = a == b ? gen : gen + 1;
  }
  return next;
}

bool SameContent(const Json& a, const Json& b) {
  Json x = a, y = b;
  for (Json* j : {&x, &y}) {
    if (!j->contains("metadata") || !(*j)["metadata"].is_object()) continue;
    Json& meta = (*j)["metadata"];
    meta.erase("resourceVersion");
    // Ownership changes are real writes; only the entries' timestamps are not.
    if (meta.contains("managedFields") && meta["managedFields"].is_array()) {
      for (auto& e : meta["managedFields"]) {
        if (e.is_object()) e.erase("time");
      }
    }
  }
  return x == y;
}

}  // namespace reverser::kubesim
