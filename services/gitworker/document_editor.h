#pragma once

// One commit's object writes and deletes, applied document by document to the files under a
// target path (docs/behaviour.md, Match-first editing, Placement templates): an object whose
// document exists anywhere under the path — one document of a bundle or a file of its own — gets
// only that document's bytes replaced; a new object is appended to the file its placement names
// (created if missing), never replacing what is there; a delete splices out exactly that
// document, or deletes the file when no other document is left. Every other byte of an edited
// file stays (manifest::YamlDocuments). Pure over the index and a blob reader: no Git writes.

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "libs/git/repository.h"
#include "libs/manifest/yaml_documents.h"
#include "services/gitworker/identity_index.h"
#include "services/gitworker/refusal.h"

namespace reverser::gitworker {

// A blob of the commit the index describes.
using BlobReader = std::function<absl::StatusOr<std::string>(const std::string& blob_id)>;

class DocumentEditor {
 public:
  // `index` describes the base commit and must outlive the editor.
  DocumentEditor(const IdentityIndex& index, BlobReader read, IndexLimits limits);

  // Writes `yaml` (one rendered document, "\n" line endings) as the document of `key`: in place
  // where it lives (in the index, or written earlier in this commit), else appended to
  // `new_path`. Returns the file. Refused (the status carries the reason, refusal.h): a file
  // the index refused or cannot read (COMMIT_REFUSED), a sensitive document that would share a
  // file with others (encrypted files are never bundled).
  absl::StatusOr<std::string> Upsert(const DocumentKey& key, const std::string& new_path,
                                     absl::string_view yaml, bool sensitive = false);
  // Removes the document of `key` from `path` (nullopt: where Upsert would find it). Returns the
  // file, nullopt when no such document exists.
  absl::StatusOr<std::optional<std::string>> Delete(
      const DocumentKey& key, const std::optional<std::string>& path = std::nullopt);

  struct Result {
    git::ChangeSet changes;
    std::map<std::string, FileDocuments> documents;  // of every written file
    int64_t changed_documents = 0;  // documents created, changed or removed (no-ops excluded)
    // Files whose edits were dropped, because the result would exceed the read limits
    // (LIMIT_EXCEEDED) or not read back as written (COMMIT_REFUSED), with the objects edited.
    struct RefusedFile {
      std::string path;
      absl::Status status;
      std::vector<DocumentKey> keys;
    };
    std::vector<RefusedFile> refused;
  };
  // Checks every edited file and returns the change set.
  Result Finish() &&;

 private:
  struct Working {
    bool existed = false;      // in the base commit
    bool had_objects = false;  // with a non-empty document there
    manifest::YamlDocuments documents;
    FileDocuments keys;  // per document of `documents` (removed ones included)
    std::vector<DocumentKey> edited;
    int64_t changed = 0;
  };
  // Where `key`'s document is now (this commit's edits first).
  std::optional<std::string> Locate(const DocumentKey& key) const;
  absl::StatusOr<Working*> Load(const std::string& path);
  static std::optional<size_t> DocumentOf(const Working& file, const DocumentKey& key);

  const IdentityIndex& index_;
  BlobReader read_;
  IndexLimits limits_;
  std::map<std::string, Working> files_;
  // Objects created (their file) or deleted (nullopt) by this commit.
  std::map<DocumentKey, std::optional<std::string>> moved_;
};

}  // namespace reverser::gitworker
