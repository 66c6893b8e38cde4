#pragma once

// Moves objects between two repositories on the same machine (a push to a local path or
// file:// remote) without libgit2's pack builder: packs written by large commits are hard-linked
// whole, and whatever else the receiver lacks is written as one new pack (no delta search, each
// object read once and compressed once).

#include <git2.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace reverser::git {

// Makes every object reachable from commit `tip` in `from` present in `to`:
//  1. finds what `to` lacks, walking from the tip and not descending into a commit or tree
//     that `to` already has (a repository holds everything its commits and trees reference);
//     blobs below a missing tree are checked one by one, so a small change to a large tree
//     moves only what changed;
//  2. hard-links `from`'s packs named in `shareable_packs` ("pack-<checksum>") into `to`, as
//     `git clone --local` does (packs are never modified in place, so sharing is safe; on
//     another file system nothing is linked);
//  3. copies the objects of step 1 that are still missing into one new pack in `to`.
// Returns how many objects were copied in step 3. `to` sees the new objects on return.
absl::StatusOr<size_t> CopyMissingObjects(git_repository* from, git_repository* to,
                                          const git_oid& tip,
                                          const std::vector<std::string>& shareable_packs = {});

}  // namespace reverser::git
