#include "libs/git/repository.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "libs/git/test_support.h"
#include "tests/fixtures/git_repos.h"
#include "tests/fixtures/process.h"
#include "tests/fixtures/temp_dir.h"

namespace reverser::git {
namespace {

using git::testutil::Trim;

using ::reverser::testing::Git;

CommitSpec Spec(const std::string& message) { return git::testutil::TestCommitSpec(message); }

class RepositoryTest : public ::testing::Test {
 protected:
  std::unique_ptr<Repository> OpenClone(const std::string& remote, const std::string& name) {
    auto repo = Repository::Open({absl::StrCat(dir_.path(), "/", name), remote, {}});
    EXPECT_TRUE(repo.ok()) << repo.status();
    return repo.ok() ? std::move(*repo) : nullptr;
  }
  std::string RemoteTip(const std::string& remote, const std::string& branch) {
    auto out = Git(remote, {"rev-parse", "--verify", "-q", "refs/heads/" + branch});
    return out.ok() ? Trim(*out) : "";
  }

  testing::ScopedTempDir dir_{"gitrepo"};
};

TEST_F(RepositoryTest, CloneFetchAndReadSeededRemote) {
  auto remote = testing::CreateBareRemote(dir_.path());
  ASSERT_TRUE(remote.ok()) << remote.status();
  auto repo = OpenClone(*remote, "clone");
  ASSERT_TRUE(repo->Fetch().ok());
  auto tip = repo->FetchedTip("main");
  ASSERT_TRUE(tip.ok());
  ASSERT_TRUE(tip->has_value());
  EXPECT_EQ(**tip, RemoteTip(*remote, "main"));
  auto default_branch = repo->FetchedDefaultBranch();
  ASSERT_TRUE(default_branch.ok());
  EXPECT_EQ(default_branch->value_or(""), "main");
  auto readme = repo->ReadFile(**tip, "README.md");
  ASSERT_TRUE(readme.ok());
  EXPECT_EQ(readme->value_or(""), "# test remote\n");
  auto missing = repo->ReadFile(**tip, "nope.yaml");
  ASSERT_TRUE(missing.ok());
  EXPECT_FALSE(missing->has_value());

  // Reopening the same clone works and keeps the fetched refs.
  repo.reset();
  auto again = OpenClone(*remote, "clone");
  auto tip_again = again->FetchedTip("main");
  ASSERT_TRUE(tip_again.ok());
  EXPECT_EQ(*tip_again, *tip);
}

// A process SIGKILLed while it updated a ref leaves `<ref>.lock` behind; libgit2 then refuses
// that ref's every update. Open removes lock files older than the cutoff (the time the caller
// took the clone over) and keeps newer ones, which a live update may hold.
TEST_F(RepositoryTest, LockFilesAKilledProcessLeftAreRemovedAtOpenAndNewerOnesKept) {
  auto remote = testing::CreateBareRemote(dir_.path());
  ASSERT_TRUE(remote.ok()) << remote.status();
  {
    auto repo = OpenClone(*remote, "clone");
    ASSERT_TRUE(repo->Fetch().ok());
  }
  const std::string clone = absl::StrCat(dir_.path(), "/clone");
  const std::string stale = clone + "/refs/remotes/origin/main.lock";
  { std::ofstream(stale) << ""; }
  const absl::Time killed_at = absl::Now() - absl::Hours(1);
  struct timespec times[2] = {absl::ToTimespec(killed_at), absl::ToTimespec(killed_at)};
  ASSERT_EQ(utimensat(AT_FDCWD, stale.c_str(), times, 0), 0);
  auto work = testing::CloneRepo(*remote, dir_.path(), "work");
  ASSERT_TRUE(work.ok()) << work.status();
  { std::ofstream(*work + "/a.yaml") << "a: 1\n"; }
  ASSERT_TRUE(testing::CommitAndPush(*work, "moved on").ok());

  {
    auto blocked = OpenClone(*remote, "clone");
    EXPECT_EQ(blocked->stale_locks_removed(), 0u);
    EXPECT_FALSE(blocked->Fetch().ok()) << "the stale lock blocks the remote-tracking ref";
  }
  RepositoryOptions options{clone, *remote, {}};
  options.stale_lock_cutoff = absl::Now() - absl::Minutes(1);
  auto reopened = Repository::Open(options);
  ASSERT_TRUE(reopened.ok()) << reopened.status();
  EXPECT_EQ((*reopened)->stale_locks_removed(), 1u);
  ASSERT_TRUE((*reopened)->Fetch().ok());
  auto tip = (*reopened)->FetchedTip("main");
  ASSERT_TRUE(tip.ok() && tip->has_value());
  EXPECT_EQ(**tip, RemoteTip(*remote, "main"));

  // A lock newer than the cutoff may be a live update's: kept.
  const std::string live = clone + "/refs/remotes/origin/other.lock";
  { std::ofstream(live) << ""; }
  reopened->reset();
  auto again = Repository::Open(options);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)->stale_locks_removed(), 0u);
  EXPECT_EQ(access(live.c_str(), F_OK), 0);
}

