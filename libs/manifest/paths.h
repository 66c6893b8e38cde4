#pragma once

// Where an object's file lives in Git (docs/behaviour.md, Git layout): the canonical path,
// placement templates, and the write-jail checks every path passes before a byte is written.
//
// File names. Every name the API server accepts gets a file; names that are safe file names
// keep gitops-reverser's layout byte for byte (`<name>.yaml`, `<name>.sops.yaml`), which covers
// every DNS-subdomain name (all built-in kinds but RBAC, and every custom resource) and RBAC
// names (Role, ClusterRole, RoleBinding, ClusterRoleBinding: any character but `/` and `%`,
// not `.`/`..`, no length limit — e.g. `system:controller:x`) without the characters below.
// The file name is `FileName(name, sensitive)` = FitSegment(FileStem(name), suffix):
//   1. Escapes (FileStem): the bytes `%`, `/`, `\` and control bytes 0x00–0x1F, 0x7F become
//      `%XX` (two uppercase hex digits). The API server allows neither `%` nor `/` in any name,
//      so an escape only ever stands for `\` or a control character of an RBAC name, and `%` in
//      a file name always starts an escape: the mapping is unambiguous and reversible.
//   2. Our own file kinds (FileStem, non-sensitive objects only): a stem ending in `.sops` would
//      make `x.sops.yaml` look encrypted (and match the bootstrap `.sops.yaml` creation rule
//      `\.sops\.ya?ml$`), so its dot is escaped: `x%2Esops.yaml` (a Role named `.sops` →
//      `%2Esops.yaml`). The stem `kustomization` would be kustomize's entry point (and is
//      never swept): it becomes `%6Bustomization.yaml`.
//   3. Length (FitSegment): when stem + suffix exceeds 255 bytes (NAME_MAX; names of 246+
//      bytes, RBAC names of any length), the file is
//      `<first bytes of the stem>%-<16 hex digits of SHA-256 of the full stem><suffix>`, exactly
//      as long as fits in 255 bytes (the prefix never ends inside an escape or a UTF-8
//      sequence). `%-` can never come from rule 1, so a shortened name never equals another
//      object's file name. Stable: the same name always gets the same file.
// Shortened files are not reversible by name; like every file they carry the object's full
// identity (apiVersion, kind, metadata.name/namespace) in the document, and the gitworker finds
// documents by that identity, never by file name, so updates, deletes and resync sweeps of
// such objects work on whatever file holds them. Placement templates use the same rules for
// `{name}` (and rule 1 for every other value); any rendered segment over 255 bytes is
// shortened by rule 3. Still refused: an empty name, `.` and `..` (the API server refuses them
// too), invalid namespaces, and paths over 4096 bytes.

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
// Marks a shortened file name (rule 3 above): `<prefix>%-<16 hex>.yaml`.
inline constexpr char kShortenedMarker[] = "%-";

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

// `{target_path}/{namespace}/[{group}/]{resource}/{file}` with `{file}` = FileName(name,
// sensitive) (`_cluster` for cluster-scoped, no version segment). `target_path` is the
// GitTarget's spec.path ("" or "." for the repository root). InvalidArgument for an unsafe
// target path or identity (see ValidateIdentity).
absl::StatusOr<std::string> CanonicalPath(absl::string_view target_path, const ObjectIdentity& id);

// The file name of an object named `name` (rules 1–3 above): `<stem>.yaml` or
// `<stem>.sops.yaml`, at most 255 bytes.
std::string FileName(absl::string_view name, bool sensitive);
// Rules 1 and 2: the name escaped so it is one safe segment that cannot pass for one of our
// own file kinds (also the value of a template's {name}).
std::string FileStem(absl::string_view name, bool sensitive);

// Renders a placement template (relative to spec.path) for `id`. Variables: {group},
// {groupPath} (both "" for core), {version}, {apiVersion}, {resource}, {kind}, {scope}
// (`cluster` | `namespaced`), {namespace} ("" when cluster-scoped), {namespaceOrCluster}
// (`_cluster` when cluster-scoped), {name}, {sensitiveSuffix} (`.yaml` | `.sops.yaml`).
// `/`, `\`, `%` and control bytes in values are percent-encoded so a value can never add a
// directory; {name} is FileStem(name) (rules 1–2 above); empty segments are collapsed
// ("{groupPath}/{resource}" → "configmaps" for core); segments over 255 bytes are shortened
// (rule 3). The result must pass ValidateRelativePath. InvalidArgument for unknown variables
// (all listed), stray braces, or an unsafe result.
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
// namespaced; a name that is non-empty and not `.`/`..` (any other name is encoded by
// FileName); group, version and resource non-empty where required and free of separators.
absl::Status ValidateIdentity(const ObjectIdentity& id);

}  // namespace reverser::manifest
