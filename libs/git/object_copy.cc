#include "libs/git/object_copy.h"

#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "libs/core/status.h"
#include "libs/git/libgit2.h"
#include "libs/git/pack_writer.h"

namespace reverser::git {
namespace {

absl::StatusOr<GitPtr<git_odb>> OdbOf(git_repository* repo) {
  git_odb* odb = nullptr;
  RETURN_IF_ERROR(GitStatus(git_repository_odb(&odb, repo), "opening the object database"));
  return GitPtr<git_odb>(odb);
}

// One copy: walks the sender's history from the tip and streams what the receiver lacks.
class Copier {
 public:
  Copier(git_repository* from, git_odb* from_odb, git_odb* to_odb, PackWriter& pack)
      : from_(from), from_odb_(from_odb), to_odb_(to_odb), pack_(pack) {}

  absl::Status CopyHistory(const git_oid& tip) {
    std::vector<git_oid> commits = {tip};
    while (!commits.empty()) {
      const git_oid id = commits.back();
      commits.pop_back();
      if (!Missing(id)) continue;
      git_commit* raw = nullptr;
      RETURN_IF_ERROR(GitStatus(git_commit_lookup(&raw, from_, &id),
                                absl::StrCat("reading commit ", OidToHex(id))));
      GitPtr<git_commit> commit(raw);
      RETURN_IF_ERROR(CopyTree(*git_commit_tree_id(commit.get())));
      RETURN_IF_ERROR(Copy(id));
      for (unsigned i = 0; i < git_commit_parentcount(commit.get()); ++i) {
        commits.push_back(*git_commit_parent_id(commit.get(), i));
      }
    }
    return absl::OkStatus();
  }

 private:
  // True when neither the pack being written nor the receiver has the object. Lookups skip
  // libgit2's rescan of the pack directory on a miss: nobody else writes the receiver meanwhile
  // that we need to see, and a rescan per missing object would dominate the copy.
  bool Missing(const git_oid& id) {
    return !pack_.Contains(id) && git_odb_exists_ext(to_odb_, &id, GIT_ODB_LOOKUP_NO_REFRESH) != 1;
  }

  absl::Status CopyTree(const git_oid& id) {
    if (!Missing(id)) return absl::OkStatus();
    git_tree* raw = nullptr;
    RETURN_IF_ERROR(
        GitStatus(git_tree_lookup(&raw, from_, &id), absl::StrCat("reading tree ", OidToHex(id))));
    GitPtr<git_tree> tree(raw);
    const size_t count = git_tree_entrycount(tree.get());
    for (size_t i = 0; i < count; ++i) {
      const git_tree_entry* entry = git_tree_entry_byindex(tree.get(), i);
      switch (git_tree_entry_type(entry)) {
        case GIT_OBJECT_TREE:
          RETURN_IF_ERROR(CopyTree(*git_tree_entry_id(entry)));
          break;
        case GIT_OBJECT_BLOB:
          if (Missing(*git_tree_entry_id(entry))) RETURN_IF_ERROR(Copy(*git_tree_entry_id(entry)));
          break;
        default:  // a submodule's commit lives in another repository
          break;
      }
    }
    return Copy(id);
  }

  absl::Status Copy(const git_oid& id) {
    git_odb_object* raw = nullptr;
    RETURN_IF_ERROR(GitStatus(git_odb_read(&raw, from_odb_, &id),
                              absl::StrCat("reading object ", OidToHex(id))));
    GitPtr<git_odb_object> object(raw);
    return pack_.Add(id, git_odb_object_type(raw),
                     absl::string_view(static_cast<const char*>(git_odb_object_data(raw)),
                                       git_odb_object_size(raw)));
  }

  git_repository* from_;
  git_odb* from_odb_;
  git_odb* to_odb_;
  PackWriter& pack_;
};

}  // namespace

absl::StatusOr<size_t> CopyMissingObjects(git_repository* from, git_repository* to,
                                          const git_oid& tip) {
  ASSIGN_OR_RETURN(GitPtr<git_odb> from_odb, OdbOf(from));
  ASSIGN_OR_RETURN(GitPtr<git_odb> to_odb, OdbOf(to));
  // Whatever landed in the receiver before this copy counts as present.
  RETURN_IF_ERROR(GitStatus(git_odb_refresh(to_odb.get()), "refreshing the receiver"));
  ASSIGN_OR_RETURN(std::unique_ptr<PackWriter> pack,
                   PackWriter::Create(absl::StrCat(git_repository_path(to), "objects/pack")));
  Copier copier(from, from_odb.get(), to_odb.get(), *pack);
  RETURN_IF_ERROR(copier.CopyHistory(tip));
  const size_t copied = pack->object_count();
  ASSIGN_OR_RETURN(std::optional<std::string> checksum, pack->Finish());
  if (checksum.has_value()) {
    RETURN_IF_ERROR(GitStatus(git_odb_refresh(to_odb.get()), "refreshing the receiver"));
  }
  return copied;
}

}  // namespace reverser::git
