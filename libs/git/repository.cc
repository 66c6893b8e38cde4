#include "libs/git/repository.h"

#include <openssl/sha.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "libs/core/status.h"
#include "libs/core/url_redaction.h"
#include "libs/git/bulk_writer.h"
#include "libs/git/object_copy.h"
#include "libs/git/pack_writer.h"
#include "libs/git/repo_path.h"
#include "libs/git/transport.h"

namespace reverser::git {
namespace {

constexpr char kRemoteName[] = "origin";
constexpr char kTrackingPrefix[] = "refs/remotes/origin/";
constexpr char kTrackingHead[] = "refs/remotes/origin/HEAD";
// Source ref for smart pushes (libgit2 pushes refs, not bare object ids).
constexpr char kPushScratchRef[] = "refs/reverser/push";

absl::StatusOr<std::string> BranchRef(absl::string_view branch) {
  std::string ref = absl::StrCat("refs/heads/", branch);
  int valid = 0;
  if (branch.empty() || git_reference_name_is_valid(&valid, ref.c_str()) < 0 || !valid ||
      branch == "HEAD") {
    git_error_clear();
    return absl::InvalidArgumentError(absl::StrCat("invalid branch name '", branch, "'"));
  }
  return ref;
}

// The direct target of `ref`, or nullopt when it does not exist.
absl::StatusOr<std::optional<git_oid>> ResolveRef(git_repository* repo, const std::string& ref) {
  git_oid oid;
  int rc = git_reference_name_to_id(&oid, repo, ref.c_str());
  if (rc == GIT_ENOTFOUND) {
    git_error_clear();
    return std::nullopt;
  }
  RETURN_IF_ERROR(GitStatus(rc, absl::StrCat("reading ", ref)));
  return oid;
}

std::optional<std::string> ToHex(const std::optional<git_oid>& oid) {
  if (!oid.has_value()) return std::nullopt;
  return OidToHex(*oid);
}

// Connects `remote` in `direction` with the session's callbacks and reads the advertised refs.
absl::StatusOr<RemoteRefs> ConnectAndList(git_remote* remote, git_direction direction,
                                          RemoteSession& session, git_remote_callbacks& callbacks) {
  RETURN_IF_ERROR(GitStatus(
      git_remote_connect(remote, direction, &callbacks, nullptr, session.headers()),
      absl::StrCat("connecting to ",
                   core::RedactUrl(git_remote_url(remote) ? git_remote_url(remote) : ""))));
  const git_remote_head** heads = nullptr;
  size_t count = 0;
  RETURN_IF_ERROR(GitStatus(git_remote_ls(&heads, &count, remote), "listing remote refs"));
  RemoteRefs refs;
  for (size_t i = 0; i < count; ++i) {
    if (absl::StartsWith(heads[i]->name, "refs/heads/")) {
      refs.heads.emplace_back(heads[i]->name, OidToHex(heads[i]->oid));
    }
  }
  GitBuf default_branch;
  int rc = git_remote_default_branch(default_branch.get(), remote);
  if (rc == 0) {
    std::string name = default_branch.str();
    absl::string_view short_name = name;
    if (absl::ConsumePrefix(&short_name, "refs/heads/"))
      refs.default_branch = std::string(short_name);
  } else {
    git_error_clear();  // empty remote or HEAD not advertised: no default branch
  }
  return refs;
}

std::string RemoteUrl(git_remote* remote) {
  const char* url = git_remote_url(remote);
  return url ? url : "";
}

}  // namespace

std::string LocalClonePath(absl::string_view root, absl::string_view provider_namespace,
                           absl::string_view provider, absl::string_view branch,
                           absl::string_view url) {
  // Length-prefixed, so no two different tuples share an input.
  std::string input;
  for (absl::string_view part : {provider_namespace, provider, branch, url}) {
    absl::StrAppend(&input, part.size(), ":", part);
  }
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(input.data()), input.size(), digest);
  std::string hex = absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(digest), sizeof(digest)));
  return absl::StrCat(root, "/repos/", hex.substr(0, 32));
}

std::optional<std::string> RemoteRefs::Tip(absl::string_view branch) const {
  const std::string ref = absl::StrCat("refs/heads/", branch);
  for (const auto& [name, commit] : heads) {
    if (name == ref) return commit;
  }
  return std::nullopt;
}

absl::string_view PushOutcomeName(PushOutcome outcome) {
  switch (outcome) {
    case PushOutcome::kPushed:
      return "pushed";
    case PushOutcome::kUpToDate:
      return "up-to-date";
    case PushOutcome::kConflict:
      return "conflict";
    case PushOutcome::kRemoteMissing:
      return "remote-missing";
  }
  return "unknown";
}

Repository::Repository(RepositoryOptions options, GitPtr<git_repository> repo)
    : options_(std::move(options)), repo_(std::move(repo)) {}

Repository::~Repository() = default;

