#pragma once

// Applies a set of file writes and deletes to a Git tree entirely in the object database (no
// working tree, no index), and turns the result into a commit with explicit identities.

#include <git2.h>

#include <map>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "libs/git/ssh_signing.h"

namespace reverser::git {

// Path in the tree → new content, or std::nullopt to delete the file. Deleting a missing file is
// a no-op. Paths are validated with ValidateRepoPath.
using ChangeSet = std::map<std::string, std::optional<std::string>>;

// Who and when, as recorded in a commit header.
struct Identity {
  std::string name;
  std::string email;
  absl::Time when;
  int utc_offset_minutes = 0;
};

struct CommitSpec {
  Identity author;
  Identity committer;
  std::string message;
  // When set, the commit carries this key's SSH signature in its gpgsig header (not owned;
  // must outlive the call).
  const SshSigningKey* signer = nullptr;
};

// Builds the tree `base` (nullptr: the empty tree) with `changes` applied and returns its id.
// Refused (FailedPrecondition) when a write or delete would go through a symlink, submodule or
// file in `base`, when a write would replace a symlink, submodule or directory, or when a
// delete names a directory; refused (InvalidArgument) for invalid paths or a change set that
// writes both "a" and "a/b". New files get mode 100644; an existing executable keeps 100755.
absl::StatusOr<git_oid> ApplyChanges(git_repository* repo, const git_tree* base,
                                     const ChangeSet& changes);

// Applies `changes` on top of `parent` (hex id; std::nullopt: a first commit with no parent)
// and writes a commit with `spec`'s identities and message, signed when `spec.signer` is set.
// Moves no reference. Returns the new commit id, or std::nullopt when the changes leave the
// tree as it was (nothing to commit).
absl::StatusOr<std::optional<std::string>> CreateCommit(git_repository* repo,
                                                        const std::optional<std::string>& parent,
                                                        const ChangeSet& changes,
                                                        const CommitSpec& spec);

}  // namespace reverser::git
