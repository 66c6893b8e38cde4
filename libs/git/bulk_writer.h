#pragma once

// A write scope for commits that add many objects at once (a first mirror, a big resync): a
// second handle over the repository's objects whose object database writes every new object
// into one pack (pack_writer.h) instead of a loose file each. Reads through the handle see the
// repository's objects and the ones written so far, so tree builders and commit creation work
// unchanged.
//
//   ASSIGN_OR_RETURN(auto bulk, BulkWriter::Begin(repo));
//   ... git_blob_create_from_buffer / git_treebuilder_write / git_commit_create on bulk->repo()
//   RETURN_IF_ERROR(bulk->Commit(repo).status());  // the pack is in place; `repo` sees it
//
// Objects that already exist anywhere in the repository are not written again (libgit2 checks
// before every write), so a scope over a repository that has everything writes no pack.
// Dropping the scope without Commit discards what it wrote. Not thread-safe.

#include <git2.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "libs/git/libgit2.h"
#include "libs/git/pack_writer.h"

namespace reverser::git {

class BulkWriter {
 public:
  // Starts a pack in `repo`'s objects/pack and a handle that reads `repo`'s objects (without
  // rescanning its pack directory on every miss) and writes into the pack.
  static absl::StatusOr<std::unique_ptr<BulkWriter>> Begin(git_repository* repo);
  ~BulkWriter();
  BulkWriter(const BulkWriter&) = delete;
  BulkWriter& operator=(const BulkWriter&) = delete;

  // The handle to write through (valid until Commit or destruction).
  git_repository* repo() { return handle_.get(); }
  // Objects written into the pack so far.
  size_t object_count() const { return pack_->object_count(); }
  // Their ids, in pack order.
  std::vector<git_oid> object_ids() const { return pack_->ObjectIds(); }

  // Closes the handle, finishes the pack and makes `main` (the repository Begin was given)
  // see it. Returns the pack's checksum, or nullopt when nothing new was written.
  absl::StatusOr<std::optional<std::string>> Commit(git_repository* main);

 private:
  BulkWriter(std::unique_ptr<PackWriter> pack, GitPtr<git_repository> handle);

  // Declared before the handle: the handle's object database refers to the pack, so the handle
  // is closed first.
  std::unique_ptr<PackWriter> pack_;
  GitPtr<git_repository> handle_;
};

}  // namespace reverser::git