namespace {

// Removes `*.lock` files older than `cutoff` at the top of a bare clone and under refs/;
// how many. Errors (a file that vanished, an unreadable folder) are skipped: a lock that stays
// fails the next update with libgit2's own message.
// The remote-tracking refs of `repo` that point at a commit (not the symbolic HEAD), by name.
absl::StatusOr<std::vector<std::pair<std::string, git_oid>>> TrackingRefs(git_repository* repo) {
  std::vector<std::pair<std::string, git_oid>> refs;
  git_reference_iterator* it = nullptr;
  RETURN_IF_ERROR(GitStatus(git_reference_iterator_glob_new(&it, repo, "refs/remotes/origin/*"),
                            "listing remote-tracking refs"));
  git_reference* ref = nullptr;
  while (git_reference_next(&ref, it) == 0) {
    if (git_reference_type(ref) == GIT_REFERENCE_DIRECT) {
      refs.emplace_back(git_reference_name(ref), *git_reference_target(ref));
    }
    git_reference_free(ref);
  }
  git_reference_iterator_free(it);
  git_error_clear();
  return refs;
}

// Hard-links every object of clone `from` into clone `to` (both bare, same file system): each
// pack with its index (the pack first), then loose objects. Existing names are kept.
absl::Status LinkObjects(const std::string& from, const std::string& to) {
  namespace fs = std::filesystem;
  std::error_code ec;
  auto link = [](const fs::path& source, const fs::path& target) -> absl::Status {
    if (::link(source.c_str(), target.c_str()) != 0 && errno != EEXIST) {
      return absl::InternalError(absl::StrCat("linking ", source.string(), ": ", strerror(errno)));
    }
    return absl::OkStatus();
  };
  const fs::path into_packs = fs::path(to) / "objects" / "pack";
  fs::create_directories(into_packs, ec);
  for (const auto& entry : fs::directory_iterator(fs::path(from) / "objects" / "pack", ec)) {
    const fs::path idx = entry.path();
    if (idx.extension() != ".idx" || !absl::StartsWith(idx.filename().string(), "pack-")) continue;
    fs::path pack = idx;
    pack.replace_extension(".pack");
    if (!fs::exists(pack, ec)) continue;
    RETURN_IF_ERROR(link(pack, into_packs / pack.filename()));
    RETURN_IF_ERROR(link(idx, into_packs / idx.filename()));
  }
  for (const auto& dir : fs::directory_iterator(fs::path(from) / "objects", ec)) {
    const std::string name = dir.path().filename().string();
    if (name.size() != 2 || !absl::ascii_isxdigit(name[0]) || !absl::ascii_isxdigit(name[1])) {
      continue;
    }
    const fs::path target = fs::path(to) / "objects" / name;
    fs::create_directories(target, ec);
    for (const auto& object : fs::directory_iterator(dir.path(), ec)) {
      if (object.path().filename().string().size() != 38) continue;  // tmp_obj_* and the like
      RETURN_IF_ERROR(link(object.path(), target / object.path().filename()));
    }
  }
  return absl::OkStatus();
}

// Seeds the new clone `fresh` (at `fresh_path`) from a sibling clone of `url` in its folder:
// the sibling's remote-tracking refs are read first (objects are written before refs point at
// them and are never removed, so every object they need exists when the objects are linked
// next), then each ref whose commit the fresh clone now has is created. Returns the refs made.
absl::StatusOr<size_t> SeedFromSibling(git_repository* fresh, const std::string& fresh_path,
                                       const std::string& url) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path self = fs::path(fresh_path).lexically_normal();
  for (const auto& entry : fs::directory_iterator(self.parent_path(), ec)) {
    if (!entry.is_directory(ec) || entry.path().lexically_normal() == self) continue;
    git_repository* raw = nullptr;
    if (git_repository_open_bare(&raw, entry.path().c_str()) != 0) {
      git_error_clear();
      continue;
    }
    GitPtr<git_repository> sibling(raw);
    git_remote* remote = nullptr;
    if (git_remote_lookup(&remote, sibling.get(), kRemoteName) != 0) {
      git_error_clear();
      continue;
    }
    GitPtr<git_remote> origin(remote);
    if (RemoteUrl(remote) != url) continue;

    ASSIGN_OR_RETURN(auto refs, TrackingRefs(sibling.get()));
    if (refs.empty()) continue;
    RETURN_IF_ERROR(LinkObjects(entry.path().string(), fresh_path));
    git_odb* odb = nullptr;
    RETURN_IF_ERROR(GitStatus(git_repository_odb(&odb, fresh), "opening the object database"));
    GitPtr<git_odb> objects(odb);
    RETURN_IF_ERROR(GitStatus(git_odb_refresh(odb), "re-reading the packs"));
    size_t made = 0;
    for (const auto& [name, oid] : refs) {
      if (!git_odb_exists(odb, &oid)) continue;
      git_reference* created = nullptr;
      RETURN_IF_ERROR(GitStatus(git_reference_create(&created, fresh, name.c_str(), &oid,
                                                     /*force=*/1, "seeded from a sibling clone"),
                                "seeding a remote-tracking ref"));
      git_reference_free(created);
      ++made;
    }
    return made;
  }
  return size_t{0};
}

size_t RemoveStaleLocks(const std::string& clone, absl::Time cutoff) {
  if (cutoff == absl::InfinitePast()) return 0;
  namespace fs = std::filesystem;
  size_t removed = 0;
  auto consider = [&](const fs::directory_entry& entry) {
    std::error_code error;
    if (!entry.is_regular_file(error) || entry.path().extension() != ".lock") return;
    struct stat info;
    if (stat(entry.path().c_str(), &info) != 0) return;
    if (absl::TimeFromTimespec(info.st_mtim) >= cutoff) return;  // this process's own
    if (fs::remove(entry.path(), error)) ++removed;
  };
  std::error_code error;
  for (fs::directory_iterator it(clone, error), end; !error && it != end; it.increment(error)) {
    consider(*it);
  }
  error.clear();
  for (fs::recursive_directory_iterator it(fs::path(clone) / "refs", error), end;
       !error && it != end; it.increment(error)) {
    consider(*it);
  }
  return removed;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Repository>> Repository::Open(RepositoryOptions options) {
  EnsureLibgit2Initialized();
  if (options.local_path.empty()) return absl::InvalidArgumentError("empty local_path");
  if (options.remote_url.empty()) return absl::InvalidArgumentError("empty remote_url");

  // A working-tree clone (e.g. left by another tool) is not ours to convert: refuse it rather
  // than initialising a bare repository inside its directory.
  if (access(absl::StrCat(options.local_path, "/.git").c_str(), F_OK) == 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        options.local_path, " holds a non-bare repository; remove it to let a bare clone be made"));
  }
  git_repository* raw = nullptr;
  int rc = git_repository_open_bare(&raw, options.local_path.c_str());
  const bool created = rc == GIT_ENOTFOUND;
  if (created) {
    git_error_clear();
    git_repository_init_options init = GIT_REPOSITORY_INIT_OPTIONS_INIT;
    init.flags = GIT_REPOSITORY_INIT_BARE | GIT_REPOSITORY_INIT_MKPATH;
    rc = git_repository_init_ext(&raw, options.local_path.c_str(), &init);
  }
  RETURN_IF_ERROR(GitStatus(rc, absl::StrCat("opening clone at ", options.local_path)));
  GitPtr<git_repository> repo(raw);

  git_remote* remote = nullptr;
  rc = git_remote_lookup(&remote, repo.get(), kRemoteName);
  GitPtr<git_remote> owned(remote);
  if (rc == GIT_ENOTFOUND) {
    git_error_clear();
    rc = git_remote_create_with_fetchspec(&remote, repo.get(), kRemoteName,
                                          options.remote_url.c_str(),
                                          "+refs/heads/*:refs/remotes/origin/*");
    owned.reset(remote);
  } else if (rc == 0 && RemoteUrl(remote) != options.remote_url) {
    rc = git_remote_set_url(repo.get(), kRemoteName, options.remote_url.c_str());
  }
  RETURN_IF_ERROR(GitStatus(rc, "configuring remote origin"));
  const size_t removed = RemoveStaleLocks(options.local_path, options.stale_lock_cutoff);
  size_t seeded = 0;
  if (created && options.seed_from_siblings) {
    // Best effort: a clone that could not be seeded fetches what it lacks, as it always did.
    auto made = SeedFromSibling(repo.get(), options.local_path, options.remote_url);
    if (made.ok()) seeded = *made;
  }
  auto opened = std::unique_ptr<Repository>(new Repository(std::move(options), std::move(repo)));
  opened->stale_locks_removed_ = removed;
  opened->seeded_refs_ = seeded;
  return opened;
}

