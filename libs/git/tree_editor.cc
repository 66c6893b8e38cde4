#include "libs/git/tree_editor.h"

#include <set>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "libs/core/status.h"
#include "libs/git/libgit2.h"
#include "libs/git/repo_path.h"

namespace reverser::git {
namespace {

std::string Join(const std::string& dir, const std::string& name) {
  return dir.empty() ? name : absl::StrCat(dir, "/", name);
}

// What sits at a name in the tree being edited, as far as path traversal is concerned.
absl::string_view KindOf(git_filemode_t mode) {
  switch (mode) {
    case GIT_FILEMODE_TREE:
      return "a directory";
    case GIT_FILEMODE_LINK:
      return "a symlink";
    case GIT_FILEMODE_COMMIT:
      return "a submodule";
    default:
      return "a file";
  }
}

absl::Status Blocked(const std::string& path, git_filemode_t mode, absl::string_view action) {
  return absl::FailedPreconditionError(
      absl::StrCat("cannot ", action, ": '", path, "' is ", KindOf(mode), " in the tree"));
}

// The changes below one directory: a contiguous range of the (sorted) change set whose paths
// all start with the directory's prefix, which is `offset` characters long. Working on ranges
// keeps the contents where they are instead of copying them once per directory level.
struct ChangeRange {
  ChangeSet::const_iterator begin;
  ChangeSet::const_iterator end;
  size_t offset;
};

// Edits one directory level. Returns std::nullopt when the resulting directory is empty (Git
// stores no empty trees; the caller drops the entry).
absl::StatusOr<std::optional<git_oid>> EditTree(git_repository* repo, const git_tree* base,
                                                const ChangeRange& changes,
                                                const std::string& dir) {
  git_treebuilder* raw_builder = nullptr;
  RETURN_IF_ERROR(GitStatus(git_treebuilder_new(&raw_builder, repo, base), "treebuilder"));
  GitPtr<git_treebuilder> builder(raw_builder);

  // Split the range into files of this directory and one sub-range per subdirectory. All paths
  // below "name/" are adjacent in the sorted change set.
  std::vector<ChangeSet::const_iterator> direct;
  std::vector<std::pair<std::string, ChangeRange>> nested;
  for (auto it = changes.begin; it != changes.end;) {
    absl::string_view rest = absl::string_view(it->first).substr(changes.offset);
    const size_t slash = rest.find('/');
    if (slash == absl::string_view::npos) {
      direct.push_back(it++);
      continue;
    }
    const absl::string_view prefix =
        absl::string_view(it->first).substr(0, changes.offset + slash + 1);
    auto sub_begin = it;
    while (it != changes.end && absl::StartsWith(it->first, prefix)) ++it;
    nested.emplace_back(std::string(rest.substr(0, slash)),
                        ChangeRange{sub_begin, it, prefix.size()});
  }

  std::set<absl::string_view> subdirectories;
  for (const auto& [name, range] : nested) subdirectories.insert(name);

  for (auto change : direct) {
    const std::string name = change->first.substr(changes.offset);
    const std::optional<std::string>& content = change->second;
    const std::string full = Join(dir, name);
    if (content.has_value() && subdirectories.count(name)) {
      return absl::InvalidArgumentError(
          absl::StrCat("change set writes '", full, "' both as a file and as a directory"));
    }
    const git_tree_entry* existing = git_treebuilder_get(builder.get(), name.c_str());
    git_filemode_t mode = existing ? git_tree_entry_filemode(existing) : GIT_FILEMODE_BLOB;
    if (!content.has_value()) {
      if (!existing) continue;
      // Removing a symlink entry follows nothing, so it is allowed; directories are not files.
      if (mode == GIT_FILEMODE_TREE) return Blocked(full, mode, "delete a directory");
      RETURN_IF_ERROR(GitStatus(git_treebuilder_remove(builder.get(), name.c_str()),
                                absl::StrCat("removing ", full)));
      continue;
    }
    if (existing && mode != GIT_FILEMODE_BLOB && mode != GIT_FILEMODE_BLOB_EXECUTABLE) {
      return Blocked(full, mode, "write");
    }
    git_oid blob;
    RETURN_IF_ERROR(
        GitStatus(git_blob_create_from_buffer(&blob, repo, content->data(), content->size()),
                  absl::StrCat("writing blob for ", full)));
    RETURN_IF_ERROR(
        GitStatus(git_treebuilder_insert(nullptr, builder.get(), name.c_str(), &blob, mode),
                  absl::StrCat("inserting ", full)));
  }

  for (const auto& [name, sub_changes] : nested) {
    const std::string full = Join(dir, name);
    const git_tree_entry* existing = git_treebuilder_get(builder.get(), name.c_str());
    GitPtr<git_tree> sub_base;
    if (existing) {
      git_filemode_t mode = git_tree_entry_filemode(existing);
      if (mode != GIT_FILEMODE_TREE) return Blocked(full, mode, "write below it");
      git_tree* raw_tree = nullptr;
      RETURN_IF_ERROR(GitStatus(git_tree_lookup(&raw_tree, repo, git_tree_entry_id(existing)),
                                absl::StrCat("reading tree ", full)));
      sub_base.reset(raw_tree);
    }
    ASSIGN_OR_RETURN(std::optional<git_oid> sub_tree,
                     EditTree(repo, sub_base.get(), sub_changes, full));
    if (sub_tree.has_value()) {
      RETURN_IF_ERROR(GitStatus(git_treebuilder_insert(nullptr, builder.get(), name.c_str(),
                                                       &*sub_tree, GIT_FILEMODE_TREE),
                                absl::StrCat("inserting tree ", full)));
    } else if (existing) {
      RETURN_IF_ERROR(GitStatus(git_treebuilder_remove(builder.get(), name.c_str()),
                                absl::StrCat("removing empty tree ", full)));
    }
  }

  if (git_treebuilder_entrycount(builder.get()) == 0) return std::nullopt;
  git_oid written;
  RETURN_IF_ERROR(GitStatus(git_treebuilder_write(&written, builder.get()),
                            absl::StrCat("writing tree '", dir, "'")));
  return written;
}

absl::StatusOr<GitPtr<git_signature>> MakeSignature(const Identity& who, absl::string_view role) {
  git_signature* raw = nullptr;
  int rc = git_signature_new(&raw, who.name.c_str(), who.email.c_str(),
                             static_cast<git_time_t>(absl::ToUnixSeconds(who.when)),
                             who.utc_offset_minutes);
  if (rc < 0) {
    absl::Status status = GitStatus(rc, absl::StrCat("invalid ", role, " identity"));
    return absl::InvalidArgumentError(status.message());
  }
  return GitPtr<git_signature>(raw);
}

}  // namespace

absl::StatusOr<git_oid> ApplyChanges(git_repository* repo, const git_tree* base,
                                     const ChangeSet& changes) {
  for (const auto& [path, content] : changes) RETURN_IF_ERROR(ValidateRepoPath(path));
  ASSIGN_OR_RETURN(std::optional<git_oid> tree,
                   EditTree(repo, base, ChangeRange{changes.begin(), changes.end(), 0}, ""));
  if (tree.has_value()) return *tree;
  // Every file is gone: the root is the (valid) empty tree.
  git_treebuilder* raw_builder = nullptr;
  RETURN_IF_ERROR(GitStatus(git_treebuilder_new(&raw_builder, repo, nullptr), "treebuilder"));
  GitPtr<git_treebuilder> builder(raw_builder);
  git_oid empty;
  RETURN_IF_ERROR(GitStatus(git_treebuilder_write(&empty, builder.get()), "writing empty tree"));
  return empty;
}

absl::StatusOr<std::optional<std::string>> CreateCommit(git_repository* repo,
                                                        const std::optional<std::string>& parent,
                                                        const ChangeSet& changes,
                                                        const CommitSpec& spec) {
  GitPtr<git_commit> parent_commit;
  GitPtr<git_tree> base_tree;
  if (parent.has_value()) {
    git_oid parent_id;
    RETURN_IF_ERROR(OidFromHex(*parent, &parent_id));
    git_commit* raw_commit = nullptr;
    RETURN_IF_ERROR(GitStatus(git_commit_lookup(&raw_commit, repo, &parent_id),
                              absl::StrCat("reading parent commit ", *parent)));
    parent_commit.reset(raw_commit);
    git_tree* raw_tree = nullptr;
    RETURN_IF_ERROR(
        GitStatus(git_commit_tree(&raw_tree, parent_commit.get()), "reading parent tree"));
    base_tree.reset(raw_tree);
  }
  ASSIGN_OR_RETURN(git_oid tree_id, ApplyChanges(repo, base_tree.get(), changes));

  GitPtr<git_tree> tree;
  git_tree* raw_tree = nullptr;
  RETURN_IF_ERROR(GitStatus(git_tree_lookup(&raw_tree, repo, &tree_id), "reading new tree"));
  tree.reset(raw_tree);
  // Nothing to commit: the tree did not change (or a first commit would be empty).
  if (base_tree ? git_oid_equal(&tree_id, git_tree_id(base_tree.get()))
                : git_tree_entrycount(tree.get()) == 0) {
    return std::nullopt;
  }

  ASSIGN_OR_RETURN(GitPtr<git_signature> author, MakeSignature(spec.author, "author"));
  ASSIGN_OR_RETURN(GitPtr<git_signature> committer, MakeSignature(spec.committer, "committer"));
  const git_commit* parents[1] = {parent_commit.get()};
  git_oid commit_id;
  if (spec.signer == nullptr) {
    RETURN_IF_ERROR(GitStatus(
        git_commit_create(&commit_id, repo, /*update_ref=*/nullptr, author.get(), committer.get(),
                          /*message_encoding=*/nullptr, spec.message.c_str(), tree.get(),
                          parent_commit ? 1 : 0, parents),
        "creating commit"));
    return OidToHex(commit_id);
  }
  // Signed: the signature covers the commit object as it would be without the gpgsig header,
  // which libgit2 inserts after the committer line, as git does.
  GitBuf content;
  RETURN_IF_ERROR(
      GitStatus(git_commit_create_buffer(content.get(), repo, author.get(), committer.get(),
                                         /*message_encoding=*/nullptr, spec.message.c_str(),
                                         tree.get(), parent_commit ? 1 : 0, parents),
                "building commit"));
  const std::string unsigned_commit = content.str();
  ASSIGN_OR_RETURN(std::string signature, spec.signer->Sign(unsigned_commit));
  RETURN_IF_ERROR(
      GitStatus(git_commit_create_with_signature(&commit_id, repo, unsigned_commit.c_str(),
                                                 signature.c_str(), "gpgsig"),
                "writing signed commit"));
  return OidToHex(commit_id);
}

}  // namespace reverser::git
