#pragma once

// The acceptance gate (docs/behaviour.md, Acceptance gate): before any write to a GitTarget's
// path — live window or resync — the path's content and the planned writes are checked, and a
// path with issues gets no write at all (the branch worker holds them until a fetch shows the
// path clean). Pure: the identity index of the path, the target's followed types, its
// .gittargetignore, the planned writes and a reader for the kustomizations' text in, the
// issues out.

#include <functional>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "libs/gitignore/ignore_rules.h"
#include "libs/manifest/yaml_reader.h"
#include "services/gitworker/identity_index.h"

namespace reverser::gitworker {

// The reference's issue kinds that reverser checks (its names), plus `invalid-ignore`: a
// .gittargetignore that does not parse. Not checked, as v0.36.0 does not check them on a write
// either (its write gate is structure-only): `unresolved-krm` and `out-of-scope` (they judge
// documents by discovery and by the rules' scope, which change under a path that did not), and
// `kustomize-render-refused` (reverser renders no kustomization).
enum class IssueKind {
  kDuplicate,                // one identity stated by two documents
  kNonKrm,                   // a YAML document without apiVersion, kind or metadata.name
  kInvalidYaml,              // a .yaml/.yml file (or a Kustomization) that does not parse
  kImpureManagedFile,        // a file of managed objects with an empty or non-KRM document
  kMixedManagedAllowlisted,  // an object inside a kustomization or .sops.yaml
  kUnsupportedKustomize,     // a kustomization using what reverser does not model
  kForeignFile,              // a regular file under the path that is no YAML file of a known role
  kForeignSymlink,           // a symlink under the path
  kForeignSubmodule,         // a submodule under the path
  kIgnoreShadowsManaged,     // .gittargetignore hides a path reverser writes or a managed document
  kInvalidIgnore,            // .gittargetignore refused (a catastrophic pattern, over a limit)
  kWriteEscapesScope,        // a planned write outside the target path
  kWriteFanIn,               // two objects planned to one single-document file
};
absl::string_view IssueKindName(IssueKind kind);

struct GateIssue {
  IssueKind kind;
  std::string text;  // one line, "<kind>: ..." naming the file (and document, 1-based)
  bool operator==(const GateIssue&) const = default;
};

// One object a write plan touches.
struct GateWrite {
  DocumentKey key;
  std::string path;        // where it goes when new (its placement path, from the root)
  bool deleted = false;    // a delete: only where it lives
  bool sensitive = false;  // encrypted: a file of its own
};

// The target's .gittargetignore as read at the indexed commit.
struct GateIgnore {
  const gitignore::IgnoreRules* rules = nullptr;  // nullptr: none, or it did not parse
  std::string error;  // why it was refused (names the line); empty when it parsed
};

struct GateInput {
  const IdentityIndex* index = nullptr;  // of the target path at the commit written on
  // (group, kind) of the types the target follows: documents of these are managed.
  const std::set<std::pair<std::string, std::string>>* followed = nullptr;
  GateIgnore ignore;
  std::vector<GateWrite> writes;
  // Every file the plan changes (written or deleted), from the repository root.
  std::vector<std::string> changed_files;
  // Reads a kustomization's blob by id (the index keeps no text). The caller bounds what it
  // loads: a blob over its size limit comes back as an error, which refuses that kustomization,
  // as does a missing reader.
  std::function<absl::StatusOr<std::string>(const std::string& blob_id)> read_blob;
  manifest::YamlReadLimits yaml_limits;  // for the kustomizations read
};

// Every issue, in a stable order: path content first (by file), then the plan's.
std::vector<GateIssue> CheckPath(const GateInput& input);

// The GitPathAccepted reason for a non-empty issue list: IgnoreShadowsManagedPath when every
// issue is about .gittargetignore (ignore-shadows-managed, or invalid-ignore: the reference
// reports a catastrophic pattern as an ignore shadowing), WriteBoundaryRefused when every one is
// write-escapes-scope or write-fan-in, else UnsupportedContent.
std::string GitPathReason(const std::vector<GateIssue>& issues);
// "Git path refused at <path>: <first issue> (and N more issue(s))" ("/" for the root; the
// parenthesis only when N > 0).
std::string GitPathMessage(const std::string& path, const std::vector<GateIssue>& issues);

// Files the gate never calls non-KRM: the bootstrap `.sops.yaml` (a SOPS config, no object) and
// kustomizations (build directives, checked as such: unsupported-kustomize). Neither may hold an
// object (mixed-managed-allowlisted).
bool ExemptFromKrm(absl::string_view path);
// Whether the file is a kustomization by its name (kustomization.yaml, kustomization.yml or
// Kustomization, as kustomize finds them).
bool IsKustomization(absl::string_view path);

}  // namespace reverser::gitworker