absl::StatusOr<GitPtr<git_remote>> Repository::Origin() {
  git_remote* remote = nullptr;
  RETURN_IF_ERROR(
      GitStatus(git_remote_lookup(&remote, repo_.get(), kRemoteName), "looking up remote origin"));
  return GitPtr<git_remote>(remote);
}

absl::StatusOr<RemoteRefs> Repository::ListRemote() {
  ASSIGN_OR_RETURN(GitPtr<git_remote> remote, Origin());
  RemoteSession session(options_.remote_url, options_.credentials);
  git_remote_callbacks callbacks = GIT_REMOTE_CALLBACKS_INIT;
  session.Install(&callbacks);
  absl::StatusOr<RemoteRefs> refs =
      ConnectAndList(remote.get(), GIT_DIRECTION_FETCH, session, callbacks);
  git_remote_disconnect(remote.get());
  return refs;
}

absl::Status Repository::Fetch(absl::string_view only_branch) {
  RETURN_IF_ERROR(FlushStaged());
  ASSIGN_OR_RETURN(GitPtr<git_remote> remote, Origin());
  RemoteSession session(options_.remote_url, options_.credentials);
  git_remote_callbacks callbacks = GIT_REMOTE_CALLBACKS_INIT;
  session.Install(&callbacks);
  ASSIGN_OR_RETURN(RemoteRefs refs,
                   ConnectAndList(remote.get(), GIT_DIRECTION_FETCH, session, callbacks));

  if (IsLocalUrl(options_.remote_url)) {
    git_remote_disconnect(remote.get());
    RETURN_IF_ERROR(FetchLocal(refs, only_branch));
  } else {
    git_fetch_options fetch = GIT_FETCH_OPTIONS_INIT;
    fetch.callbacks = callbacks;
    fetch.custom_headers = *session.headers();
    fetch.download_tags = GIT_REMOTE_DOWNLOAD_TAGS_NONE;
    fetch.prune = GIT_FETCH_PRUNE;
    fetch.update_fetchhead = 0;
    // The remote's configured refspec (every branch), or that branch and the default branch:
    // update_tips and prune then act on those refspecs alone (a branch deleted on the remote is
    // still pruned).
    std::vector<std::string> specs;
    if (!only_branch.empty()) {
      specs.push_back(absl::StrCat("+refs/heads/", only_branch, ":", kTrackingPrefix, only_branch));
      if (refs.default_branch.has_value() && *refs.default_branch != only_branch) {
        specs.push_back(absl::StrCat("+refs/heads/", *refs.default_branch, ":", kTrackingPrefix,
                                     *refs.default_branch));
      }
    }
    StrArray refspecs(specs);
    RETURN_IF_ERROR(GitStatus(
        git_remote_download(remote.get(), specs.empty() ? nullptr : refspecs.get(), &fetch),
        "fetching"));
    last_fetch_received_objects_ = git_remote_stats(remote.get())->received_objects;
    RETURN_IF_ERROR(GitStatus(
        git_remote_update_tips(remote.get(), &callbacks, 0, GIT_REMOTE_DOWNLOAD_TAGS_NONE, "fetch"),
        "updating remote-tracking refs"));
    RETURN_IF_ERROR(GitStatus(git_remote_prune(remote.get(), &callbacks), "pruning"));
    git_remote_disconnect(remote.get());
  }

  // Record the default branch as refs/remotes/origin/HEAD (like git clone does).
  if (refs.default_branch.has_value() && refs.Tip(*refs.default_branch).has_value()) {
    git_reference* head = nullptr;
    RETURN_IF_ERROR(GitStatus(
        git_reference_symbolic_create(&head, repo_.get(), kTrackingHead,
                                      absl::StrCat(kTrackingPrefix, *refs.default_branch).c_str(),
                                      /*force=*/1, "fetch: default branch"),
        "recording the default branch"));
    git_reference_free(head);
  } else {
    git_reference* head = nullptr;
    if (git_reference_lookup(&head, repo_.get(), kTrackingHead) == 0) {
      int rc = git_reference_delete(head);
      git_reference_free(head);
      RETURN_IF_ERROR(GitStatus(rc, "forgetting the default branch"));
    }
    git_error_clear();
  }
  return absl::OkStatus();
}

