#include "libs/git/pack_writer.h"

#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "libs/git/bulk_writer.h"
#include "libs/git/object_copy.h"
#include "libs/git/repository.h"
#include "libs/git/test_support.h"
#include "libs/git/tree_editor.h"
#include "tests/fixtures/git_repos.h"
#include "tests/fixtures/process.h"
#include "tests/fixtures/temp_dir.h"

namespace reverser::git {
namespace {

using git::testutil::Trim;
using ::reverser::testing::Git;

std::vector<std::string> FilesIn(const std::string& dir) {
  std::vector<std::string> names;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      std::string name = e->d_name;
      if (name != "." && name != "..") names.push_back(name);
    }
    closedir(d);
  }
  std::sort(names.begin(), names.end());
  return names;
}

// `git count-objects -v` as key → value.
std::map<std::string, std::string> CountObjects(const std::string& repo) {
  std::map<std::string, std::string> counts;
  auto out = Git(repo, {"count-objects", "-v"});
  if (!out.ok()) return counts;
  for (absl::string_view line : absl::StrSplit(*out, '\n')) {
    std::pair<std::string, std::string> kv = absl::StrSplit(line, absl::MaxSplits(": ", 1));
    if (!kv.first.empty()) counts[kv.first] = kv.second;
  }
  return counts;
}

git_oid Hash(absl::string_view data, git_object_t type) {
  git_oid id;
  git_odb_hash(&id, data.data(), data.size(), type);
  return id;
}

class PackWriterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    EnsureLibgit2Initialized();
    repo_ = dir_.path() + "/repo.git";
    ASSERT_TRUE(testing::RunCommand({"git", "init", "-q", "--bare", repo_}).ok());
    pack_dir_ = repo_ + "/objects/pack";
  }

  testing::ScopedTempDir dir_{"packwriter"};
  std::string repo_;
  std::string pack_dir_;
};

