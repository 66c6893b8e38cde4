#pragma once

// The local side of one remote Git repository, as a gitworker branch actor uses it: a bare
// repository (objects and refs only, no working tree) kept in step with the remote by fetch,
// commits built from in-memory trees, and compare-and-swap pushes.
//
// Why bare: files are written straight into the object database (tree_editor.h), so there is no
// checkout to keep consistent, a hard reset is just moving a ref, a crash can never leave a
// half-written working tree, and symlinks in the repository are never materialised on disk, so
// nothing can follow them.
//
// Not thread-safe: one Repository per thread (the branch actor is the only writer of its clone).

#include <git2.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "libs/git/bulk_writer.h"
#include "libs/git/credentials.h"
#include "libs/git/libgit2.h"
#include "libs/git/tree_editor.h"

namespace reverser::git {

// Commits changing at least this many files are written as one pack (RepositoryOptions).
inline constexpr size_t kDefaultPackThreshold = 256;

struct RepositoryOptions {
  std::string local_path;  // where the bare clone lives (created if missing)
  std::string remote_url;  // local path, file://, ssh:// / scp-like, http(s)://
  GitCredentials credentials;
  // A commit that changes at least this many files writes its new objects into one pack
  // (bulk_writer.h) instead of a loose file each: first mirrors and big resyncs. Small commits
  // stay loose so everyday writes do not pile up packs.
  size_t pack_threshold = kDefaultPackThreshold;
  // Git's lock files (`*.lock` beside HEAD, config, packed-refs and under refs/) older than this
  // are removed at Open: a process killed mid-update (SIGKILL, OOM) leaves them, and every later
  // update of that ref would fail on them for good. Only for a caller that owns the clone
  // exclusively since this time (the gitworker holds its work dir's lock); InfinitePast: never.
  absl::Time stale_lock_cutoff = absl::InfinitePast();
  // A clone made new starts from a sibling: another clone of the same remote URL in the same
  // folder (the gitworker's other branches). Its remote-tracking refs are copied and its objects
  // hard-linked (Git objects are never changed, and clones here never remove any), so the first
  // fetch sends only what the sibling lacks (the default branch's history, which every clone
  // fetches): a replica taking a branch over does not download it again. An existing clone is
  // not seeded: it has that history, and linking a busy sibling's loose objects costs more than
  // its fetch. No sibling, or any error: an empty clone, as before.
  bool seed_from_siblings = false;
  // Small commits are staged (the gitworker's one commit per change): their new objects go into
  // one open pack and the branch ref moves in memory, until the next Push, Fetch or ResetBranch
  // (or `staged_object_limit` objects) writes the pack into place and then the refs. Without it
  // every small commit creates a loose file per object plus a ref lock file, and file creation is
  // what bounds the commit rate. On disk the clone stays consistent at every moment (a ref names
  // only objects already in place); a crash loses only unpushed commits, which the gitworker
  // makes again from its unacknowledged writes. The packs this leaves are merged (geometrically)
  // once more than `staged_pack_limit` of them exist, so lookups never scan many packs.
  bool stage_small_commits = false;
  size_t staged_object_limit = 20000;
  size_t staged_pack_limit = 16;
};

// Where a branch worker keeps its clone (docs/behaviour.md, Local clones):
// <root>/repos/<first 32 hex of SHA-256 over the four parts>. No caller text becomes a path
// segment, so no provider, branch or URL can lead the clone out of `root`.
std::string LocalClonePath(absl::string_view root, absl::string_view provider_namespace,
                           absl::string_view provider, absl::string_view branch,
                           absl::string_view url);

// The refs a remote advertises right now (git ls-remote).
struct RemoteRefs {
  std::vector<std::pair<std::string, std::string>> heads;  // "refs/heads/x" → commit id
  std::optional<std::string> default_branch;               // short name HEAD points at, if any
  std::optional<std::string> Tip(absl::string_view branch) const;
};

// Where a branch starts from after a fetch.
struct BranchBase {
  std::optional<std::string> commit;  // nullopt: empty remote, the first commit has no parent
  // True when the branch is missing on the remote and starts from the default branch's tip
  // (`commit` is that tip; `from_branch` names the default branch).
  bool from_default_branch = false;
  std::string from_branch;
};

enum class PushOutcome {
  kPushed,         // the remote branch now points at the local commit
  kUpToDate,       // it already did; nothing was sent
  kConflict,       // the remote branch moved away from the expected commit (or appeared)
  kRemoteMissing,  // the remote branch was expected but is gone
};
absl::string_view PushOutcomeName(PushOutcome outcome);

// A file of a commit as its tree names it.
struct FileEntry {
  // What the tree entry is: a blob (regular or executable), a symlink (a blob holding the link
  // target) or a submodule (a gitlink: `blob_id` is the commit it pins, nothing to read).
  enum class Kind { kFile, kSymlink, kSubmodule };
  std::string path;
  std::string blob_id;  // hex object id of its content
  Kind kind = Kind::kFile;
};

// The object id Git gives `content` as a blob: equal ids mean equal bytes, so a file can be
// compared with new content without reading it.
std::string BlobIdOf(absl::string_view content);

struct PushResult {
  PushOutcome outcome;
  std::optional<std::string> remote_tip;  // the remote branch as last seen (kConflict: its tip)
  std::string detail;                     // the server's words on a rejection, if any
};

class Repository {
 public:
  // Opens the bare repository at options.local_path, or creates it (no network access); the
  // remote "origin" is (re)pointed at options.remote_url.
  static absl::StatusOr<std::unique_ptr<Repository>> Open(RepositoryOptions options);
  ~Repository();
  // How many stale lock files Open removed (RepositoryOptions::stale_lock_cutoff).
  size_t stale_locks_removed() const { return stale_locks_removed_; }
  // Remote-tracking refs this clone was seeded with at Open
  // (RepositoryOptions::seed_from_siblings).
  size_t seeded_refs() const { return seeded_refs_; }
  // Objects the last Fetch received (0: the clone had everything).
  size_t last_fetch_received_objects() const { return last_fetch_received_objects_; }