absl::StatusOr<std::optional<std::string>> Repository::FetchedTip(absl::string_view branch) {
  RETURN_IF_ERROR(BranchRef(branch).status());
  ASSIGN_OR_RETURN(std::optional<git_oid> tip,
                   ResolveRef(repo_.get(), absl::StrCat(kTrackingPrefix, branch)));
  return ToHex(tip);
}

absl::StatusOr<std::optional<std::string>> Repository::FetchedDefaultBranch() {
  git_reference* head = nullptr;
  int rc = git_reference_lookup(&head, repo_.get(), kTrackingHead);
  if (rc == GIT_ENOTFOUND) {
    git_error_clear();
    return std::nullopt;
  }
  RETURN_IF_ERROR(GitStatus(rc, "reading the default branch"));
  GitPtr<git_reference> owned(head);
  const char* target = git_reference_symbolic_target(head);
  if (target == nullptr) return std::nullopt;
  absl::string_view name = target;
  if (!absl::ConsumePrefix(&name, kTrackingPrefix)) return std::nullopt;
  return std::string(name);
}

absl::StatusOr<BranchBase> Repository::ResolveBranchBase(absl::string_view branch) {
  BranchBase base;
  ASSIGN_OR_RETURN(base.commit, FetchedTip(branch));
  if (base.commit.has_value()) return base;
  ASSIGN_OR_RETURN(std::optional<std::string> default_branch, FetchedDefaultBranch());
  if (!default_branch.has_value()) return base;  // empty remote: a first commit, no parent
  ASSIGN_OR_RETURN(base.commit, FetchedTip(*default_branch));
  base.from_default_branch = base.commit.has_value();
  if (base.from_default_branch) base.from_branch = *default_branch;
  return base;
}

absl::StatusOr<bool> Repository::IsAncestor(absl::string_view ancestor,
                                            absl::string_view descendant) {
  git_oid old, tip;
  RETURN_IF_ERROR(OidFromHex(ancestor, &old));
  RETURN_IF_ERROR(OidFromHex(descendant, &tip));
  if (git_oid_equal(&old, &tip)) return true;
  const int found = git_graph_descendant_of(Objects(), &tip, &old);
  if (found < 0) {
    // An object missing locally (a rewritten history's commit was never fetched) is no ancestor.
    if (found == GIT_ENOTFOUND) {
      git_error_clear();
      return false;
    }
    return GitStatus(found, absl::StrCat("is ", ancestor, " an ancestor of ", descendant));
  }
  return found == 1;
}

absl::StatusOr<std::optional<std::string>> Repository::LocalTip(absl::string_view branch) {
  ASSIGN_OR_RETURN(std::string ref, BranchRef(branch));
  ASSIGN_OR_RETURN(std::optional<git_oid> tip, CurrentRef(ref));
  return ToHex(tip);
}

absl::StatusOr<std::optional<git_oid>> Repository::CurrentRef(const std::string& ref) {
  RETURN_IF_ERROR(staging_lost_);
  if (auto staged = staged_tips_.find(ref); staged != staged_tips_.end()) return staged->second;
  return ResolveRef(repo_.get(), ref);
}

absl::Status Repository::FlushStaged() {
  RETURN_IF_ERROR(staging_lost_);
  if (staging_) {
    std::vector<git_oid> ids = staging_->object_ids();
    absl::StatusOr<std::optional<std::string>> pack = staging_->Commit(repo_.get());
    staging_.reset();
    if (!pack.ok()) {
      // The staged commits are gone and the refs on disk never named them: every later call
      // says so, and the owner opens the clone again (and commits again from its own records).
      staging_lost_ = absl::UnavailableError(
          absl::StrCat("staged commits could not be written: ", pack.status().message()));
      staged_tips_.clear();
      return staging_lost_;
    }
    if (pack->has_value()) {
      const std::string name = absl::StrCat("pack-", **pack);
      if (IsLocalUrl(options_.remote_url)) unshared_packs_.push_back(name);
      staged_packs_.push_back({name, std::move(ids)});
    }
  }
  // The pack is in place before any ref names its objects.
  for (auto it = staged_tips_.begin(); it != staged_tips_.end(); it = staged_tips_.erase(it)) {
    git_reference* updated = nullptr;
    int rc = git_reference_create(&updated, repo_.get(), it->first.c_str(), &it->second,
                                  /*force=*/1, "commit");
    git_reference_free(updated);
    RETURN_IF_ERROR(GitStatus(rc, absl::StrCat("advancing ", it->first)));
  }
  return absl::OkStatus();
}

absl::Status Repository::MergeStagedPacks() {
  if (staged_packs_.size() <= options_.staged_pack_limit) return absl::OkStatus();
  // Geometric, as `git repack --geometric=2`: the newest packs, and each older one holding at
  // most twice what is taken so far. Each object is copied O(log n) times over its life.
  size_t take = 0;
  size_t objects = 0;
  for (auto it = staged_packs_.rbegin(); it != staged_packs_.rend(); ++it) {
    if (take >= 2 && it->ids.size() > 2 * objects) break;
    objects += it->ids.size();
    ++take;
  }
  const std::string pack_dir = absl::StrCat(git_repository_path(repo_.get()), "objects/pack");
  ASSIGN_OR_RETURN(std::unique_ptr<PackWriter> merged, PackWriter::Create(pack_dir));
  git_odb* raw_odb = nullptr;
  RETURN_IF_ERROR(GitStatus(git_repository_odb(&raw_odb, repo_.get()), "opening the object store"));
  GitPtr<git_odb> odb(raw_odb);
  const size_t first = staged_packs_.size() - take;
  std::vector<git_oid> ids;
  ids.reserve(objects);
  for (size_t i = first; i < staged_packs_.size(); ++i) {
    for (const git_oid& id : staged_packs_[i].ids) {
      git_odb_object* raw = nullptr;
      RETURN_IF_ERROR(GitStatus(git_odb_read(&raw, odb.get(), &id), "reading a staged object"));
      GitPtr<git_odb_object> object(raw);
      RETURN_IF_ERROR(
          merged->Add(id, git_odb_object_type(raw),
                      absl::string_view(static_cast<const char*>(git_odb_object_data(raw)),
                                        git_odb_object_size(raw))));
      ids.push_back(id);
    }
  }
  ASSIGN_OR_RETURN(std::optional<std::string> checksum, merged->Finish());
  if (!checksum.has_value()) return absl::OkStatus();
  // The merged pack is in place; the old ones go (index first: a pack without one is ignored).
  // Another process may read them right now: a reader that opened them keeps them; one that
  // looks them up afresh finds the merged pack. The clone is opened again so this process's
  // object store forgets them.
  const std::string merged_name = absl::StrCat("pack-", *checksum);
  for (size_t i = first; i < staged_packs_.size(); ++i) {
    if (staged_packs_[i].name == merged_name) continue;
    for (const char* ext : {".idx", ".pack"}) {
      const std::string file = absl::StrCat(pack_dir, "/", staged_packs_[i].name, ext);
      if (unlink(file.c_str()) != 0 && errno != ENOENT) {
        return absl::UnavailableError(absl::StrCat("removing ", file, ": ", strerror(errno)));
      }
    }
  }
  staged_packs_.resize(first);
  staged_packs_.push_back({merged_name, std::move(ids)});
  git_repository* reopened = nullptr;
  RETURN_IF_ERROR(GitStatus(git_repository_open_bare(&reopened, options_.local_path.c_str()),
                            absl::StrCat("opening clone at ", options_.local_path)));
  odb.reset();
  repo_.reset(reopened);
  return absl::OkStatus();
}

