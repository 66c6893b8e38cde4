#pragma once

// Where each object's document lives under a GitTarget's path, found by identity rather than by
// path (docs/behaviour.md, Match-first editing): an object already in Git is updated or deleted
// in the file it lives in, even if a placement template or a person put it somewhere else. Built
// by scanning the YAML files under the path at one commit, then kept current with our own writes.
// Files beyond the read limits (size from the object header, YAML nodes/aliases/depth per file)
// are not read: they are recorded as refused, and left alone — never swept, never overwritten.

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "libs/git/repository.h"
#include "libs/manifest/yaml_reader.h"
#include "proto/reverser/v1/catalog.pb.h"

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

  struct RefusedFile;
  // Scans every YAML file under `path` ("" = the root) at `base` (nullopt: empty tree). A file
  // larger than limits.max_file_bytes (its size read from the object header, the blob never
  // loaded) or beyond limits.yaml is refused; a file whose blob is in `known_refused` (blob id →
  // its refusal, from an earlier scan) is refused again without being read.
  static absl::StatusOr<IdentityIndex> Build(
      git::Repository& repo, const std::optional<std::string>& base, const std::string& path,
      const IndexLimits& limits = {},
      const std::map<std::string, RefusedFile>* known_refused = nullptr);

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

  // The identity stated by one YAML document's text, if it is a single Kubernetes object.
  static std::optional<DocumentKey> KeyOfFile(const std::string& text);
  // The same, distinguishing a file the reader refuses (an error: a limit of the YAML reader,
  // ResourceExhausted) from one that simply states no single object (nullopt: not YAML we
  // understand, several documents, no identity), which is kept and ignored as before.
  static absl::StatusOr<std::optional<DocumentKey>> ReadKeyOfFile(
      const std::string& text, const manifest::YamlReadLimits& limits = {});

  // A file under the path the gitworker refuses to read: left alone (never edited, swept or
  // overwritten) and reported on the GitTarget's status.
  struct RefusedFile {
    reverser::v1::RefusalReason reason = reverser::v1::REFUSAL_REASON_UNSUPPORTED_CONTENT;
    std::string message;
    std::string blob_id;  // the content refused (empty when not known)
  };
  // Records `path` as refused (Build does it for files the reader refuses; a size check
  // before reading may call it too).
  void RefuseFile(const std::string& path, RefusedFile refused);
  const std::map<std::string, RefusedFile>& refused_files() const { return refused_; }
  bool IsRefused(const std::string& path) const { return refused_.count(path) > 0; }

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
  std::map<std::string, RefusedFile> refused_;
  PathMap by_path_;
  std::map<const DocumentKey*, const std::string*, KeyLess> by_key_;
};

}  // namespace reverser::gitworker