  // Lists the remote's refs without downloading objects.
  absl::StatusOr<RemoteRefs> ListRemote();
  // Downloads every remote branch into refs/remotes/origin/* (pruning deleted ones) and records
  // the remote's default branch. With `only_branch`: that branch and the default branch only
  // (what ResolveBranchBase reads), so a clone that writes one branch of a remote with many does
  // not download the others' history. A local remote (a path, file://) is read directly: the
  // objects the clone lacks are copied as a local push copies them (object_copy.h), not packed
  // by libgit2's local transport, which packs every branch with a delta search. Errors: Unavailable
  // (network), Unauthenticated, PermissionDenied (host key), NotFound (no repository at the URL) …
  absl::Status Fetch(absl::string_view only_branch = {});
  // The remote branch tip as of the last Fetch (nullopt: absent on the remote).
  absl::StatusOr<std::optional<std::string>> FetchedTip(absl::string_view branch);
  // The remote default branch as of the last Fetch (nullopt: empty remote).
  absl::StatusOr<std::optional<std::string>> FetchedDefaultBranch();
  // After Fetch: where `branch` starts — its own remote tip, else the default branch's tip, else
  // the tip of the only/first remote branch, else nothing (empty remote).
  absl::StatusOr<BranchBase> ResolveBranchBase(absl::string_view branch);

  // The local branch refs/heads/<branch> (nullopt: unborn).
  absl::StatusOr<std::optional<std::string>> LocalTip(absl::string_view branch);
  // Whether `ancestor` is `descendant` or one of its ancestors. False (not an error) when
  // `ancestor` is not in this repository: history that was rewritten away is never fetched.
  absl::StatusOr<bool> IsAncestor(absl::string_view ancestor, absl::string_view descendant);
  // Hard reset: points the local branch at `commit` (nullopt: makes it unborn again).
  absl::Status ResetBranch(absl::string_view branch, const std::optional<std::string>& commit);

  // Commits `changes` on top of the local branch tip and advances the branch. Returns the new
  // commit id, or nullopt when nothing changed (no commit is made). Large change sets (see
  // RepositoryOptions::pack_threshold) are written as one pack.
  absl::StatusOr<std::optional<std::string>> CommitOnBranch(absl::string_view branch,
                                                            const ChangeSet& changes,
                                                            const CommitSpec& spec);
  // Reads a file of a commit (nullopt: no such file). FailedPrecondition for a directory.
  absl::StatusOr<std::optional<std::string>> ReadFile(absl::string_view commit,
                                                      absl::string_view path);
  // Every file path in a commit (recursively), optionally only those under `prefix`/.
  absl::StatusOr<std::vector<std::string>> ListFiles(absl::string_view commit,
                                                     absl::string_view prefix = "");
  // The same with each file's blob id, so sizes can be checked before anything is loaded.
  // Symlinks are listed (kind kSymlink); submodules only with `with_submodules`.
  absl::StatusOr<std::vector<FileEntry>> ListFileEntries(absl::string_view commit,
                                                         absl::string_view prefix = "",
                                                         bool with_submodules = false);
  // The blob id of a file of a commit (nullopt: no such file). FailedPrecondition for a
  // directory.
  absl::StatusOr<std::optional<std::string>> FileBlobId(absl::string_view commit,
                                                        absl::string_view path);
  // A blob's size from its object header (packed deltas included), without inflating it.
  absl::StatusOr<uint64_t> BlobSize(absl::string_view blob_id);
  // A blob's content.
  absl::StatusOr<std::string> ReadBlob(absl::string_view blob_id);