absl::Status Repository::ResetBranch(absl::string_view branch,
                                     const std::optional<std::string>& commit) {
  ASSIGN_OR_RETURN(std::string ref, BranchRef(branch));
  RETURN_IF_ERROR(FlushStaged());
  if (!commit.has_value()) {
    git_reference* existing = nullptr;
    int rc = git_reference_lookup(&existing, repo_.get(), ref.c_str());
    if (rc == GIT_ENOTFOUND) {
      git_error_clear();
      return absl::OkStatus();
    }
    RETURN_IF_ERROR(GitStatus(rc, absl::StrCat("reading ", ref)));
    rc = git_reference_delete(existing);
    git_reference_free(existing);
    return GitStatus(rc, absl::StrCat("deleting ", ref));
  }
  git_oid oid;
  RETURN_IF_ERROR(OidFromHex(*commit, &oid));
  git_commit* target = nullptr;
  RETURN_IF_ERROR(GitStatus(git_commit_lookup(&target, repo_.get(), &oid),
                            absl::StrCat("reset target ", *commit)));
  git_commit_free(target);
  git_reference* updated = nullptr;
  RETURN_IF_ERROR(GitStatus(
      git_reference_create(&updated, repo_.get(), ref.c_str(), &oid, /*force=*/1, "reset"),
      absl::StrCat("resetting ", ref)));
  git_reference_free(updated);
  return absl::OkStatus();
}

absl::StatusOr<std::optional<std::string>> Repository::CommitOnBranch(absl::string_view branch,
                                                                      const ChangeSet& changes,
                                                                      const CommitSpec& spec) {
  ASSIGN_OR_RETURN(std::string ref, BranchRef(branch));
  if (options_.stage_small_commits && changes.size() < options_.pack_threshold) {
    ASSIGN_OR_RETURN(std::optional<git_oid> staged_base, CurrentRef(ref));
    if (!staging_) {
      ASSIGN_OR_RETURN(staging_, BulkWriter::Begin(repo_.get()));
    }
    ASSIGN_OR_RETURN(std::optional<std::string> commit,
                     CreateCommit(staging_->repo(), ToHex(staged_base), changes, spec));
    if (!commit.has_value()) return std::nullopt;
    git_oid oid;
    RETURN_IF_ERROR(OidFromHex(*commit, &oid));
    staged_tips_[ref] = oid;
    if (staging_->object_count() >= options_.staged_object_limit) RETURN_IF_ERROR(FlushStaged());
    return commit;
  }
  RETURN_IF_ERROR(FlushStaged());
  ASSIGN_OR_RETURN(std::optional<git_oid> tip, ResolveRef(repo_.get(), ref));
  std::unique_ptr<BulkWriter> bulk;
  if (changes.size() >= options_.pack_threshold) {
    ASSIGN_OR_RETURN(bulk, BulkWriter::Begin(repo_.get()));
  }
  ASSIGN_OR_RETURN(std::optional<std::string> commit,
                   CreateCommit(bulk ? bulk->repo() : repo_.get(), ToHex(tip), changes, spec));
  // The pack goes into place before the branch moves, so the ref never names missing objects.
  if (bulk) {
    ASSIGN_OR_RETURN(std::optional<std::string> pack, bulk->Commit(repo_.get()));
    if (pack.has_value() && IsLocalUrl(options_.remote_url)) {
      unshared_packs_.push_back(absl::StrCat("pack-", *pack));
    }
  }
  if (!commit.has_value()) return std::nullopt;
  git_oid oid;
  RETURN_IF_ERROR(OidFromHex(*commit, &oid));
  git_reference* updated = nullptr;
  int rc = tip.has_value() ? git_reference_create_matching(&updated, repo_.get(), ref.c_str(), &oid,
                                                           1, &*tip, "commit")
                           : git_reference_create(&updated, repo_.get(), ref.c_str(), &oid, 0,
                                                  "commit (initial)");
  git_reference_free(updated);
  RETURN_IF_ERROR(GitStatus(rc, absl::StrCat("advancing ", ref)));
  return commit;
}

std::string BlobIdOf(absl::string_view content) {
  git_oid oid;
  if (git_odb_hash(&oid, content.data(), content.size(), GIT_OBJECT_BLOB) != 0) {
    git_error_clear();
    return "";
  }
  return OidToHex(oid);
}