// A clone made beside another clone of the same remote starts from it: the sibling's tracking
// refs and objects, so its first fetch receives nothing the sibling had. Without the option, or
// beside a clone of another remote, a new clone receives everything.
TEST_F(RepositoryTest, ANewCloneIsSeededFromASiblingCloneOfTheSameRemote) {
  auto remote = testing::CreateBareRemote(dir_.path() + "/remote");
  ASSERT_TRUE(remote.ok()) << remote.status();
  ASSERT_TRUE(Git(*remote, {"branch", "other", "main"}).ok());
  auto first = Repository::Open({dir_.path() + "/repos/a", *remote});
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ((*first)->seeded_refs(), 0u);  // nothing beside it yet
  ASSERT_TRUE((*first)->Fetch().ok());
  EXPECT_GT((*first)->last_fetch_received_objects(), 0u);

  RepositoryOptions options{dir_.path() + "/repos/b", *remote};
  options.seed_from_siblings = true;
  auto seeded = Repository::Open(options);
  ASSERT_TRUE(seeded.ok()) << seeded.status();
  EXPECT_EQ((*seeded)->seeded_refs(), 2u);  // main and other
  ASSERT_TRUE((*seeded)->Fetch().ok());
  EXPECT_EQ((*seeded)->last_fetch_received_objects(), 0u);
  EXPECT_EQ((*seeded)->FetchedTip("other").value_or(std::nullopt).value_or(""),
            RemoteTip(*remote, "other"));
  // The seeded clone reads and writes as any other.
  auto base = (*seeded)->ResolveBranchBase("other");
  ASSERT_TRUE(base.ok()) << base.status();
  ASSERT_TRUE((*seeded)->ResetBranch("other", base->commit).ok());
  ASSERT_TRUE((*seeded)->CommitOnBranch("other", {{"x.yaml", "x\n"}}, Spec("seeded")).ok());

  RepositoryOptions unseeded{dir_.path() + "/repos/c", *remote};
  auto plain = Repository::Open(unseeded);
  ASSERT_TRUE(plain.ok());
  ASSERT_TRUE((*plain)->Fetch().ok());
  EXPECT_GT((*plain)->last_fetch_received_objects(), 0u);

  auto elsewhere = testing::CreateBareRemote(dir_.path() + "/elsewhere");
  ASSERT_TRUE(elsewhere.ok());
  RepositoryOptions stranger{dir_.path() + "/repos/d", *elsewhere};
  stranger.seed_from_siblings = true;
  auto other_remote = Repository::Open(stranger);
  ASSERT_TRUE(other_remote.ok());
  EXPECT_EQ((*other_remote)->seeded_refs(), 0u);
}

// A local remote is read directly: a fetch of one branch copies that branch and the default
// branch only, a fetch of all copies the rest, and a branch deleted on the remote is pruned.
TEST_F(RepositoryTest, ALocalFetchOfOneBranchCopiesItAndTheDefaultBranch) {
  auto remote = testing::CreateBareRemote(dir_.path() + "/remote");
  ASSERT_TRUE(remote.ok()) << remote.status();
  for (const std::string branch : {"mine", "theirs"}) {
    auto commit = Git(*remote, {"commit-tree", "-p", "main", "-m", branch, "main^{tree}"});
    ASSERT_TRUE(commit.ok()) << commit.status();
    ASSERT_TRUE(Git(*remote, {"update-ref", "refs/heads/" + branch, Trim(*commit)}).ok());
  }
  auto clone = Repository::Open({dir_.path() + "/clone", "file://" + *remote});
  ASSERT_TRUE(clone.ok()) << clone.status();
  Repository& repo = **clone;
  ASSERT_TRUE(repo.Fetch("mine").ok());
  EXPECT_GT(repo.last_fetch_received_objects(), 0u);
  EXPECT_EQ(repo.FetchedTip("mine").value_or(std::nullopt).value_or(""),
            RemoteTip(*remote, "mine"));
  EXPECT_EQ(repo.FetchedTip("main").value_or(std::nullopt).value_or(""),
            RemoteTip(*remote, "main"));
  EXPECT_EQ(repo.FetchedDefaultBranch().value_or(std::nullopt).value_or(""), "main");
  EXPECT_FALSE(repo.FetchedTip("theirs").value_or(std::nullopt).has_value());
  ASSERT_TRUE(repo.Fetch("mine").ok());
  EXPECT_EQ(repo.last_fetch_received_objects(), 0u);  // nothing new

  ASSERT_TRUE(repo.Fetch().ok());
  EXPECT_EQ(repo.last_fetch_received_objects(), 1u);  // the commit of "theirs" (same tree)
  EXPECT_EQ(repo.FetchedTip("theirs").value_or(std::nullopt).value_or(""),
            RemoteTip(*remote, "theirs"));
  auto files = repo.ListFiles(RemoteTip(*remote, "theirs"));
  ASSERT_TRUE(files.ok()) << files.status();

  ASSERT_TRUE(Git(*remote, {"branch", "-D", "theirs"}).ok());
  ASSERT_TRUE(repo.Fetch("mine").ok());
  EXPECT_FALSE(repo.FetchedTip("theirs").value_or(std::nullopt).has_value());
}

