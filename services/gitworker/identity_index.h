#pragma once

// Where each object's document lives under a GitTarget's path, found by identity rather than by
// path (reference §2A.11 "match-first"): an object already in Git is updated or deleted in the
// file it lives in, even if a placement template or a person put it somewhere else. Built by
// scanning the YAML files under the path at one commit, then kept current with our own writes.
// Files beyond the read limits (size from the object header, YAML nodes/aliases/depth per file)
// are not read: they are recorded as refused, and left alone — never swept, never overwritten.

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "libs/git/repository.h"
#include "libs/manifest/yaml_reader.h"
#include "services/gitworker/refusal.h"

namespace reverser::gitworker {

// Identity of a Kubernetes object as a document states it (versions do not matter).
struct DocumentKey {
  std::string group;
  std::string kind;
  std::string namespace_;  // empty for cluster-scoped
  std::string name;
  auto operator<=>(const DocumentKey&) const = default;
};

// Bounds on the files an index reads.
struct IndexLimits {
  uint64_t max_file_bytes = 8 << 20;
  manifest::YamlReadLimits yaml;
};

class IdentityIndex {
 public:
  IdentityIndex() = default;
  // Movable, not copyable: the key index points into the path index's nodes.
  IdentityIndex(IdentityIndex&&) = default;
  IdentityIndex& operator=(IdentityIndex&&) = default;
  IdentityIndex(const IdentityIndex&) = delete;
  IdentityIndex& operator=(const IdentityIndex&) = delete;

  // Scans every YAML file under `path` ("" = the root) at `base` (nullopt: empty tree). Files
  // beyond `limits` are refused (kReasonFileTooLarge, kReasonYamlLimits); a file whose blob is
  // in `known_refused` (blob id → its refusal) is refused again without being read.
  static absl::StatusOr<IdentityIndex> Build(
      git::Repository& repo, const std::optional<std::string>& base, const std::string& path,
      const IndexLimits& limits = {},
      const std::map<std::string, Refusal>* known_refused = nullptr);

  // The single-document file holding `key`, if any. Objects in multi-document files are not
  // returned (they are not rewritten whole).
  std::optional<std::string> Find(const DocumentKey& key) const;
  // Every single-document file whose object has this group and kind (and namespace, if given).
  std::vector<std::pair<DocumentKey, std::string>> OfType(
      const std::string& group, const std::string& kind,
      const std::optional<std::string>& namespace_) const;

  // Records the writes and deletes of a commit under the indexed path. `keys` names the object
  // of written files when known; other written YAML files are parsed. The entries of `keys`
  // this index records are moved out of it (a first mirror's keys become the index without
  // being copied).
  void Apply(const git::ChangeSet& changes, std::map<std::string, DocumentKey>* keys);

  // Files under the path that were not read, by path.
  const std::map<std::string, Refusal>& refused() const { return refused_; }
  bool IsRefused(const std::string& path) const { return refused_.count(path) > 0; }

  // The identity stated by one YAML document's text, if it is a single Kubernetes object.
  // ResourceExhausted beyond `limits`; nullopt for anything else that is not one object.
  static absl::StatusOr<std::optional<DocumentKey>> KeyOfFile(
      const std::string& text, const manifest::YamlReadLimits& limits = {});

 private:
  void Remove(const std::string& path);
  void Add(const std::string& path, const std::string& text);
  void Record(const std::string& path, const DocumentKey& key);
  void Record(std::map<std::string, DocumentKey>::node_type entry);

  // Orders the key index by the keys it points at.
  struct KeyLess {
    bool operator()(const DocumentKey* a, const DocumentKey* b) const { return *a < *b; }
  };
  // Each document once: path → identity, and an index from identity to that entry (pointers
  // into by_path_'s nodes, which never move). Two files claiming one identity: only the first
  // is recorded, so the two maps always hold the same documents.
  using PathMap = std::map<std::string, DocumentKey>;

  std::string path_;
  manifest::YamlReadLimits yaml_limits_;
  std::map<std::string, Refusal> refused_;  // path → why it was not read
  PathMap by_path_;
  std::map<const DocumentKey*, const std::string*, KeyLess> by_key_;
};

}  // namespace reverser::gitworker