namespace {

// The tree of a commit.
absl::StatusOr<GitPtr<git_tree>> CommitTree(git_repository* repo, absl::string_view commit) {
  git_oid oid;
  RETURN_IF_ERROR(OidFromHex(commit, &oid));
  git_commit* raw_commit = nullptr;
  RETURN_IF_ERROR(GitStatus(git_commit_lookup(&raw_commit, repo, &oid),
                            absl::StrCat("reading commit ", commit)));
  GitPtr<git_commit> owned_commit(raw_commit);
  git_tree* raw_tree = nullptr;
  RETURN_IF_ERROR(GitStatus(git_commit_tree(&raw_tree, raw_commit), "reading tree"));
  return GitPtr<git_tree>(raw_tree);
}

// The blob at `path` of a commit (nullopt: no such file).
absl::StatusOr<std::optional<git_oid>> FileOid(git_repository* repo, absl::string_view commit,
                                               absl::string_view path) {
  RETURN_IF_ERROR(ValidateRepoPath(path));
  ASSIGN_OR_RETURN(GitPtr<git_tree> tree, CommitTree(repo, commit));
  git_tree_entry* raw_entry = nullptr;
  const std::string path_str(path);
  int rc = git_tree_entry_bypath(&raw_entry, tree.get(), path_str.c_str());
  if (rc == GIT_ENOTFOUND) {
    git_error_clear();
    return std::nullopt;
  }
  RETURN_IF_ERROR(GitStatus(rc, absl::StrCat("looking up ", path)));
  GitPtr<git_tree_entry> entry(raw_entry);
  if (git_tree_entry_type(raw_entry) != GIT_OBJECT_BLOB) {
    return absl::FailedPreconditionError(absl::StrCat("'", path, "' is not a file"));
  }
  return *git_tree_entry_id(raw_entry);
}

absl::StatusOr<std::string> ReadBlobOid(git_repository* repo, const git_oid& oid,
                                        absl::string_view what) {
  git_blob* raw_blob = nullptr;
  RETURN_IF_ERROR(
      GitStatus(git_blob_lookup(&raw_blob, repo, &oid), absl::StrCat("reading ", what)));
  GitPtr<git_blob> blob(raw_blob);
  return std::string(static_cast<const char*>(git_blob_rawcontent(raw_blob)),
                     static_cast<size_t>(git_blob_rawsize(raw_blob)));
}

}  // namespace

absl::StatusOr<std::optional<std::string>> Repository::ReadFile(absl::string_view commit,
                                                                absl::string_view path) {
  ASSIGN_OR_RETURN(std::optional<git_oid> oid, FileOid(Objects(), commit, path));
  if (!oid.has_value()) return std::nullopt;
  return ReadBlobOid(Objects(), *oid, path);
}

absl::StatusOr<std::optional<std::string>> Repository::FileBlobId(absl::string_view commit,
                                                                  absl::string_view path) {
  ASSIGN_OR_RETURN(std::optional<git_oid> oid, FileOid(Objects(), commit, path));
  if (!oid.has_value()) return std::nullopt;
  return OidToHex(*oid);
}

absl::StatusOr<uint64_t> Repository::BlobSize(absl::string_view blob_id) {
  git_oid oid;
  RETURN_IF_ERROR(OidFromHex(blob_id, &oid));
  git_odb* raw_odb = nullptr;
  RETURN_IF_ERROR(GitStatus(git_repository_odb(&raw_odb, Objects()), "opening the object store"));
  GitPtr<git_odb> odb(raw_odb);
  size_t size = 0;
  git_object_t type = GIT_OBJECT_INVALID;
  RETURN_IF_ERROR(GitStatus(git_odb_read_header(&size, &type, raw_odb, &oid),
                            absl::StrCat("reading the header of ", blob_id)));
  if (type != GIT_OBJECT_BLOB) {
    return absl::FailedPreconditionError(absl::StrCat(blob_id, " is not a blob"));
  }
  return static_cast<uint64_t>(size);
}

absl::StatusOr<std::string> Repository::ReadBlob(absl::string_view blob_id) {
  git_oid oid;
  RETURN_IF_ERROR(OidFromHex(blob_id, &oid));
  return ReadBlobOid(Objects(), oid, blob_id);
}

absl::StatusOr<std::vector<std::string>> Repository::ListFiles(absl::string_view commit,
                                                               absl::string_view prefix) {
  ASSIGN_OR_RETURN(std::vector<FileEntry> entries, ListFileEntries(commit, prefix));
  std::vector<std::string> files;
  files.reserve(entries.size());
  for (FileEntry& entry : entries) files.push_back(std::move(entry.path));
  return files;
}

absl::StatusOr<std::vector<FileEntry>> Repository::ListFileEntries(absl::string_view commit,
                                                                   absl::string_view prefix,
                                                                   bool with_submodules) {
  ASSIGN_OR_RETURN(GitPtr<git_tree> tree, CommitTree(Objects(), commit));
  std::string root;
  if (!prefix.empty()) {
    RETURN_IF_ERROR(ValidateRepoPath(prefix));
    root = std::string(prefix);
    git_tree_entry* raw_entry = nullptr;
    int rc = git_tree_entry_bypath(&raw_entry, tree.get(), root.c_str());
    if (rc == GIT_ENOTFOUND) {
      git_error_clear();
      return std::vector<FileEntry>{};
    }
    RETURN_IF_ERROR(GitStatus(rc, absl::StrCat("looking up ", prefix)));
    GitPtr<git_tree_entry> entry(raw_entry);
    if (git_tree_entry_type(raw_entry) != GIT_OBJECT_TREE) return std::vector<FileEntry>{};
    git_tree* raw_tree = nullptr;
    RETURN_IF_ERROR(GitStatus(git_tree_lookup(&raw_tree, Objects(), git_tree_entry_id(raw_entry)),
                              absl::StrCat("reading ", prefix)));
    tree.reset(raw_tree);
    root += "/";
  }
  struct Walk {
    std::string root;
    bool with_submodules;
    std::vector<FileEntry> files;
  } walk{root, with_submodules, {}};
  auto visit = [](const char* dir, const git_tree_entry* entry, void* payload) -> int {
    auto* w = static_cast<Walk*>(payload);
    const git_object_t type = git_tree_entry_type(entry);
    FileEntry::Kind kind = FileEntry::Kind::kFile;
    if (type == GIT_OBJECT_COMMIT && w->with_submodules) {
      kind = FileEntry::Kind::kSubmodule;
    } else if (type != GIT_OBJECT_BLOB) {
      return 0;
    } else if (git_tree_entry_filemode(entry) == GIT_FILEMODE_LINK) {
      kind = FileEntry::Kind::kSymlink;
    }
    w->files.push_back({absl::StrCat(w->root, dir, git_tree_entry_name(entry)),
                        OidToHex(*git_tree_entry_id(entry)), kind});
    return 0;
  };
  RETURN_IF_ERROR(
      GitStatus(git_tree_walk(tree.get(), GIT_TREEWALK_PRE, visit, &walk), "walking tree"));
  return walk.files;
}