TEST_F(RepositoryTest, FileUrlWorksAndMissingRemoteIsAnError) {
  auto remote = testing::CreateBareRemote(dir_.path());
  ASSERT_TRUE(remote.ok());
  auto repo = OpenClone("file://" + *remote, "clone");
  ASSERT_TRUE(repo->Fetch().ok());
  auto refs = repo->ListRemote();
  ASSERT_TRUE(refs.ok());
  EXPECT_EQ(refs->Tip("main").value_or(""), RemoteTip(*remote, "main"));

  auto nowhere = OpenClone(dir_.path() + "/does-not-exist.git", "clone2");
  absl::Status fetch = nowhere->Fetch();
  EXPECT_FALSE(fetch.ok());
  EXPECT_FALSE(fetch.message().empty());
}

TEST_F(RepositoryTest, CommitWritesFilesWithExplicitIdentities) {
  auto remote = testing::CreateBareRemote(dir_.path());
  ASSERT_TRUE(remote.ok());
  auto repo = OpenClone(*remote, "clone");
  ASSERT_TRUE(repo->Fetch().ok());
  auto base = repo->ResolveBranchBase("main");
  ASSERT_TRUE(base.ok());
  ASSERT_TRUE(repo->ResetBranch("main", base->commit).ok());

  ChangeSet changes = {{"apps/ns1/configmaps/a.yaml", "a: 1\n"},
                       {"apps/ns1/configmaps/b.yaml", "b: 2\n"},
                       {"README.md", std::nullopt}};
  auto commit = repo->CommitOnBranch("main", changes, Spec("[CREATE] v1/configmaps/a"));
  ASSERT_TRUE(commit.ok()) << commit.status();
  ASSERT_TRUE(commit->has_value());
  auto push = repo->Push("main", **commit, base->commit);
  ASSERT_TRUE(push.ok()) << push.status();
  EXPECT_EQ(push->outcome, PushOutcome::kPushed);

  // The real git CLI is the judge.
  EXPECT_EQ(RemoteTip(*remote, "main"), **commit);
  auto files = testing::ListFiles(*remote, "main");
  ASSERT_TRUE(files.ok());
  EXPECT_EQ(*files,
            (std::vector<std::string>{"apps/ns1/configmaps/a.yaml", "apps/ns1/configmaps/b.yaml"}));
  EXPECT_EQ(testing::ShowFile(*remote, "main", "apps/ns1/configmaps/b.yaml").value_or(""),
            "b: 2\n");
  auto log = Git(*remote, {"log", "-1", "--format=%an|%ae|%at|%ai|%cn|%ce|%ct|%P|%s", "main"});
  ASSERT_TRUE(log.ok());
  EXPECT_EQ(Trim(*log), absl::StrCat("Jane Doe|jane@example.com|1700000000|",
                                     "2023-11-14 23:13:20 +0100|GitOps Reverser|",
                                     "noreply@configbutler.ai|1700000100|", *base->commit,
                                     "|[CREATE] v1/configmaps/a"));
  EXPECT_TRUE(Git(*remote, {"fsck", "--strict"}).ok());

  auto listed = repo->ListFiles(**commit, "apps/ns1");
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ(*listed,
            (std::vector<std::string>{"apps/ns1/configmaps/a.yaml", "apps/ns1/configmaps/b.yaml"}));
}

