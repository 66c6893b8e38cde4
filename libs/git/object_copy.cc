#include "libs/git/object_copy.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>

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
      // What the commit shares with its first parent is in the receiver already (the parent is
      // there) or goes with the parent: only the difference is looked up in the receiver, whose
      // object store may hold many packs.
      std::optional<git_oid> base;
      if (git_commit_parentcount(commit.get()) > 0) {
        git_commit* parent = nullptr;
        if (git_commit_parent(&parent, commit.get(), 0) == 0) {
          base = *git_commit_tree_id(parent);
          git_commit_free(parent);
        } else {
          git_error_clear();  // a shallow parent: compare with nothing
        }
      }
      RETURN_IF_ERROR(FromTree(*git_commit_tree_id(commit.get()), base ? &*base : nullptr));
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

  // `base`: the same directory in the parent commit (nullptr if none); its unchanged entries
  // are skipped without a lookup.
  absl::Status FromTree(const git_oid& id, const git_oid* base) {
    if (base != nullptr && git_oid_equal(&id, base)) return absl::OkStatus();
    if (!Missing(id)) return absl::OkStatus();
    git_tree* raw = nullptr;
    RETURN_IF_ERROR(
        GitStatus(git_tree_lookup(&raw, from_, &id), absl::StrCat("reading tree ", OidToHex(id))));
    GitPtr<git_tree> tree(raw);
    GitPtr<git_tree> base_tree;
    if (base != nullptr) {
      git_tree* raw_base = nullptr;
      if (git_tree_lookup(&raw_base, from_, base) == 0) {
        base_tree.reset(raw_base);
      } else {
        git_error_clear();
      }
    }
    const size_t count = git_tree_entrycount(tree.get());
    for (size_t i = 0; i < count; ++i) {
      const git_tree_entry* entry = git_tree_entry_byindex(tree.get(), i);
      const git_oid& child = *git_tree_entry_id(entry);
      const git_tree_entry* before =
          base_tree ? git_tree_entry_byname(base_tree.get(), git_tree_entry_name(entry)) : nullptr;
      const git_oid* child_base = before != nullptr && git_tree_entry_type(before) ==
                                                            git_tree_entry_type(entry)
                                      ? git_tree_entry_id(before)
                                      : nullptr;
      switch (git_tree_entry_type(entry)) {
        case GIT_OBJECT_TREE:
          RETURN_IF_ERROR(FromTree(child, child_base));
          break;
        case GIT_OBJECT_BLOB:
          if (child_base != nullptr && git_oid_equal(&child, child_base)) break;
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