absl::Status Repository::SetTracking(absl::string_view branch, const git_oid& commit) {
  git_reference* updated = nullptr;
  int rc = git_reference_create(&updated, repo_.get(),
                                absl::StrCat(kTrackingPrefix, branch).c_str(), &commit, 1, "push");
  git_reference_free(updated);
  return GitStatus(rc, "updating the remote-tracking ref");
}

absl::StatusOr<PushResult> Repository::Push(absl::string_view branch,
                                            absl::string_view local_commit,
                                            const std::optional<std::string>& expected_old) {
  ASSIGN_OR_RETURN(std::string ref, BranchRef(branch));
  // Staged commits are written first: a push sends only what is in place.
  RETURN_IF_ERROR(FlushStaged());
  git_oid local;
  RETURN_IF_ERROR(OidFromHex(local_commit, &local));
  git_commit* raw_commit = nullptr;
  RETURN_IF_ERROR(GitStatus(git_commit_lookup(&raw_commit, repo_.get(), &local),
                            absl::StrCat("push source ", local_commit)));
  git_commit_free(raw_commit);
  std::optional<git_oid> expected;
  if (expected_old.has_value()) {
    git_oid old;
    RETURN_IF_ERROR(OidFromHex(*expected_old, &old));
    if (!git_oid_equal(&old, &local) && git_graph_descendant_of(repo_.get(), &local, &old) != 1) {
      git_error_clear();
      return absl::FailedPreconditionError(
          absl::StrCat("commit ", local_commit, " does not descend from the expected remote tip ",
                       *expected_old));
    }
    expected = old;
  }

  ASSIGN_OR_RETURN(GitPtr<git_remote> remote, Origin());
  RemoteSession session(options_.remote_url, options_.credentials);
  git_remote_callbacks callbacks = GIT_REMOTE_CALLBACKS_INIT;
  session.Install(&callbacks);
  ASSIGN_OR_RETURN(RemoteRefs refs,
                   ConnectAndList(remote.get(), GIT_DIRECTION_PUSH, session, callbacks));

  // Decide from the advertisement before sending anything.
  std::optional<std::string> advertised = refs.Tip(branch);
  const std::string local_hex = OidToHex(local);
  if (advertised == local_hex) {
    RETURN_IF_ERROR(SetTracking(branch, local));
    return PushResult{PushOutcome::kUpToDate, advertised, ""};
  }
  if (expected.has_value() && !advertised.has_value()) {
    return PushResult{PushOutcome::kRemoteMissing, std::nullopt, "remote branch went missing"};
  }
  if (advertised != ToHex(expected)) {
    return PushResult{PushOutcome::kConflict, advertised, "remote received unknown updates"};
  }

  absl::StatusOr<PushResult> result;
  if (IsLocalUrl(options_.remote_url)) {
    git_remote_disconnect(remote.get());
    result = PushLocal(ref, local, expected);
  } else {
    result = PushSmart(remote.get(), ref, local);
    git_remote_disconnect(remote.get());
  }
  if (!result.ok()) return result;

  if (result->outcome == PushOutcome::kPushed) {
    RETURN_IF_ERROR(SetTracking(branch, local));
    // After the push, which linked the staged packs into a local remote: a merge never
    // deletes a pack a push still has to offer.
    RETURN_IF_ERROR(MergeStagedPacks());
    return result;
  }
  if (result->outcome != PushOutcome::kConflict || result->remote_tip.has_value()) {
    return result;
  }
  // The remote refused the update: look again to tell a moved branch from any other refusal.
  absl::StatusOr<RemoteRefs> now = ListRemote();
  if (!now.ok()) {
    return absl::UnavailableError(
        absl::StrCat("push rejected (", result->detail,
                     ") and the remote could not be re-read: ", now.status().message()));
  }
  std::optional<std::string> tip = now->Tip(branch);
  if (tip == local_hex) return PushResult{PushOutcome::kUpToDate, tip, result->detail};
  if (tip != ToHex(expected)) {
    if (expected.has_value() && !tip.has_value()) {
      return PushResult{PushOutcome::kRemoteMissing, std::nullopt, result->detail};
    }
    return PushResult{PushOutcome::kConflict, tip, result->detail};
  }
  return absl::UnavailableError(absl::StrCat("push rejected by the remote: ", result->detail));
}

absl::StatusOr<git_repository*> Repository::LocalRemote() {
  if (local_remote_ == nullptr) {
    const std::string remote_path = LocalPathFromUrl(options_.remote_url);
    git_repository* opened = nullptr;
    RETURN_IF_ERROR(GitStatus(git_repository_open(&opened, remote_path.c_str()),
                              absl::StrCat("opening ", remote_path)));
    local_remote_.reset(opened);
  }
  return local_remote_.get();
}

