#pragma once

// Moves objects between two repositories on the same machine (a push to a local path or
// file:// remote) as one pack written straight into the receiver, without libgit2's pack
// builder: no delta search, each object read once and compressed once.

#include <git2.h>

#include "absl/status/statusor.h"

namespace reverser::git {

// Copies every object reachable from commit `tip` in `from` that `to` lacks into one new pack
// in `to`'s object store. A commit or tree that `to` already has is not descended into (a
// repository holds everything its commits and trees reference); blobs below a missing tree are
// checked one by one, so a small change to a large tree copies only what changed. Returns how
// many objects were copied (0: nothing was written). `to` sees the new pack on return.
absl::StatusOr<size_t> CopyMissingObjects(git_repository* from, git_repository* to,
                                          const git_oid& tip);

}  // namespace reverser::git
