#pragma once

// Turns a live Kubernetes object into the desired-state projection that is written to Git
// (docs/behaviour.md, Sanitization), and fingerprints it for no-op detection.

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace reverser::sanitize {

// Returns a new object holding only what belongs in Git:
//  * `apiVersion`, `kind` (required, non-empty strings);
//  * `metadata` with `name`, `namespace`, and the cleaned `labels` / `annotations` — every
//    other metadata field (uid, resourceVersion, generation, timestamps, managedFields,
//    ownerReferences, finalizers, generateName, selfLink, ...) is dropped;
//  * the top-level payload fields `spec`, `data`, `binaryData`, `rules`, `subjects`, `roleRef`,
//    `webhooks`, `template`, `involvedObject`, `reason`, `message`, `type`, `eventTime`
//    (copied verbatim, `null` included); everything else (`status`, `stringData`, ...) is dropped;
//  * kind-specific server-assigned fields removed from `spec`: Service `clusterIP`, `clusterIPs`,
//    `healthCheckNodePort`, `ipFamilies`, `ipFamilyPolicy`, `internalTrafficPolicy`; Pod
//    `nodeName`; PersistentVolumeClaim `volumeName`, `volumeMode` (matched on kind alone, as the
//    reference does).
// Empty label/annotation maps, and a metadata map left empty, are omitted.
// Errors (InvalidArgument) for input the API server never produces: a non-object, missing
// apiVersion/kind (LIST items must be given them from the list first), mistyped metadata
// (the reference silently drops non-string labels; here that is an error), or nesting deeper
// than 512 levels (the YAML writer's limit).
absl::StatusOr<nlohmann::json> Sanitize(const nlohmann::json& object);

// The deepest object Sanitize takes (`{}` is 1 level, as the API server counts): what the YAML
// writer can render, and a bound on every later recursive walk.
inline constexpr int kMaxDepth = 512;

// True for controller-bookkeeping labels that never reach Git: prefixes
// `kustomize.toolkit.fluxcd.io/`, `kro.run/`, `applyset.kubernetes.io/`.
// (`app.kubernetes.io/instance` is deliberately kept.)
bool IsOperationalLabel(absl::string_view key);

// True for bookkeeping annotations: exact `argocd.argoproj.io/tracking-id`,
// `argocd.argoproj.io/installation-id`, `kcp.io/cluster`; prefixes `kubectl.kubernetes.io/`,
// `control-plane.alpha.kubernetes.io/`, `deployment.kubernetes.io/`,
// `autoscaling.alpha.kubernetes.io/`, `kustomize.toolkit.fluxcd.io/`, `applyset.kubernetes.io/`.
// Sibling keys such as `argocd.argoproj.io/sync-wave` are user intent and kept.
bool IsOperationalAnnotation(absl::string_view key);

// Hex SHA-256 of CanonicalJson(sanitized): equal for objects whose Git content is equal, so a
// status-only UPDATE can be dropped (docs/behaviour.md, No-op dedup).
std::string ContentHash(const nlohmann::json& sanitized);

// Sanitize + ContentHash.
absl::StatusOr<std::string> SanitizedContentHash(const nlohmann::json& object);

// The object with `metadata.managedFields` removed and nothing else changed: the form kept in
// the change stream, where managedFields is bulk without value.
nlohmann::json RemoveManagedFields(nlohmann::json object);

}  // namespace reverser::sanitize
