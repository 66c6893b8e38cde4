#include "libs/sanitize/sanitize.h"

#include <array>

#include <openssl/sha.h>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "libs/core/status.h"
#include "libs/sanitize/canonical_json.h"

namespace reverser::sanitize {
namespace {

using nlohmann::json;

// Top-level fields that carry desired state (reference `preserveFields` +
// `preservedTopLevelFields`). Everything else, `status` first of all, is dropped.
constexpr std::array<const char*, 13> kPayloadFields = {
    "spec",     "data",     "binaryData", "rules",  "subjects", "roleRef", "webhooks",
    "template", "involvedObject", "reason", "message", "type", "eventTime",
};

constexpr std::array<const char*, 3> kOperationalLabelPrefixes = {
    "kustomize.toolkit.fluxcd.io/",
    "kro.run/",
    "applyset.kubernetes.io/",
};

// Matched exactly: sibling keys under these prefixes (argocd sync-wave, ...) are user intent.
constexpr std::array<const char*, 3> kOperationalAnnotationKeys = {
    "argocd.argoproj.io/tracking-id",
    "argocd.argoproj.io/installation-id",
    "kcp.io/cluster",
};

constexpr std::array<const char*, 6> kOperationalAnnotationPrefixes = {
    "kubectl.kubernetes.io/",          "control-plane.alpha.kubernetes.io/",
    "deployment.kubernetes.io/",       "autoscaling.alpha.kubernetes.io/",
    "kustomize.toolkit.fluxcd.io/",    "applyset.kubernetes.io/",
};

// Server-assigned spec fields, by kind (reference `removeNestedServerFields`).
struct KindSpecDrops {
  const char* kind;
  std::initializer_list<const char*> fields;
};
const KindSpecDrops kKindSpecDrops[] = {
    {"Service",
     {"clusterIP", "clusterIPs", "healthCheckNodePort", "ipFamilies", "ipFamilyPolicy",
      "internalTrafficPolicy"}},
    {"Pod", {"nodeName"}},
    {"PersistentVolumeClaim", {"volumeName", "volumeMode"}},
};

bool NestedDeeperThan(const json& value, int limit) {
  if (!value.is_structured()) return false;
  if (limit == 0) return true;
  for (const json& child : value) {
    if (NestedDeeperThan(child, limit - 1)) return true;
  }
  return false;
}

absl::StatusOr<std::string> RequiredString(const json& object, const char* field) {
  const auto it = object.find(field);
  if (it == object.end() || it->is_null()) {
    return absl::InvalidArgumentError(absl::StrCat("object has no ", field));
  }
  if (!it->is_string() || it->get_ref<const std::string&>().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("object ", field, " must be a non-empty string, got ", it->dump()));
  }
  return it->get<std::string>();
}

// Copies a string field of metadata if present and non-empty; null counts as absent.
absl::Status CopyMetadataString(const json& metadata, const char* field, json* out) {
  const auto it = metadata.find(field);
  if (it == metadata.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_string()) {
    return absl::InvalidArgumentError(
        absl::StrCat("metadata.", field, " must be a string, got ", it->type_name()));
  }
  if (!it->get_ref<const std::string&>().empty()) (*out)[field] = *it;
  return absl::OkStatus();
}

// Copies a string map (labels/annotations) minus the keys `drop` selects; empty ⇒ omitted.
template <typename Predicate>
absl::Status CopyCleanedMap(const json& metadata, const char* field, Predicate drop,
                            json* out) {
  const auto it = metadata.find(field);
  if (it == metadata.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat("metadata.", field, " must be a map, got ", it->type_name()));
  }
  json cleaned = json::object();
  for (const auto& [key, value] : it->items()) {
    if (!value.is_string()) {
      return absl::InvalidArgumentError(absl::StrCat("metadata.", field, "[\"", key,
                                                     "\"] must be a string, got ",
                                                     value.type_name()));
    }
    if (!drop(key)) cleaned[key] = value;
  }
  if (!cleaned.empty()) (*out)[field] = std::move(cleaned);
  return absl::OkStatus();
}

}  // namespace

bool IsOperationalLabel(absl::string_view key) {
  for (const char* prefix : kOperationalLabelPrefixes) {
    if (absl::StartsWith(key, prefix)) return true;
  }
  return false;
}

bool IsOperationalAnnotation(absl::string_view key) {
  for (const char* exact : kOperationalAnnotationKeys) {
    if (key == exact) return true;
  }
  for (const char* prefix : kOperationalAnnotationPrefixes) {
    if (absl::StartsWith(key, prefix)) return true;
  }
  return false;
}

absl::StatusOr<nlohmann::json> Sanitize(const nlohmann::json& object) {
  if (!object.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat("a Kubernetes object must be a JSON object, got ", object.type_name()));
  }
  if (NestedDeeperThan(object, kMaxDepth)) {
    return absl::InvalidArgumentError(
        absl::StrCat("object is nested deeper than ", kMaxDepth, " levels"));
  }
  ASSIGN_OR_RETURN(std::string api_version, RequiredString(object, "apiVersion"));
  ASSIGN_OR_RETURN(std::string kind, RequiredString(object, "kind"));

  json out = json::object();
  out["apiVersion"] = api_version;
  out["kind"] = kind;

  if (const auto it = object.find("metadata"); it != object.end() && !it->is_null()) {
    if (!it->is_object()) {
      return absl::InvalidArgumentError(
          absl::StrCat("metadata must be a map, got ", it->type_name()));
    }
    json metadata = json::object();
    RETURN_IF_ERROR(CopyMetadataString(*it, "name", &metadata));
    RETURN_IF_ERROR(CopyMetadataString(*it, "namespace", &metadata));
    RETURN_IF_ERROR(CopyCleanedMap(
        *it, "labels", [](const std::string& k) { return IsOperationalLabel(k); }, &metadata));
    RETURN_IF_ERROR(CopyCleanedMap(
        *it, "annotations", [](const std::string& k) { return IsOperationalAnnotation(k); },
        &metadata));
    if (!metadata.empty()) out["metadata"] = std::move(metadata);
  }

  for (const char* field : kPayloadFields) {
    if (const auto it = object.find(field); it != object.end()) out[field] = *it;
  }

  for (const KindSpecDrops& drops : kKindSpecDrops) {
    if (kind != drops.kind) continue;
    const auto spec = out.find("spec");
    if (spec == out.end() || !spec->is_object()) break;
    for (const char* field : drops.fields) spec->erase(field);
  }
  return out;
}

std::string ContentHash(const nlohmann::json& sanitized) {
  const std::string canonical = CanonicalJson(sanitized);
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(canonical.data()), canonical.size(), digest);
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(digest), sizeof(digest)));
}

absl::StatusOr<std::string> SanitizedContentHash(const nlohmann::json& object) {
  ASSIGN_OR_RETURN(json sanitized, Sanitize(object));
  return ContentHash(sanitized);
}

nlohmann::json RemoveManagedFields(nlohmann::json object) {
  if (object.is_object()) {
    if (const auto it = object.find("metadata"); it != object.end() && it->is_object()) {
      it->erase("managedFields");
    }
  }
  return object;
}

}  // namespace reverser::sanitize