// Sizes come from object headers (loose, packed and delta-packed alike) and ids match what the
// git CLI says, so a caller can skip a huge file without ever loading it.
TEST_F(RepositoryTest, FileEntriesBlobSizesAndIdsWithoutReadingContent) {
  auto remote = testing::CreateBareRemote(dir_.path());
  ASSERT_TRUE(remote.ok());
  auto human = testing::CloneRepo(*remote, dir_.path(), "human");
  ASSERT_TRUE(human.ok()) << human.status();
  std::string big;
  for (int i = 0; big.size() < (3u << 20); ++i) big += absl::StrCat("line ", i, "\n");
  ASSERT_TRUE(testing::WriteFile(*human + "/t/big.yaml", big).ok());
  ASSERT_TRUE(testing::WriteFile(*human + "/t/small.yaml", "a: 1\n").ok());
  ASSERT_TRUE(testing::CommitAndPush(*human, "big").ok());
  const std::string bigger = big + "one more line\n";
  ASSERT_TRUE(testing::WriteFile(*human + "/t/big.yaml", bigger).ok());
  ASSERT_TRUE(testing::CommitAndPush(*human, "bigger").ok());
  // Packed with deltas on the remote, so the fetch brings a delta-compressed pack.
  ASSERT_TRUE(Git(*remote, {"gc", "--aggressive", "-q"}).ok());

  auto repo = OpenClone(*remote, "clone");
  ASSERT_TRUE(repo->Fetch().ok());
  auto tip = repo->FetchedTip("main");
  ASSERT_TRUE(tip.ok() && tip->has_value());
  auto entries = repo->ListFileEntries(**tip, "t");
  ASSERT_TRUE(entries.ok()) << entries.status();
  ASSERT_EQ(entries->size(), 2u);
  EXPECT_EQ((*entries)[0].path, "t/big.yaml");
  EXPECT_EQ((*entries)[1].path, "t/small.yaml");
  for (const FileEntry& entry : *entries) {
    auto id = Git(*remote, {"rev-parse", "main:" + entry.path});
    ASSERT_TRUE(id.ok());
    EXPECT_EQ(entry.blob_id, Trim(*id));
    EXPECT_EQ(repo->FileBlobId(**tip, entry.path).value_or(std::nullopt), entry.blob_id);
  }
  EXPECT_EQ(repo->BlobSize((*entries)[0].blob_id).value_or(0), bigger.size());
  EXPECT_EQ(repo->BlobSize((*entries)[1].blob_id).value_or(0), 5u);
  EXPECT_EQ(repo->ReadBlob((*entries)[1].blob_id).value_or(""), "a: 1\n");
  // The first version is stored as a delta of the second (or the other way round).
  auto first = Git(*remote, {"rev-parse", "main~1:t/big.yaml"});
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(repo->BlobSize(Trim(*first)).value_or(0), big.size());

  EXPECT_EQ(BlobIdOf("a: 1\n"), (*entries)[1].blob_id);
  EXPECT_EQ(BlobIdOf(bigger), (*entries)[0].blob_id);
  EXPECT_FALSE(repo->FileBlobId(**tip, "t/none.yaml").value_or("x").has_value());
  EXPECT_EQ(repo->FileBlobId(**tip, "t").status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_FALSE(repo->BlobSize(**tip).ok());  // a commit, not a blob
  EXPECT_FALSE(repo->BlobSize("not-hex").ok());
}

TEST_F(RepositoryTest, NoOpChangeSetCreatesNoCommit) {
  auto remote = testing::CreateBareRemote(dir_.path());
  ASSERT_TRUE(remote.ok());
  auto repo = OpenClone(*remote, "clone");
  ASSERT_TRUE(repo->Fetch().ok());
  auto base = repo->ResolveBranchBase("main");
  ASSERT_TRUE(repo->ResetBranch("main", base->commit).ok());

  // Same content as the tip, plus a delete of a file that does not exist.
  ChangeSet same = {{"README.md", "# test remote\n"}, {"gone/x.yaml", std::nullopt}};
  auto commit = repo->CommitOnBranch("main", same, Spec("nothing"));
  ASSERT_TRUE(commit.ok()) << commit.status();
  EXPECT_FALSE(commit->has_value());
  EXPECT_EQ(repo->LocalTip("main").value(), base->commit);

  auto empty = repo->CommitOnBranch("main", {}, Spec("nothing"));
  ASSERT_TRUE(empty.ok());
  EXPECT_FALSE(empty->has_value());

  // A real change, then the same change again: the second is a no-op.
  auto first = repo->CommitOnBranch("main", {{"x.yaml", "x\n"}}, Spec("x"));
  ASSERT_TRUE(first.ok() && first->has_value());
  auto second = repo->CommitOnBranch("main", {{"x.yaml", "x\n"}}, Spec("x"));
  ASSERT_TRUE(second.ok());
  EXPECT_FALSE(second->has_value());
}

TEST_F(RepositoryTest, SymlinksInTheTreeAreNeverFollowed) {
  auto remote = testing::CreateBareRemote(dir_.path());
  ASSERT_TRUE(remote.ok());
  // A user commits a directory symlink and a file symlink with the git CLI.
  auto work = testing::CloneRepo(*remote, dir_.path(), "work");
  ASSERT_TRUE(work.ok());
  ASSERT_TRUE(testing::RunCommand({"mkdir", "-p", *work + "/real"}).ok());
  ASSERT_TRUE(testing::WriteFile(*work + "/real/keep.yaml", "k\n").ok());
  ASSERT_TRUE(testing::RunCommand({"ln", "-s", "real", *work + "/linkdir"}).ok());
  ASSERT_TRUE(testing::RunCommand({"ln", "-s", "/etc/passwd", *work + "/linkfile.yaml"}).ok());
  ASSERT_TRUE(testing::CommitAndPush(*work, "add symlinks").ok());

  auto repo = OpenClone(*remote, "clone");
  ASSERT_TRUE(repo->Fetch().ok());
  auto base = repo->ResolveBranchBase("main");
  ASSERT_TRUE(repo->ResetBranch("main", base->commit).ok());

  auto under_link = repo->CommitOnBranch("main", {{"linkdir/evil.yaml", "x"}}, Spec("evil"));
  EXPECT_EQ(under_link.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(under_link.status().message().find("symlink"), absl::string_view::npos)
      << under_link.status();
  auto deep = repo->CommitOnBranch("main", {{"linkdir/a/b.yaml", "x"}}, Spec("evil"));
  EXPECT_EQ(deep.status().code(), absl::StatusCode::kFailedPrecondition);
  auto onto_link = repo->CommitOnBranch("main", {{"linkfile.yaml", "x"}}, Spec("evil"));
  EXPECT_EQ(onto_link.status().code(), absl::StatusCode::kFailedPrecondition);
  auto delete_under =
      repo->CommitOnBranch("main", {{"linkdir/keep.yaml", std::nullopt}}, Spec("evil"));
  EXPECT_EQ(delete_under.status().code(), absl::StatusCode::kFailedPrecondition);
  // Nothing was committed by the refusals.
  EXPECT_EQ(repo->LocalTip("main").value(), base->commit);

  // Removing the symlink entry itself follows nothing and is allowed.
  auto unlink = repo->CommitOnBranch("main", {{"linkfile.yaml", std::nullopt}}, Spec("rm link"));
  ASSERT_TRUE(unlink.ok()) << unlink.status();
  ASSERT_TRUE(unlink->has_value());
}

TEST_F(RepositoryTest, InvalidPathsAndConflictingChangesAreRefused) {
  auto remote = testing::CreateBareRemote(dir_.path());
  ASSERT_TRUE(remote.ok());
  auto repo = OpenClone(*remote, "clone");
  ASSERT_TRUE(repo->Fetch().ok());
  ASSERT_TRUE(repo->ResetBranch("main", repo->ResolveBranchBase("main")->commit).ok());
  for (const char* bad : {"../x.yaml", "/abs.yaml", ".git/config", "a/./b", "a/.git/x"}) {
    auto commit = repo->CommitOnBranch("main", {{bad, "x"}}, Spec("bad"));
    EXPECT_EQ(commit.status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  auto both = repo->CommitOnBranch("main", {{"a", "file"}, {"a/b", "dir"}}, Spec("both"));
  EXPECT_EQ(both.status().code(), absl::StatusCode::kInvalidArgument);
  auto onto_file = repo->CommitOnBranch("main", {{"README.md/x", "x"}}, Spec("x"));
  EXPECT_EQ(onto_file.status().code(), absl::StatusCode::kFailedPrecondition);
  // Replacing a file by a directory in one change set is fine.
  auto replace = repo->CommitOnBranch("main", {{"README.md", std::nullopt}, {"README.md/x", "x"}},
                                      Spec("replace"));
  ASSERT_TRUE(replace.ok()) << replace.status();
  auto bad_identity = Spec("x");
  bad_identity.author.email = "evil>@example.com";
  auto commit = repo->CommitOnBranch("main", {{"y", "y"}}, bad_identity);
  EXPECT_EQ(commit.status().code(), absl::StatusCode::kInvalidArgument) << commit.status();
}

TEST_F(RepositoryTest, MissingBranchStartsFromTheDefaultBranch) {
  auto remote = testing::CreateBareRemote(dir_.path());
  ASSERT_TRUE(remote.ok());
  auto repo = OpenClone(*remote, "clone");
  ASSERT_TRUE(repo->Fetch().ok());
  auto base = repo->ResolveBranchBase("feature/x");
  ASSERT_TRUE(base.ok()) << base.status();
  EXPECT_TRUE(base->from_default_branch);
  EXPECT_EQ(base->from_branch, "main");
  EXPECT_EQ(base->commit.value_or(""), RemoteTip(*remote, "main"));

  ASSERT_TRUE(repo->ResetBranch("feature/x", base->commit).ok());
  auto commit = repo->CommitOnBranch("feature/x", {{"f.yaml", "f\n"}}, Spec("on feature"));
  ASSERT_TRUE(commit.ok() && commit->has_value());
  // The branch is absent on the remote: expected_old is "absent".
  auto push = repo->Push("feature/x", **commit, std::nullopt);
  ASSERT_TRUE(push.ok()) << push.status();
  EXPECT_EQ(push->outcome, PushOutcome::kPushed);
  EXPECT_EQ(RemoteTip(*remote, "feature/x"), **commit);
  auto parent = Git(*remote, {"rev-parse", "feature/x^"});
  EXPECT_EQ(Trim(parent.value_or("")), RemoteTip(*remote, "main"));
  EXPECT_EQ(repo->FetchedTip("feature/x").value(), *commit);
}

TEST_F(RepositoryTest, EmptyRemoteGetsAFirstCommitWithoutParent) {
  auto remote = testing::CreateBareRemote(dir_.path(), "empty.git", "main", /*seed=*/false);
  ASSERT_TRUE(remote.ok());
  auto repo = OpenClone(*remote, "clone");
  ASSERT_TRUE(repo->Fetch().ok());
  auto base = repo->ResolveBranchBase("main");
  ASSERT_TRUE(base.ok()) << base.status();
  EXPECT_FALSE(base->commit.has_value());
  EXPECT_FALSE(base->from_default_branch);
  ASSERT_TRUE(repo->ResetBranch("main", std::nullopt).ok());

  auto nothing = repo->CommitOnBranch("main", {{"a.yaml", std::nullopt}}, Spec("nothing"));
  ASSERT_TRUE(nothing.ok());
  EXPECT_FALSE(nothing->has_value());

  auto commit = repo->CommitOnBranch("main", {{"a.yaml", "a\n"}}, Spec("first"));
  ASSERT_TRUE(commit.ok() && commit->has_value()) << commit.status();
  auto push = repo->Push("main", **commit, std::nullopt);
  ASSERT_TRUE(push.ok()) << push.status();
  EXPECT_EQ(push->outcome, PushOutcome::kPushed);
  auto parents = Git(*remote, {"log", "--format=%P", "main"});
  ASSERT_TRUE(parents.ok());
  EXPECT_EQ(Trim(*parents), "");  // a root commit
  auto count = Git(*remote, {"rev-list", "--count", "main"});
  EXPECT_EQ(Trim(count.value_or("")), "1");
  // A fresh clone by the git CLI sees it as the default branch.
  auto cli = testing::CloneRepo(*remote, dir_.path(), "cli");
  ASSERT_TRUE(cli.ok()) << cli.status();
  EXPECT_EQ(testing::ReadFile(*cli + "/a.yaml").value_or(""), "a\n");
}

TEST_F(RepositoryTest, PushOutcomesFromTheAdvertisement) {
  auto remote = testing::CreateBareRemote(dir_.path());
  ASSERT_TRUE(remote.ok());
  auto repo = OpenClone(*remote, "clone");
  ASSERT_TRUE(repo->Fetch().ok());
  std::string root = *repo->ResolveBranchBase("main")->commit;
  ASSERT_TRUE(repo->ResetBranch("main", root).ok());
  auto mine = repo->CommitOnBranch("main", {{"mine.yaml", "m\n"}}, Spec("mine"));
  ASSERT_TRUE(mine.ok() && mine->has_value());

  // Someone else pushes with the git CLI: the remote received unknown updates.
  auto other = testing::CloneRepo(*remote, dir_.path(), "other");
  ASSERT_TRUE(other.ok());
  ASSERT_TRUE(testing::WriteFile(*other + "/theirs.yaml", "t\n").ok());
  ASSERT_TRUE(testing::CommitAndPush(*other, "theirs").ok());
  const std::string theirs = RemoteTip(*remote, "main");

  auto conflict = repo->Push("main", **mine, root);
  ASSERT_TRUE(conflict.ok()) << conflict.status();
  EXPECT_EQ(conflict->outcome, PushOutcome::kConflict);
  EXPECT_EQ(conflict->remote_tip.value_or(""), theirs);
  EXPECT_EQ(RemoteTip(*remote, "main"), theirs);  // nothing overwritten

  // Expected absent but the branch exists: conflict too.
  auto appeared = repo->Push("main", **mine, std::nullopt);
  ASSERT_TRUE(appeared.ok());
  EXPECT_EQ(appeared->outcome, PushOutcome::kConflict);

  // Fetch, hard reset, replay: now it goes through.
  ASSERT_TRUE(repo->Fetch().ok());
  auto base = repo->ResolveBranchBase("main");
  ASSERT_EQ(base->commit.value_or(""), theirs);
  ASSERT_TRUE(repo->ResetBranch("main", base->commit).ok());
  auto replayed = repo->CommitOnBranch("main", {{"mine.yaml", "m\n"}}, Spec("mine"));
  ASSERT_TRUE(replayed.ok() && replayed->has_value());
  auto pushed = repo->Push("main", **replayed, theirs);
  ASSERT_TRUE(pushed.ok());
  EXPECT_EQ(pushed->outcome, PushOutcome::kPushed);
  EXPECT_EQ(RemoteTip(*remote, "main"), **replayed);

  // Pushing the same commit again: up to date.
  auto again = repo->Push("main", **replayed, theirs);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->outcome, PushOutcome::kUpToDate);

  // The branch is deleted on the remote: remote missing.
  ASSERT_TRUE(Git(*remote, {"update-ref", "-d", "refs/heads/main"}).ok());
  auto next = repo->CommitOnBranch("main", {{"n.yaml", "n\n"}}, Spec("next"));
  ASSERT_TRUE(next.ok() && next->has_value());
  auto missing = repo->Push("main", **next, **replayed);
  ASSERT_TRUE(missing.ok());
  EXPECT_EQ(missing->outcome, PushOutcome::kRemoteMissing);

  // Input errors are refused before any network access.
  EXPECT_EQ(repo->Push("bad..name", **next, std::nullopt).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(repo->Push("main", "not-a-sha", std::nullopt).status().code(),
            absl::StatusCode::kInvalidArgument);
  // A commit that does not descend from expected_old is not pushed.
  EXPECT_EQ(repo->Push("main", root, **next).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

// Staged commits (one per change) live in one open pack and an in-memory ref until the push:
// the clone on disk never names them before their objects are in place, reads see them at once,
// and what is pushed is exactly the chain of commits, which git's fsck accepts on both sides.
TEST_F(RepositoryTest, StagedCommitsReachTheDiskOnlyWithTheirPushAndStayReadable) {
  auto remote = testing::CreateBareRemote(dir_.path());
  ASSERT_TRUE(remote.ok());
  RepositoryOptions options{absl::StrCat(dir_.path(), "/clone"), *remote, {}};
  options.stage_small_commits = true;
  auto opened = Repository::Open(options);
  ASSERT_TRUE(opened.ok()) << opened.status();
  auto& repo = *opened;
  ASSERT_TRUE(repo->Fetch().ok());
  const std::string root = *repo->ResolveBranchBase("main")->commit;
  ASSERT_TRUE(repo->ResetBranch("main", root).ok());

  std::vector<std::string> commits;
  for (int i = 0; i < 5; ++i) {
    auto commit = repo->CommitOnBranch(
        "main", {{absl::StrCat("ns/cm-", i, ".yaml"), absl::StrCat("v: ", i, "\n")}},
        Spec(absl::StrCat("change ", i)));
    ASSERT_TRUE(commit.ok() && commit->has_value()) << commit.status();
    commits.push_back(**commit);
  }
  // In memory: the local tip and the files of every staged commit.
  EXPECT_EQ(repo->LocalTip("main")->value_or(""), commits.back());
  EXPECT_EQ(repo->ReadFile(commits[1], "ns/cm-1.yaml")->value_or(""), "v: 1\n");
  EXPECT_EQ(repo->ListFiles(commits.back(), "ns")->size(), 5u);
  EXPECT_TRUE(*repo->IsAncestor(commits[0], commits.back()));
  // On disk: the branch has not moved, and none of their objects is there yet.
  const std::string clone = options.local_path;
  EXPECT_EQ(Trim(*Git(clone, {"rev-parse", "refs/heads/main"})), root);
  EXPECT_FALSE(Git(clone, {"cat-file", "-e", commits.back()}).ok());
  EXPECT_TRUE(Git(clone, {"fsck", "--strict"}).ok());

  auto push = repo->Push("main", commits.back(), root);
  ASSERT_TRUE(push.ok()) << push.status();
  EXPECT_EQ(push->outcome, PushOutcome::kPushed);
  EXPECT_EQ(Trim(*Git(clone, {"rev-parse", "refs/heads/main"})), commits.back());
  EXPECT_EQ(RemoteTip(*remote, "main"), commits.back());
  auto log = Git(*remote, {"log", "--format=%s", absl::StrCat(root, "..main")});
  ASSERT_TRUE(log.ok());
  EXPECT_EQ(Trim(*log), "change 4\nchange 3\nchange 2\nchange 1\nchange 0");
  EXPECT_TRUE(Git(clone, {"fsck", "--strict"}).ok());
  EXPECT_TRUE(Git(*remote, {"fsck", "--strict"}).ok());
}

// Every push of staged commits leaves a pack; past the limit they are merged (geometrically), so
// the clone holds few packs however many pushes it made, and every object stays readable.
TEST_F(RepositoryTest, StagedPacksAreMergedPastTheLimit) {
  auto remote = testing::CreateBareRemote(dir_.path());
  ASSERT_TRUE(remote.ok());
  RepositoryOptions options{absl::StrCat(dir_.path(), "/clone"), *remote, {}};
  options.stage_small_commits = true;
  options.staged_pack_limit = 4;
  auto opened = Repository::Open(options);
  ASSERT_TRUE(opened.ok()) << opened.status();
  auto& repo = *opened;
  ASSERT_TRUE(repo->Fetch().ok());
  std::optional<std::string> pushed = *repo->ResolveBranchBase("main")->commit;
  ASSERT_TRUE(repo->ResetBranch("main", pushed).ok());
  std::vector<std::string> commits;
  size_t most_packs = 0;
  for (int i = 0; i < 40; ++i) {
    auto commit = repo->CommitOnBranch(
        "main", {{absl::StrCat("ns/cm-", i % 7, ".yaml"), absl::StrCat("v: ", i, "\n")}},
        Spec(absl::StrCat("change ", i)));
    ASSERT_TRUE(commit.ok() && commit->has_value()) << commit.status();
    commits.push_back(**commit);
    auto push = repo->Push("main", **commit, pushed);
    ASSERT_TRUE(push.ok() && push->outcome == PushOutcome::kPushed) << push.status();
    pushed = **commit;
    most_packs = std::max(most_packs, repo->staged_pack_count());
  }
  EXPECT_LE(most_packs, 4u);
  size_t packs_on_disk = 0;
  for (const auto& entry :
       std::filesystem::directory_iterator(options.local_path + "/objects/pack")) {
    if (entry.path().extension() == ".pack") ++packs_on_disk;
  }
  EXPECT_LE(packs_on_disk, 4u);
  // Every commit and file is still there, through this handle and for git.
  for (int i = 0; i < 40; ++i) {
    EXPECT_EQ(repo->ReadFile(commits[i], absl::StrCat("ns/cm-", i % 7, ".yaml"))->value_or(""),
              absl::StrCat("v: ", i, "\n"));
  }
  EXPECT_TRUE(Git(options.local_path, {"fsck", "--strict"}).ok());
  EXPECT_TRUE(Git(*remote, {"fsck", "--strict"}).ok());
  EXPECT_EQ(RemoteTip(*remote, "main"), commits.back());
}

// Staged commits whose pack cannot be put in place are lost, and the clone says so on every call
// that would build on them, instead of pushing the old tip as if it held them.
TEST_F(RepositoryTest, StagedCommitsThatCannotBeWrittenAreReportedLost) {
  auto remote = testing::CreateBareRemote(dir_.path());
  ASSERT_TRUE(remote.ok());
  RepositoryOptions options{absl::StrCat(dir_.path(), "/clone"), *remote, {}};
  options.stage_small_commits = true;
  auto opened = Repository::Open(options);
  ASSERT_TRUE(opened.ok()) << opened.status();
  auto& repo = *opened;
  ASSERT_TRUE(repo->Fetch().ok());
  const std::string root = *repo->ResolveBranchBase("main")->commit;
  ASSERT_TRUE(repo->ResetBranch("main", root).ok());
  auto commit = repo->CommitOnBranch("main", {{"a.yaml", "a\n"}}, Spec("a"));
  ASSERT_TRUE(commit.ok() && commit->has_value());
  // The open pack's temporary file vanishes (a disk error would do the same to its rename).
  for (const auto& entry :
       std::filesystem::directory_iterator(options.local_path + "/objects/pack")) {
    if (entry.path().filename().string().rfind("tmp_pack_", 0) == 0) {
      std::filesystem::remove(entry.path());
    }
  }
  auto push = repo->Push("main", **commit, root);
  EXPECT_FALSE(push.ok());
  EXPECT_TRUE(repo->staging_lost());
  EXPECT_FALSE(repo->LocalTip("main").ok());
  EXPECT_FALSE(repo->CommitOnBranch("main", {{"b.yaml", "b\n"}}, Spec("b")).ok());
  EXPECT_EQ(RemoteTip(*remote, "main"), root);
  EXPECT_EQ(Trim(*Git(options.local_path, {"rev-parse", "refs/heads/main"})), root);
}

TEST_F(RepositoryTest, RefusesToTurnAWorkingTreeIntoABareClone) {
  auto remote = testing::CreateBareRemote(dir_.path());
  ASSERT_TRUE(remote.ok());
  auto work = testing::CloneRepo(*remote, dir_.path(), "work");
  ASSERT_TRUE(work.ok());
  auto repo = Repository::Open({*work, *remote, {}});
  EXPECT_EQ(repo.status().code(), absl::StatusCode::kFailedPrecondition) << repo.status();
  EXPECT_EQ(Repository::Open({"", *remote, {}}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(LocalClonePathTest, IsADigestUnderTheRootWhateverTheNames) {
  std::string path = LocalClonePath("/var/lib/reverser/gitworker", "team-a", "github", "main",
                                    "git@github.com:o/r.git");
  EXPECT_EQ(path.rfind("/var/lib/reverser/gitworker/repos/", 0), 0u) << path;
  std::string digest = path.substr(path.rfind('/') + 1);
  EXPECT_EQ(digest.size(), 32u);
  EXPECT_EQ(digest.find_first_not_of("0123456789abcdef"), std::string::npos);
  // Each part counts, and parts cannot be shifted into one another.
  EXPECT_NE(LocalClonePath("/r", "n", "p", "b", "https://x/y.git"),
            LocalClonePath("/r", "n", "p", "b", "https://x/z.git"));
  EXPECT_NE(LocalClonePath("/r", "n", "p", "b", "u"), LocalClonePath("/r", "n", "p", "c", "u"));
  EXPECT_NE(LocalClonePath("/r", "ab", "c", "b", "u"), LocalClonePath("/r", "a", "bc", "b", "u"));
  // Hostile names stay one segment below the root.
  for (const char* hostile : {"../../etc", "/etc/passwd", "a/../../b", "..", "x\n/../y"}) {
    std::string p = LocalClonePath("/r", hostile, hostile, hostile, hostile);
    EXPECT_EQ(p.rfind("/r/repos/", 0), 0u) << p;
    EXPECT_EQ(p.find('/', 9), std::string::npos) << p;
  }
}

}  // namespace
}  // namespace reverser::git
