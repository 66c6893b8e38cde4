#include "libs/git/object_copy.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "libs/core/status.h"
#include "libs/git/libgit2.h"
#include "libs/git/pack_writer.h"

namespace reverser::git {
namespace {

struct OidHash {
  size_t operator()(const git_oid& id) const {
    size_t h;  // object ids are uniformly distributed
    std::memcpy(&h, id.id, sizeof(h));
    return h;
  }
};
struct OidEq {
  bool operator()(const git_oid& a, const git_oid& b) const { return git_oid_equal(&a, &b); }
};

absl::StatusOr<GitPtr<git_odb>> OdbOf(git_repository* repo) {
  git_odb* odb = nullptr;
  RETURN_IF_ERROR(GitStatus(git_repository_odb(&odb, repo), "opening the object database"));
  return GitPtr<git_odb>(odb);
}

// Lookups skip libgit2's rescan of the pack directory on a miss: the caller refreshes once,
// and a rescan per missing object would dominate the copy.
bool Has(git_odb* odb, const git_oid& id) {
  return git_odb_exists_ext(odb, &id, GIT_ODB_LOOKUP_NO_REFRESH) == 1;
}

// Step 1: the ids reachable from a tip that the receiver lacks, each once.
class MissingObjects {
 public:
  MissingObjects(git_repository* from, git_odb* to) : from_(from), to_(to) {}

  absl::Status FromCommit(const git_oid& tip) {
    std::vector<git_oid> commits = {tip};
    while (!commits.empty()) {
      const git_oid id = commits.back();
      commits.pop_back();
      if (!Missing(id)) continue;
      git_commit* raw = nullptr;
      RETURN_IF_ERROR(GitStatus(git_commit_lookup(&raw, from_, &id),
                                absl::StrCat("reading commit ", OidToHex(id))));
      GitPtr<git_commit> commit(raw);
      RETURN_IF_ERROR(FromTree(*git_commit_tree_id(commit.get())));
      ids_.push_back(id);
      for (unsigned i = 0; i < git_commit_parentcount(commit.get()); ++i) {
        commits.push_back(*git_commit_parent_id(commit.get(), i));
      }
    }
    return absl::OkStatus();
  }

  const std::vector<git_oid>& ids() const { return ids_; }

 private:
  bool Missing(const git_oid& id) { return seen_.insert(id).second && !Has(to_, id); }

  absl::Status FromTree(const git_oid& id) {
    if (!Missing(id)) return absl::OkStatus();
    git_tree* raw = nullptr;
    RETURN_IF_ERROR(
        GitStatus(git_tree_lookup(&raw, from_, &id), absl::StrCat("reading tree ", OidToHex(id))));
    GitPtr<git_tree> tree(raw);
    const size_t count = git_tree_entrycount(tree.get());
    for (size_t i = 0; i < count; ++i) {
      const git_tree_entry* entry = git_tree_entry_byindex(tree.get(), i);
      const git_oid& child = *git_tree_entry_id(entry);
      switch (git_tree_entry_type(entry)) {
        case GIT_OBJECT_TREE:
          RETURN_IF_ERROR(FromTree(child));
          break;
        case GIT_OBJECT_BLOB:
          if (Missing(child)) ids_.push_back(child);
          break;
        default:  // a submodule's commit lives in another repository
          break;
      }
    }
    ids_.push_back(id);
    return absl::OkStatus();
  }

  git_repository* from_;
  git_odb* to_;
  absl::flat_hash_set<git_oid, OidHash, OidEq> seen_;
  std::vector<git_oid> ids_;
};

// Step 2 for one pack; false when it cannot be linked. A pack already in `to` counts as linked.
bool SharePack(git_repository* from, git_repository* to, const std::string& name) {
  const std::string source = absl::StrCat(git_repository_path(from), "objects/pack/", name);
  const std::string target = absl::StrCat(git_repository_path(to), "objects/pack/", name);
  // The index last: a pack becomes visible to readers when its index appears.
  for (const char* suffix : {".pack", ".idx"}) {
    if (::link(absl::StrCat(source, suffix).c_str(), absl::StrCat(target, suffix).c_str()) != 0 &&
        errno != EEXIST) {
      return false;
    }
  }
  return true;
}

}  // namespace

absl::StatusOr<size_t> CopyMissingObjects(git_repository* from, git_repository* to,
                                          const git_oid& tip,
                                          const std::vector<std::string>& shareable_packs) {
  ASSIGN_OR_RETURN(GitPtr<git_odb> from_odb, OdbOf(from));
  ASSIGN_OR_RETURN(GitPtr<git_odb> to_odb, OdbOf(to));
  // Whatever landed in the receiver before this copy counts as present.
  RETURN_IF_ERROR(GitStatus(git_odb_refresh(to_odb.get()), "refreshing the receiver"));
  // Found before any pack is linked: a linked pack holds objects whose history the receiver
  // may not have yet, so its commits and trees must not stop the walk.
  MissingObjects missing(from, to_odb.get());
  RETURN_IF_ERROR(missing.FromCommit(tip));
  if (missing.ids().empty()) return 0;

  bool linked = false;
  for (const std::string& pack : shareable_packs) linked |= SharePack(from, to, pack);
  if (linked) RETURN_IF_ERROR(GitStatus(git_odb_refresh(to_odb.get()), "refreshing the receiver"));

  ASSIGN_OR_RETURN(std::unique_ptr<PackWriter> pack,
                   PackWriter::Create(absl::StrCat(git_repository_path(to), "objects/pack")));
  for (const git_oid& id : missing.ids()) {
    if (linked && Has(to_odb.get(), id)) continue;
    git_odb_object* raw = nullptr;
    RETURN_IF_ERROR(GitStatus(git_odb_read(&raw, from_odb.get(), &id),
                              absl::StrCat("reading object ", OidToHex(id))));
    GitPtr<git_odb_object> object(raw);
    RETURN_IF_ERROR(pack->Add(id, git_odb_object_type(raw),
                              absl::string_view(static_cast<const char*>(git_odb_object_data(raw)),
                                                git_odb_object_size(raw))));
  }
  const size_t copied = pack->object_count();
  ASSIGN_OR_RETURN(std::optional<std::string> checksum, pack->Finish());
  if (checksum.has_value()) {
    RETURN_IF_ERROR(GitStatus(git_odb_refresh(to_odb.get()), "refreshing the receiver"));
  }
  return copied;
}

}  // namespace reverser::git