// libgit2's local transport packs every object reachable from *every* remote branch the clone
// lacks, with a delta search, and then indexes that pack again on this side: a stale clone of a
// remote with many busy branches paid seconds of CPU for history it never reads. Both sides are
// on this machine, so the objects of the wanted branches are copied as a push copies them
// (CopyMissingObjects: the walk stops at what the clone has, one pack, no delta search).
absl::Status Repository::FetchLocal(const RemoteRefs& refs, absl::string_view only_branch) {
  ASSIGN_OR_RETURN(git_repository * remote, LocalRemote());
  size_t copied = 0;
  absl::flat_hash_set<std::string> on_remote;
  for (const auto& [name, hex] : refs.heads) {
    absl::string_view branch = name;
    if (!absl::ConsumePrefix(&branch, "refs/heads/")) continue;
    on_remote.insert(std::string(branch));
    const bool wanted = only_branch.empty() || branch == only_branch ||
                        (refs.default_branch.has_value() && branch == *refs.default_branch);
    if (!wanted) continue;
    git_oid tip;
    RETURN_IF_ERROR(OidFromHex(hex, &tip));
    ASSIGN_OR_RETURN(size_t objects, CopyMissingObjects(remote, repo_.get(), tip));
    copied += objects;
    git_oid current;
    if (git_reference_name_to_id(&current, repo_.get(),
                                 absl::StrCat(kTrackingPrefix, branch).c_str()) == 0 &&
        git_oid_equal(&current, &tip)) {
      continue;
    }
    git_error_clear();
    RETURN_IF_ERROR(SetTracking(branch, tip));
  }
  last_fetch_received_objects_ = copied;

  // Prune the tracking refs of branches the remote no longer has.
  ASSIGN_OR_RETURN(auto tracking, TrackingRefs(repo_.get()));
  for (const auto& [name, oid] : tracking) {
    absl::string_view branch = name;
    if (absl::ConsumePrefix(&branch, kTrackingPrefix) && !on_remote.contains(branch)) {
      RETURN_IF_ERROR(GitStatus(git_reference_remove(repo_.get(), name.c_str()),
                                "pruning a remote-tracking ref"));
    }
  }
  return absl::OkStatus();
}

// libgit2's local transport updates the remote ref without checking its old value, so the
// compare-and-swap is done here: write the pack into the remote's object store, then update the
// ref under its lock only if it still holds the expected value (the same guarantee git's
// receive-pack gives).
absl::StatusOr<PushResult> Repository::PushLocal(const std::string& ref, const git_oid& local,
                                                 const std::optional<git_oid>& expected) {
  ASSIGN_OR_RETURN(git_repository * raw_remote, LocalRemote());
  if (!git_repository_is_bare(raw_remote)) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot push to non-bare repository ", LocalPathFromUrl(options_.remote_url)));
  }

  // Packs of large commits are linked whole (a first mirror moves no object by hand). Whatever
  // the remote still lacks goes straight into one pack in its object store (no delta search:
  // both sides are on this machine, so compressing once is all that pays). The walk stops at
  // commits the remote has (`expected`).
  const std::vector<std::string> packs = std::move(unshared_packs_);
  unshared_packs_.clear();
  RETURN_IF_ERROR(CopyMissingObjects(repo_.get(), raw_remote, local, packs).status());

  // A concurrent pusher may hold the ref's lock file for a moment; like git's
  // core.filesRefLockTimeout, retry briefly before reporting the contention.
  int rc = GIT_ELOCKED;
  const absl::Time deadline = absl::Now() + absl::Seconds(1);
  for (absl::Duration backoff = absl::Milliseconds(1);;
       backoff = std::min(backoff * 2, absl::Milliseconds(50))) {
    git_reference* updated = nullptr;
    rc = expected.has_value()
             ? git_reference_create_matching(&updated, raw_remote, ref.c_str(), &local,
                                             /*force=*/1, &*expected, "push")
             : git_reference_create(&updated, raw_remote, ref.c_str(), &local, /*force=*/0, "push");
    git_reference_free(updated);
    if (rc != GIT_ELOCKED || absl::Now() >= deadline) break;
    git_error_clear();
    absl::SleepFor(backoff);
  }
  if (rc == 0) return PushResult{PushOutcome::kPushed, OidToHex(local), ""};
  if (rc == GIT_EMODIFIED || rc == GIT_EEXISTS || rc == GIT_ELOCKED || rc == GIT_ENOTFOUND) {
    // Someone else updated (or holds) the ref: the caller re-reads the remote to classify.
    absl::Status status = GitStatus(rc, "updating the remote ref");
    return PushResult{PushOutcome::kConflict, std::nullopt, std::string(status.message())};
  }
  return GitStatus(rc, "updating the remote ref");
}

absl::StatusOr<PushResult> Repository::PushSmart(git_remote* remote, const std::string& ref,
                                                 const git_oid& local) {
  git_reference* scratch = nullptr;
  RETURN_IF_ERROR(GitStatus(
      git_reference_create(&scratch, repo_.get(), kPushScratchRef, &local, 1, "push source"),
      "preparing the push"));
  GitPtr<git_reference> owned_scratch(scratch);
  // Reuse the callbacks of the connection the advertisement came from: that connection's
  // advertised value is the old value the remote checks the update against.
  RemoteSession session(options_.remote_url, options_.credentials);
  git_push_options push = GIT_PUSH_OPTIONS_INIT;
  // Delta search over a large first push is the pack builder's main cost: use every core.
  push.pb_parallelism = 0;
  session.Install(&push.callbacks);
  push.custom_headers = *session.headers();
  StrArray refspecs({absl::StrCat(kPushScratchRef, ":", ref)});
  int rc = git_remote_upload(remote, refspecs.get(), &push);
  git_reference_delete(scratch);
  if (rc == GIT_ENONFASTFORWARD) {
    absl::Status status = GitStatus(rc, "push");
    return PushResult{PushOutcome::kConflict, std::nullopt, std::string(status.message())};
  }
  RETURN_IF_ERROR(GitStatus(rc, absl::StrCat("pushing to ", core::RedactUrl(options_.remote_url))));
  if (!session.push_rejections().empty()) {
    return PushResult{PushOutcome::kConflict, std::nullopt, session.push_rejections().front()};
  }
  return PushResult{PushOutcome::kPushed, OidToHex(local), ""};
}

}  // namespace reverser::git
