#pragma once

// Where each object's document lives under a GitTarget's path, found by identity rather than by
// path (docs/behaviour.md, Match-first editing): an object already in Git is updated or deleted
// in the file it lives in, even if a placement template or a person put it somewhere else, and
// whether that file holds one document or a bundle of them. Built by scanning the YAML files
// under the path at one commit (a file whose blob an earlier index of the path read is not read
// again), then kept current with our own writes. Files beyond the read limits (size from the
// object header, YAML nodes/aliases/depth per file) are not read: they are recorded as refused,
// and left alone — never swept, never overwritten. YAML that does not parse is recorded as
// unreadable: never edited, never read again while its blob stays.

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "libs/git/repository.h"
#include "libs/gitignore/ignore_rules.h"
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

// The identity of every document of a YAML file, in order (nullopt: a document that states no
// object — empty, a list, not KRM).
using FileDocuments = std::vector<std::optional<DocumentKey>>;

// Bounds on the files an index reads.
struct IndexLimits {
  uint64_t max_file_bytes = 8 << 20;
  manifest::YamlReadLimits yaml;
};

class IdentityIndex {
 public:
  IdentityIndex() = default;
  // Movable, not copyable: files point at the key index's nodes.
  IdentityIndex(IdentityIndex&&) = default;
  IdentityIndex& operator=(IdentityIndex&&) = default;
  IdentityIndex(const IdentityIndex&) = delete;
  IdentityIndex& operator=(const IdentityIndex&) = delete;

  // An index of `path` with no files yet (an empty tree), to which Apply adds.
  static IdentityIndex Empty(const std::string& path, const IndexLimits& limits = {});

  struct RefusedFile;
  // How a Build went, for the log.
  struct BuildStats {
    size_t files_read = 0;    // blobs loaded and parsed
    size_t files_reused = 0;  // taken from `previous` by blob id, not read
    size_t unreadable = 0;    // not YAML this reader cuts into documents
    size_t refused = 0;       // over a limit
    size_t documents = 0;     // of objects
  };
  // Scans every YAML file under `path` ("" = the root) at `base` (nullopt: empty tree). A file
  // larger than limits.max_file_bytes (its size read from the object header, the blob never
  // loaded) or beyond limits.yaml is refused; a file whose blob is in `known_refused` (blob id →
  // its refusal, from an earlier scan) is refused again without being read; a file whose blob
  // `previous` (an index of the same path) holds is taken from it without being read. Entries
  // `ignore` (the path's .gittargetignore) names are never read: they are listed as ignored,
  // with the objects an earlier index saw in that very blob. Symlinks, submodules and non-YAML
  // files are listed, never read.
  static absl::StatusOr<IdentityIndex> Build(
      git::Repository& repo, const std::optional<std::string>& base, const std::string& path,
      const IndexLimits& limits = {},
      const std::map<std::string, RefusedFile>* known_refused = nullptr,
      const IdentityIndex* previous = nullptr, const gitignore::IgnoreRules* ignore = nullptr);

  // One YAML file under the path as last read.
  struct File {
    std::string blob_id;
    // False: the text is no YAML stream this reader cuts (a syntax error, NUL bytes, a cut
    // that disagrees with the parser). Kept, never edited.
    bool readable = true;
    std::vector<const DocumentKey*> documents;  // in order; nullptr: states no object
    // Documents (0-based) that are not empty yet state no object: no apiVersion, kind or
    // metadata.name (the acceptance gate's non-krm). Empty for files this worker wrote.
    std::vector<size_t> non_krm;
  };
  const std::map<std::string, File>& files() const { return files_; }
  // A file under the path that .gittargetignore hides: never read. `known`: the objects an
  // earlier index read from this same blob before the pattern hid it.
  struct IgnoredFile {
    std::string blob_id;
    std::vector<DocumentKey> known;
  };
  const std::map<std::string, IgnoredFile>& ignored() const { return ignored_; }
  // Tree entries under the path that are no files: symlinks and submodules (never read).
  const std::map<std::string, git::FileEntry::Kind>& foreign_entries() const { return foreign_; }
  // Regular files under the path that are not .yaml/.yml (path → blob id), never read here:
  // the acceptance gate judges them by name.
  const std::map<std::string, std::string>& other_files() const { return other_; }
  const std::string& path() const { return path_; }
  // Records what Build records for such entries (for tests of what reads an index).
  void RecordForeign(const std::string& path, git::FileEntry::Kind kind) { foreign_[path] = kind; }
  void RecordIgnored(const std::string& path, IgnoredFile file) {
    ignored_[path] = std::move(file);
  }
  // The file at `path` (nullptr: no YAML file there, or a refused one).
  const File* FileAt(const std::string& path) const;
  // The file holding `key` (if several do, the first by path), any number of documents in it.
  std::optional<std::string> Find(const DocumentKey& key) const;
  // Every document whose object has this group and kind (and namespace, if given), with the
  // file it is in: once per file that states it.
  std::vector<std::pair<DocumentKey, std::string>> OfType(
      const std::string& group, const std::string& kind,
      const std::optional<std::string>& namespace_) const;
  size_t document_count() const { return by_key_.size(); }
  const BuildStats& stats() const { return stats_; }

  // Records the writes and deletes of a commit under the indexed path. `known` states the
  // documents of written files when known (entries this index records are moved out of it);
  // other written YAML files are parsed.
  void Apply(const git::ChangeSet& changes, std::map<std::string, FileDocuments>* known);

  // The documents of one YAML file's text: an error for a limit of the YAML reader
  // (ResourceExhausted, the file is refused), nullopt for text that is no YAML stream we cut
  // into documents (kept and ignored).
  // `non_krm` (if given) gets the non-empty documents that state no object.
  static absl::StatusOr<std::optional<FileDocuments>> ReadDocuments(
      const std::string& text, const manifest::YamlReadLimits& limits = {},
      std::vector<size_t>* non_krm = nullptr);
  // The identity one parsed document states, if it is a Kubernetes object.
  static std::optional<DocumentKey> KeyOfDocument(const nlohmann::json& doc);

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
  void Record(const std::string& path, std::string blob_id, FileDocuments documents,
              std::vector<size_t> non_krm = {});
  void RecordUnreadable(const std::string& path, std::string blob_id);
  // Parses `text` and records it (refused, unreadable or its documents).
  void Add(const std::string& path, std::string blob_id, const std::string& text);

  // The files that state one identity, sorted by path (pointers to files_'s keys).
  using Holders = std::vector<const std::string*>;

  std::string path_;
  IndexLimits limits_;
  BuildStats stats_;
  std::map<std::string, RefusedFile> refused_;
  std::map<std::string, IgnoredFile> ignored_;
  std::map<std::string, git::FileEntry::Kind> foreign_;
  std::map<std::string, std::string> other_;
  // Each identity once (files point at these keys, whose nodes never move), with its files.
  std::map<DocumentKey, Holders> by_key_;
  std::map<std::string, File> files_;
};

}  // namespace reverser::gitworker