TEST_F(PackWriterTest, WritesAPackAndIndexGitReads) {
  auto writer = PackWriter::Create(pack_dir_);
  ASSERT_TRUE(writer.ok()) << writer.status();
  // Enough data that part of the pack is flushed to disk before Finish, objects of every size
  // class (empty, small, a multi-byte size header) and a tree and commit tying them together.
  std::vector<std::pair<std::string, git_oid>> blobs;
  for (int i = 0; i < 300; ++i) {
    std::string content = i == 0 ? "" : absl::StrCat("value-", i, "\n", std::string(i * 37, 'x'));
    git_oid id = Hash(content, GIT_OBJECT_BLOB);
    ASSERT_TRUE((*writer)->Add(id, GIT_OBJECT_BLOB, content).ok());
    blobs.emplace_back(content, id);
  }
  std::string big(3 << 20, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>((i * 7919) % 251);
  git_oid big_id = Hash(big, GIT_OBJECT_BLOB);
  ASSERT_TRUE((*writer)->Add(big_id, GIT_OBJECT_BLOB, big).ok());
  // A second write of the same id is ignored.
  ASSERT_TRUE((*writer)->Add(blobs[1].second, GIT_OBJECT_BLOB, blobs[1].first).ok());
  EXPECT_EQ((*writer)->object_count(), 301u);

  // Objects read back before the pack is finished (from disk and from the buffer).
  git_object_t type;
  auto first = (*writer)->Read(blobs[5].second, &type);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(*first, blobs[5].first);
  EXPECT_EQ(type, GIT_OBJECT_BLOB);
  auto last = (*writer)->Read(big_id, &type);
  ASSERT_TRUE(last.ok());
  EXPECT_EQ(*last, big);
  auto empty = (*writer)->Read(blobs[0].second, &type);
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(*empty, "");
  EXPECT_EQ((*writer)->Header(blobs[7].second)->second, blobs[7].first.size());
  EXPECT_EQ((*writer)->Read(Hash("absent", GIT_OBJECT_BLOB), &type).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ((*writer)->Add(blobs[2].second, GIT_OBJECT_OFS_DELTA, "x").code(),
            absl::StatusCode::kInvalidArgument);

  std::string tree;
  absl::StrAppend(&tree, "100644 a.yaml", std::string(1, '\0'));
  tree.append(reinterpret_cast<const char*>(blobs[1].second.id), GIT_OID_RAWSZ);
  absl::StrAppend(&tree, "100644 big.bin", std::string(1, '\0'));
  tree.append(reinterpret_cast<const char*>(big_id.id), GIT_OID_RAWSZ);
  git_oid tree_id = Hash(tree, GIT_OBJECT_TREE);
  ASSERT_TRUE((*writer)->Add(tree_id, GIT_OBJECT_TREE, tree).ok());
  std::string commit = absl::StrCat("tree ", OidToHex(tree_id),
                                    "\nauthor A <a@b> 1700000000 +0000\n"
                                    "committer A <a@b> 1700000000 +0000\n\nbulk\n");
  git_oid commit_id = Hash(commit, GIT_OBJECT_COMMIT);
  ASSERT_TRUE((*writer)->Add(commit_id, GIT_OBJECT_COMMIT, commit).ok());

  auto checksum = (*writer)->Finish();
  ASSERT_TRUE(checksum.ok()) << checksum.status();
  ASSERT_TRUE(checksum->has_value());
  EXPECT_EQ(FilesIn(pack_dir_),
            (std::vector<std::string>{absl::StrCat("pack-", **checksum, ".idx"),
                                      absl::StrCat("pack-", **checksum, ".pack")}));

  // The git CLI is the judge: the pack verifies, every object reads, fsck is clean.
  auto verify = Git(repo_, {"verify-pack", absl::StrCat(pack_dir_, "/pack-", **checksum, ".idx")});
  EXPECT_TRUE(verify.ok()) << verify.status();
  EXPECT_EQ(Trim(Git(repo_, {"cat-file", "-p", OidToHex(blobs[42].second)}).value_or("")),
            Trim(blobs[42].first));
  EXPECT_EQ(Trim(Git(repo_, {"cat-file", "-s", OidToHex(big_id)}).value_or("")),
            std::to_string(big.size()));
  ASSERT_TRUE(Git(repo_, {"update-ref", "refs/heads/main", OidToHex(commit_id)}).ok());
  EXPECT_EQ(Trim(Git(repo_, {"show", "main:a.yaml"}).value_or("")), Trim(blobs[1].first));
  auto fsck = Git(repo_, {"fsck", "--strict", "--no-dangling"});
  EXPECT_TRUE(fsck.ok()) << fsck.status();
  EXPECT_EQ(CountObjects(repo_)["in-pack"], "303");
  EXPECT_EQ(CountObjects(repo_)["count"], "0");  // nothing loose
}

TEST_F(PackWriterTest, EmptyOrAbandonedPacksLeaveNothingBehind) {
  {
    auto writer = PackWriter::Create(pack_dir_);
    ASSERT_TRUE(writer.ok());
    auto checksum = (*writer)->Finish();
    ASSERT_TRUE(checksum.ok());
    EXPECT_FALSE(checksum->has_value());
  }
  {
    auto writer = PackWriter::Create(pack_dir_);
    ASSERT_TRUE(writer.ok());
    ASSERT_TRUE((*writer)->Add(Hash("x", GIT_OBJECT_BLOB), GIT_OBJECT_BLOB, "x").ok());
    EXPECT_EQ(FilesIn(pack_dir_).size(), 1u);  // the temporary file
  }
  EXPECT_TRUE(FilesIn(pack_dir_).empty());
  EXPECT_EQ(PackWriter::Create(dir_.path() + "/missing").status().code(),
            absl::StatusCode::kUnavailable);
}

class BulkWriterTest : public PackWriterTest {
 protected:
  // Opens repo_ with libgit2.
  GitPtr<git_repository> Open() {
    git_repository* raw = nullptr;
    EXPECT_EQ(git_repository_open_bare(&raw, repo_.c_str()), 0);
    return GitPtr<git_repository>(raw);
  }

  static ChangeSet Files(int from, int to) {
    ChangeSet changes;
    for (int i = from; i < to; ++i) {
      changes[absl::StrCat("ns", i % 7, "/configmaps/cm", i, ".yaml")] =
          absl::StrCat("data:\n  key: value-", i, "\n");
    }
    return changes;
  }
};

TEST_F(BulkWriterTest, CommitsThroughOnePackThatTheRepositoryThenReads) {
  GitPtr<git_repository> repo = Open();
  auto bulk = BulkWriter::Begin(repo.get());
  ASSERT_TRUE(bulk.ok()) << bulk.status();
  auto commit =
      CreateCommit((*bulk)->repo(), std::nullopt, Files(0, 500), testutil::TestCommitSpec("bulk"));
  ASSERT_TRUE(commit.ok()) << commit.status();
  ASSERT_TRUE(commit->has_value());
  // 500 blobs, 7 namespace trees, 7 configmaps trees, the root tree, the commit.
  EXPECT_EQ((*bulk)->object_count(), 500u + 7 + 7 + 1 + 1);
  auto pack = (*bulk)->Commit(repo.get());
  ASSERT_TRUE(pack.ok()) << pack.status();
  ASSERT_TRUE(pack->has_value());

  // The main handle reads the commit at once; the git CLI agrees; nothing is loose.
  git_oid id;
  ASSERT_TRUE(OidFromHex(**commit, &id).ok());
  git_commit* raw = nullptr;
  ASSERT_EQ(git_commit_lookup(&raw, repo.get(), &id), 0);
  git_commit_free(raw);
  ASSERT_TRUE(Git(repo_, {"update-ref", "refs/heads/main", **commit}).ok());
  EXPECT_EQ(Git(repo_, {"show", "main:ns3/configmaps/cm10.yaml"}).value_or(""),
            "data:\n  key: value-10\n");
  auto fsck = Git(repo_, {"fsck", "--strict", "--no-dangling"});
  EXPECT_TRUE(fsck.ok()) << fsck.status();
  EXPECT_EQ(CountObjects(repo_)["count"], "0");
  EXPECT_EQ(CountObjects(repo_)["in-pack"], "516");
}

TEST_F(BulkWriterTest, ObjectsThatAlreadyExistAreNotWrittenAgain) {
  GitPtr<git_repository> repo = Open();
  auto first = BulkWriter::Begin(repo.get());
  ASSERT_TRUE(first.ok());
  auto commit =
      CreateCommit((*first)->repo(), std::nullopt, Files(0, 300), testutil::TestCommitSpec("bulk"));
  ASSERT_TRUE(commit.ok() && commit->has_value());
  ASSERT_TRUE((*first)->Commit(repo.get()).ok());

  // The same commit again: every object exists, no pack is written.
  auto again = BulkWriter::Begin(repo.get());
  ASSERT_TRUE(again.ok());
  auto same =
      CreateCommit((*again)->repo(), std::nullopt, Files(0, 300), testutil::TestCommitSpec("bulk"));
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(*same, *commit);
  EXPECT_EQ((*again)->object_count(), 0u);
  auto none = (*again)->Commit(repo.get());
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  EXPECT_EQ(FilesIn(pack_dir_).size(), 2u);

  // On top of it, 10 new files: only their blobs, the trees that changed and the commit.
  auto more = BulkWriter::Begin(repo.get());
  ASSERT_TRUE(more.ok());
  auto next =
      CreateCommit((*more)->repo(), *commit, Files(300, 310), testutil::TestCommitSpec("more"));
  ASSERT_TRUE(next.ok() && next->has_value());
  EXPECT_EQ((*more)->object_count(), 10u + 7 + 7 + 1 + 1);
  ASSERT_TRUE((*more)->Commit(repo.get()).ok());
  ASSERT_TRUE(Git(repo_, {"update-ref", "refs/heads/main", **next}).ok());
  EXPECT_EQ(testing::ListFiles(repo_, "main")->size(), 310u);
  EXPECT_TRUE(Git(repo_, {"fsck", "--strict", "--no-dangling"}).ok());
}

TEST_F(BulkWriterTest, DroppedScopeDiscardsItsObjects) {
  GitPtr<git_repository> repo = Open();
  std::string sha;
  {
    auto bulk = BulkWriter::Begin(repo.get());
    ASSERT_TRUE(bulk.ok());
    auto commit = CreateCommit((*bulk)->repo(), std::nullopt, Files(0, 20),
                               testutil::TestCommitSpec("dropped"));
    ASSERT_TRUE(commit.ok() && commit->has_value());
    sha = **commit;
  }
  EXPECT_TRUE(FilesIn(pack_dir_).empty());
  EXPECT_FALSE(Git(repo_, {"cat-file", "-e", sha}).ok());
}

TEST_F(BulkWriterTest, LargeCommitsArePackedAndPushed) {
  auto remote = testing::CreateBareRemote(dir_.path());
  ASSERT_TRUE(remote.ok());
  RepositoryOptions options{dir_.path() + "/clone", *remote, {}};
  options.pack_threshold = 100;
  auto repo = Repository::Open(options);
  ASSERT_TRUE(repo.ok());
  ASSERT_TRUE((*repo)->Fetch().ok());
  auto base = (*repo)->ResolveBranchBase("main");
  ASSERT_TRUE((*repo)->ResetBranch("main", base->commit).ok());

  // Below the threshold: loose objects. At or above it: one pack (the fetch made one already).
  const std::string clone_git = (*repo)->path();
  const std::string fetched_packs = CountObjects(clone_git)["packs"];
  const int loose = std::stoi(CountObjects(clone_git)["count"]);
  auto small = (*repo)->CommitOnBranch("main", Files(0, 10), testutil::TestCommitSpec("small"));
  ASSERT_TRUE(small.ok() && small->has_value());
  EXPECT_EQ(CountObjects(clone_git)["packs"], fetched_packs);
  EXPECT_EQ(std::stoi(CountObjects(clone_git)["count"]), loose + 10 + 7 + 7 + 1 + 1);
  auto large = (*repo)->CommitOnBranch("main", Files(10, 400), testutil::TestCommitSpec("large"));
  ASSERT_TRUE(large.ok() && large->has_value()) << large.status();
  EXPECT_EQ(std::stoi(CountObjects(clone_git)["packs"]), std::stoi(fetched_packs) + 1);
  EXPECT_TRUE(Git(clone_git, {"fsck", "--strict", "--no-dangling"}).ok());

  auto push = (*repo)->Push("main", **large, base->commit);
  ASSERT_TRUE(push.ok()) << push.status();
  EXPECT_EQ(push->outcome, PushOutcome::kPushed);
  EXPECT_EQ(Trim(Git(*remote, {"rev-parse", "main"}).value_or("")), **large);
  EXPECT_EQ(testing::ShowFile(*remote, "main", "ns5/configmaps/cm390.yaml").value_or(""),
            "data:\n  key: value-390\n");
  EXPECT_EQ(testing::ListFiles(*remote, "main")->size(), 401u);  // + README.md
  // The clone's pack was linked into the remote, not copied object by object.
  const std::string pack_dir = clone_git + "/objects/pack";
  int shared = 0;
  for (const std::string& name : FilesIn(pack_dir)) {
    struct stat info;
    if (absl::EndsWith(name, ".pack") && stat((pack_dir + "/" + name).c_str(), &info) == 0 &&
        info.st_nlink == 2) {
      ++shared;
    }
  }
  EXPECT_EQ(shared, 1);
  auto fsck = Git(*remote, {"fsck", "--strict", "--no-dangling"});
  EXPECT_TRUE(fsck.ok()) << fsck.status();
}

TEST_F(BulkWriterTest, CopyMissingObjectsSendsOnlyWhatTheReceiverLacks) {
  GitPtr<git_repository> repo = Open();
  const std::string receiver_path = dir_.path() + "/receiver.git";
  ASSERT_TRUE(testing::RunCommand({"git", "init", "-q", "--bare", receiver_path}).ok());
  git_repository* raw = nullptr;
  ASSERT_EQ(git_repository_open_bare(&raw, receiver_path.c_str()), 0);
  GitPtr<git_repository> receiver(raw);

  // Two commits in the sender: one packed, one loose on top.
  auto bulk = BulkWriter::Begin(repo.get());
  ASSERT_TRUE(bulk.ok());
  auto first =
      CreateCommit((*bulk)->repo(), std::nullopt, Files(0, 300), testutil::TestCommitSpec("first"));
  ASSERT_TRUE(first.ok() && first->has_value());
  ASSERT_TRUE((*bulk)->Commit(repo.get()).ok());
  auto second = CreateCommit(repo.get(), *first, Files(300, 301), testutil::TestCommitSpec("2nd"));
  ASSERT_TRUE(second.ok() && second->has_value());
  git_oid first_id, second_id;
  ASSERT_TRUE(OidFromHex(**first, &first_id).ok());
  ASSERT_TRUE(OidFromHex(**second, &second_id).ok());

  auto copied = CopyMissingObjects(repo.get(), receiver.get(), first_id);
  ASSERT_TRUE(copied.ok()) << copied.status();
  EXPECT_EQ(*copied, 300u + 7 + 7 + 1 + 1);
  // The receiver's handle reads the commit at once.
  git_commit* commit = nullptr;
  ASSERT_EQ(git_commit_lookup(&commit, receiver.get(), &first_id), 0);
  git_commit_free(commit);

  // Only the new blob, the three trees on its path and the commit follow.
  auto more = CopyMissingObjects(repo.get(), receiver.get(), second_id);
  ASSERT_TRUE(more.ok()) << more.status();
  EXPECT_EQ(*more, 1u + 3 + 1);
  auto none = CopyMissingObjects(repo.get(), receiver.get(), second_id);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(*none, 0u);
  EXPECT_EQ(CountObjects(receiver_path)["packs"], "2");

  ASSERT_TRUE(Git(receiver_path, {"update-ref", "refs/heads/main", **second}).ok());
  EXPECT_EQ(testing::ListFiles(receiver_path, "main")->size(), 301u);
  auto fsck = Git(receiver_path, {"fsck", "--strict", "--no-dangling"});
  EXPECT_TRUE(fsck.ok()) << fsck.status();
}

}  // namespace
}  // namespace reverser::git
