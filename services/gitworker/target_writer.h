#pragma once

// What one GitTarget writes into its branch, as pure planning over the delivered objects and the
// tree they land in: the target's resolved settings, the file an object maps to (placement
// template or canonical path, under the target path, never escaping it), the YAML it becomes,
// the type-scoped mark-and-sweep of a resync, and the bootstrap files of a fresh target path.
// No Git writes happen here; the branch worker turns plans into commits.

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "libs/commitmeta/identity.h"
#include "libs/commitmeta/messages.h"
#include "libs/git/repository.h"
#include "libs/gotemplate/template.h"
#include "libs/manifest/paths.h"
#include "libs/manifest/yaml_reader.h"
#include "proto/reverser/v1/gitworker.pb.h"
#include "services/gitworker/document_editor.h"
#include "services/gitworker/identity_index.h"
#include "services/gitworker/refusal.h"

namespace reverser::gitworker {

// Bounds on what the gitworker reads from Git and renders (set by the service's flags). Content
// beyond them is refused (LIMIT_EXCEEDED, UNSUPPORTED_CONTENT), never a reason to crash or stall.
struct WriterLimits {
  // A file under a target path larger than this is not read (its size comes from the object
  // header); an object whose file would be larger is not written (it could not be read back).
  uint64_t max_file_bytes = 8 << 20;
  // Per file read from Git; max_depth also bounds delivered objects.
  manifest::YamlReadLimits yaml;
  // Commit message templates.
  gotemplate::Limits templates;
  // Encrypted files kept so that re-delivering an unchanged Secret commits nothing (every
  // encryption makes new bytes); the oldest are dropped beyond this.
  uint64_t max_encryption_cache_bytes = 256 << 20;
};

// A GitTargetConfig validated and resolved (defaults filled in).
struct TargetSettings {
  reverser::v1::GitTargetRef target;
  reverser::v1::GitDestination destination;
  std::string remote_url;
  std::string credentials_secret;  // "namespace/name", may be empty
  std::string signing_secret;      // "namespace/name" of the signing key; empty: unsigned
  std::string path;                // normalized spec.path ("" = repository root)
  commitmeta::Signature committer;
  commitmeta::CommitTemplates templates;
  absl::Duration commit_window = absl::ZeroDuration();
  std::vector<std::string> age_recipients;
  std::map<std::string, std::string> placement_by_type;
  std::string placement_default;