  // Compare-and-swap push of `local_commit` to refs/heads/<branch>: only if the remote branch
  // is still at `expected_old` (nullopt: only if it does not exist). Reads the advertised refs
  // first (up-to-date / conflict / remote-missing are decided without sending anything), then
  // pushes with the advertised value as the old value, so a concurrent update between the two
  // is refused by the remote (server-side rejection → conflict when the remote moved).
  // A non-OK status is a transient failure (network, auth, hook refusal with the remote
  // unchanged): keep the local commits and retry later. On kPushed the remote-tracking ref is
  // advanced too.
  absl::StatusOr<PushResult> Push(absl::string_view branch, absl::string_view local_commit,
                                  const std::optional<std::string>& expected_old);

  // Writes staged commits (RepositoryOptions::stage_small_commits): their pack, then the branch
  // refs. Push, Fetch and ResetBranch do it first by themselves.
  absl::Status FlushStaged();
  // Packs written by staging in this process that are still separate (merges make them fewer).
  size_t staged_pack_count() const { return staged_packs_.size(); }
  // Whether staged commits were lost (FlushStaged failed): the clone must be opened again.
  bool staging_lost() const { return !staging_lost_.ok(); }

  git_repository* raw() { return repo_.get(); }
  const std::string& path() const { return options_.local_path; }

 private:
  Repository(RepositoryOptions options, GitPtr<git_repository> repo);
  absl::StatusOr<GitPtr<git_remote>> Origin();
  // The local-path remote, opened once (local_remote_).
  absl::StatusOr<git_repository*> LocalRemote();
  absl::Status FetchLocal(const RemoteRefs& refs, absl::string_view only_branch);
  absl::StatusOr<PushResult> PushLocal(const std::string& ref, const git_oid& local,
                                       const std::optional<git_oid>& expected);
  absl::StatusOr<PushResult> PushSmart(git_remote* remote, const std::string& ref,
                                       const git_oid& local);
  absl::Status SetTracking(absl::string_view branch, const git_oid& commit);
  // Where objects are read: the staging handle while staged objects exist (it sees the clone's
  // objects too), else the clone.
  git_repository* Objects() { return staging_ ? staging_->repo() : repo_.get(); }
  // A ref as this process sees it: a staged tip first, else the ref on disk.
  absl::StatusOr<std::optional<git_oid>> CurrentRef(const std::string& ref);
  // Merges the newest staged packs into one while there are more than the limit.
  absl::Status MergeStagedPacks();

  RepositoryOptions options_;
  size_t stale_locks_removed_ = 0;
  size_t seeded_refs_ = 0;
  size_t last_fetch_received_objects_ = 0;
  GitPtr<git_repository> repo_;
  // Packs written by large commits and not yet offered to a local remote ("pack-<checksum>"):
  // a local push links them into the remote instead of copying their objects one by one.
  std::vector<std::string> unshared_packs_;
  // A local-path remote stays open between pushes and fetches: reopening it would load every
  // pack index again each time, and a remote written one pack per push holds thousands.
  GitPtr<git_repository> local_remote_;
  // Staged commits (RepositoryOptions::stage_small_commits): the open pack and the branch tips
  // not yet written (ref name → commit).
  std::unique_ptr<BulkWriter> staging_;
  std::map<std::string, git_oid> staged_tips_;
  // Packs staging wrote in this process, oldest first, with their objects (a merge rereads them).
  struct StagedPack {
    std::string name;  // "pack-<checksum>"
    std::vector<git_oid> ids;
  };
  std::vector<StagedPack> staged_packs_;
  // Set when staged commits could not be written: they are lost, and every call that would
  // build on them says so (the owner opens the clone again).
  absl::Status staging_lost_;
};

}  // namespace reverser::git
