#pragma once

// Where an object's file lives in Git (docs/behaviour.md, Git layout): the canonical path,
// placement templates, and the write-jail checks every path passes before a byte is written.

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "libs/core/types.h"
#include "nlohmann/json.hpp"

namespace reverser::manifest {

// The namespace segment of cluster-scoped objects: an illegal namespace name, so it can never
// collide with a real one.
inline constexpr char kClusterScopeSegment[] = "_cluster";
inline constexpr char kPlainSuffix[] = ".yaml";
inline constexpr char kSensitiveSuffix[] = ".sops.yaml";

// What placement needs to know about one object.
struct ObjectIdentity {
  core::GroupVersionResource gvr;
  std::string kind;
  core::Scope scope = core::Scope::kNamespaced;
  std::string namespace_;  // empty for cluster-scoped objects
  std::string name;
  bool sensitive = false;  // written encrypted as `.sops.yaml`
};

// Reads kind, metadata.name and metadata.namespace of an object (sanitized or live) into an
// identity for the served type `gvr` of the given scope, then ValidateIdentity. A namespaced
// object without a namespace, or a cluster-scoped one with one, is InvalidArgument.
absl::StatusOr<ObjectIdentity> IdentityOf(const nlohmann::json& object,
                                          const core::GroupVersionResource& gvr, core::Scope scope,
                                          bool sensitive);

// `{target_path}/{namespace}/[{group}/]{resource}/{name}.yaml` (`_cluster` for cluster-scoped,
// `.sops.yaml` when sensitive, no version segment). `target_path` is the GitTarget's spec.path
// ("" or "." for the repository root). InvalidArgument for an unsafe target path or identity
// (see ValidateIdentity).
absl::StatusOr<std::string> CanonicalPath(absl::string_view target_path, const ObjectIdentity& id);

// Renders a placement template (relative to spec.path) for `id`. Variables: {group},
// {groupPath} (both "" for core), {version}, {apiVersion}, {resource}, {kind}, {scope}
// (`cluster` | `namespaced`), {namespace} ("" when cluster-scoped), {namespaceOrCluster}
// (`_cluster` when cluster-scoped), {name}, {sensitiveSuffix} (`.yaml` | `.sops.yaml`).
// Values containing `/`, `\` or `%` are percent-encoded so a value can never add a directory;
// empty segments are collapsed ("{groupPath}/{resource}" → "configmaps" for core). The result
// must pass ValidateRelativePath. InvalidArgument for unknown variables (all listed), stray
// braces, or an unsafe result.
absl::StatusOr<std::string> RenderPlacementTemplate(absl::string_view tmpl,
                                                    const ObjectIdentity& id);

// Static check of a template before any object is placed (the GitTarget admission gate):
// known variables only, no stray braces, relative, no `..` segment, no backslash, and a name
// ending in `.yaml`, `.yml` or `{sensitiveSuffix}`.
absl::Status ValidatePlacementTemplate(absl::string_view tmpl);

// True when a template renders a distinct path for every object identity — required for
// sensitive objects, which are never bundled. A byType entry (one type) needs {name} and a
// namespace variable; a default template also needs {groupPath} (or {group}) and {resource}.
bool IsIdentityComplete(absl::string_view tmpl, bool narrowed_to_one_type);

// The key of spec.placement.byType: "v1/secrets", "apps/v1/deployments".
std::string PlacementTypeKey(const core::GroupVersionResource& gvr);

// The write-jail gate for a path relative to spec.path: non-empty, `/`-separated (no `\`),
// relative, clean (no `.`/`..`/empty segments), no NUL or control characters, at most 4096
// bytes with segments of at most 255, and a `.yaml` / `.yml` file name.
absl::Status ValidateRelativePath(absl::string_view path);

// spec.path itself: "" / "." (the root) or a clean relative directory path (trailing `/`
// tolerated). Returns it normalized ("" for the root, no trailing slash).
absl::StatusOr<std::string> NormalizeTargetPath(absl::string_view target_path);

// Joins a validated relative path under a target path.
absl::StatusOr<std::string> JoinTargetPath(absl::string_view target_path,
                                           absl::string_view relative);

// The identity parts that become path segments: a valid namespace (DNS label) exactly when
// namespaced; a name that is a safe single segment (non-empty, not `.`/`..`, no `/`, `\`,
// NUL or control characters — names like `system:controller:x` are legal); group, version and
// resource non-empty where required and free of separators.
absl::Status ValidateIdentity(const ObjectIdentity& id);

// Core `secrets` are always sensitive (docs/behaviour.md, Which resources are sensitive);
// `additional` entries name more types as `resource` (core) or `group/resource`.
bool IsSensitiveResource(const core::GroupVersionResource& gvr,
                         const std::vector<std::string>& additional = {});

}  // namespace reverser::manifest