  // "namespace/name" of the GitTarget, for logs and window keys.
  std::string TargetKey() const;
};

// InvalidArgument naming the field for an unusable config (no destination branch or remote,
// unsafe path, invalid template or placement template; templates are tried within `limits`).
absl::StatusOr<std::shared_ptr<const TargetSettings>> SettingsFromConfig(
    const reverser::v1::GitTargetConfig& config, const WriterLimits& limits = {});

// One document change planned for one object.
struct PlannedWrite {
  DocumentKey key;
  std::string path;  // where a new object goes; an existing document is edited where it lives
  std::optional<std::string> content;  // its rendered document; nullopt: delete it
  bool sensitive = false;              // encrypted: never bundled with other documents
  commitmeta::ChangedResource change;  // for the commit message
};

// The file an object lives in: the byType placement, else the default placement, else the
// canonical path, joined under the target path. InvalidArgument for unsafe identities, tagged
// with its refusal reason (refusal.h RefusalReasonOf), as are RenderObject's and PlanEvent's.
absl::StatusOr<std::string> ObjectPath(const TargetSettings& settings,
                                       const reverser::v1::ObjectBody& object);

// The YAML written for an object. Sensitive objects are SOPS-encrypted to the target's age
// recipients (libs/sops); without recipients they are refused (FailedPrecondition), never
// written in plaintext. Refused as well (LIMIT_EXCEEDED): what the index could not read back —
// nesting or nodes beyond limits.yaml, a body or file larger than limits.max_file_bytes.
absl::StatusOr<std::string> RenderObject(const TargetSettings& settings,
                                         const reverser::v1::ObjectBody& object,
                                         const WriterLimits& limits = {});

// The identity an object's document states: group, kind (from the GVK, else the body),
// namespace, name.
DocumentKey KeyOf(const reverser::v1::ObjectBody& object);

// A live event as one file change (upsert or delete).
absl::StatusOr<PlannedWrite> PlanEvent(const TargetSettings& settings,
                                       const reverser::v1::LiveEvent& event,
                                       const WriterLimits& limits = {});

// A resync's desired set rendered once (kept for replays after a push conflict).
struct PreparedResync {
  struct Upsert {
    DocumentKey key;
    std::string path;  // for a new object
    std::string yaml;
    bool sensitive = false;
  };
  std::vector<Upsert> upserts;
  // Desired objects that could not be rendered (e.g. sensitive): never swept.
  std::set<DocumentKey> protected_keys;
  // One per desired object that can never be written (an empty subject: the resync itself).
  struct Refused {
    RefusedSubject subject;
    reverser::v1::RefusalReason reason;
    std::string message;
  };
  std::vector<Refused> refused;
  core::GroupVersionResource gvr;  // the swept type
  std::string kind;
  std::optional<std::string> namespace_;  // set when the claim is namespaced
  bool sweep = true;  // false when the type is unknown: never guess what to delete
};
// Renders the snapshot's desired objects, releasing each one once it is rendered: a large
// snapshot and its rendered files are never both held in full.
PreparedResync PrepareResync(const TargetSettings& settings, reverser::v1::ClusterSnapshot snapshot,
                             const WriterLimits& limits = {});

// A change refused while it was applied to the documents in Git (refusal.h reasons): its file
// is refused or unreadable, or the edited file would exceed the read limits.
struct RefusedChange {
  DocumentKey key;
  absl::Status status;
};

// The full change set of a resync against the target path's documents (`index`, whose files
// `read` returns): every desired object written where its document lives (else at its
// placement path, appended if that file exists), plus, document by document, the removal of
// every document whose object is of the swept (group, kind) — and, for a namespaced claim, in
// its namespace — and is not desired, in multi-document files too. Other types, files that are
// no YAML documents, and allowlisted auxiliary files (kustomization.yaml, .sops.yaml) are kept.
struct ResyncChanges {
  git::ChangeSet changes;
  std::map<std::string, FileDocuments> documents;          // written path → its documents
  std::vector<std::pair<DocumentKey, std::string>> swept;  // documents the sweep removed
  std::vector<RefusedChange> refused;  // desired objects not written (never swept either)
  int64_t changed_documents = 0;       // documents created, changed or removed
  size_t written = 0;                  // desired objects written (changed or not)
};
ResyncChanges PlanResyncChanges(const IdentityIndex& index, const PreparedResync& prepared,
                                const BlobReader& read = nullptr, const IndexLimits& limits = {});

// A window's writes against the target path's documents, in order (the same rules as a
// resync's upserts; a delete removes the object's document wherever it lives).
struct WindowChanges {
  git::ChangeSet changes;
  std::map<std::string, FileDocuments> documents;  // written path → its documents
  std::map<size_t, absl::Status> refused;          // index into the writes → why
  int64_t changed_documents = 0;
};
WindowChanges PlanWindowChanges(const IdentityIndex& index, const std::vector<PlannedWrite>& writes,
                                const BlobReader& read, const IndexLimits& limits = {});

// The bootstrap files of a target path (docs/behaviour.md, Bootstrap files): README.md,
// .gittargetignore (fully commented), and .sops.yaml when age recipients are configured. Keys
// are full repo paths. Every commit that changes a document adds those that are missing.
std::map<std::string, std::string> BootstrapFiles(const TargetSettings& settings);

}  // namespace reverser::gitworker
