// Compare-and-swap pushes under contention and over git's smart protocol (git daemon), judged
// by the real git CLI.

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <iostream>
#include <latch>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "libs/git/test_support.h"
#include "libs/git/repository.h"
#include "tests/fixtures/git_repos.h"
#include "tests/fixtures/process.h"
#include "tests/fixtures/temp_dir.h"

namespace reverser::git {
namespace {

using git::testutil::Trim;

using ::reverser::testing::Git;

CommitSpec Spec(const std::string& who, const std::string& message) {
  return git::testutil::TestCommitSpec(message, who, who + "@example.com");
}

// One branch worker's push cycle: fetch, hard reset to the remote tip, (re)apply the pending
// change, CAS push; on conflict go round again. Returns the outcome of the first attempt.
struct Worker {
  std::unique_ptr<Repository> repo;
  std::string name;

  absl::StatusOr<std::string> Prepare(const ChangeSet& changes, const std::string& message,
                                      std::optional<std::string>* base_out) {
    if (auto s = repo->Fetch(); !s.ok()) return s;
    auto base = repo->ResolveBranchBase("main");
    if (!base.ok()) return base.status();
    if (auto s = repo->ResetBranch("main", base->commit); !s.ok()) return s;
    auto commit = repo->CommitOnBranch("main", changes, Spec(name, message));
    if (!commit.ok()) return commit.status();
    if (!commit->has_value()) return absl::InternalError("unexpected no-op");
    *base_out = base->commit;
    return **commit;
  }
};

enum class RaceRemote { kPath, kFileUrl, kGitDaemon };

class PushRaceTest : public ::testing::TestWithParam<RaceRemote> {
 protected:
  testing::ScopedTempDir dir_{"race"};
  std::optional<testing::ChildProcess> daemon_;
};

// Two pushers start from the same remote tip and push at the same moment, round after round:
// the CAS lets exactly one win; the loser sees a conflict, fetches, resets, replays and wins.
TEST_P(PushRaceTest, ExactlyOneWinnerPerRoundAndTheLoserReplays) {
  auto remote = testing::CreateBareRemote(dir_.path());
  ASSERT_TRUE(remote.ok()) << remote.status();
  std::string url = *remote;
  if (GetParam() == RaceRemote::kFileUrl) url = "file://" + *remote;
  if (GetParam() == RaceRemote::kGitDaemon) {
    auto port = testing::StartGitDaemon(dir_.path(), "remote.git", &daemon_);
    ASSERT_TRUE(port.ok()) << port.status();
    url = absl::StrCat("git://127.0.0.1:", *port, "/remote.git");
  }
  Worker workers[2];
  for (int i = 0; i < 2; ++i) {
    workers[i].name = absl::StrCat("worker", i);
    auto repo = Repository::Open({absl::StrCat(dir_.path(), "/clone", i), url, {}});
    ASSERT_TRUE(repo.ok()) << repo.status();
    workers[i].repo = std::move(*repo);
  }

  constexpr int kRounds = 15;
  int conflicts = 0;
  int ref_level_conflicts = 0;
  for (int round = 0; round < kRounds; ++round) {
    std::optional<std::string> bases[2];
    std::string commits[2];
    ChangeSet changes[2];
    for (int i = 0; i < 2; ++i) {
      changes[i] = {{absl::StrCat(workers[i].name, "/r", round, ".yaml"), "x\n"}};
      auto commit = workers[i].Prepare(changes[i], absl::StrCat("round ", round), &bases[i]);
      ASSERT_TRUE(commit.ok()) << commit.status();
      commits[i] = *commit;
    }
    ASSERT_EQ(bases[0], bases[1]);

    absl::StatusOr<PushResult> results[2];
    std::latch start(2);
    std::thread threads[2];
    for (int i = 0; i < 2; ++i) {
      threads[i] = std::thread([&, i] {
        start.arrive_and_wait();
        results[i] = workers[i].repo->Push("main", commits[i], bases[i]);
      });
    }
    for (auto& t : threads) t.join();

    int winners = 0;
    int loser = -1;
    for (int i = 0; i < 2; ++i) {
      ASSERT_TRUE(results[i].ok()) << results[i].status();
      if (results[i]->outcome == PushOutcome::kPushed) {
        ++winners;
      } else {
        EXPECT_EQ(results[i]->outcome, PushOutcome::kConflict);
        loser = i;
      }
    }
    ASSERT_EQ(winners, 1) << "round " << round;
    ASSERT_NE(loser, -1);
    ++conflicts;
    // Which fence stopped the loser: the advertisement check, or the ref update itself.
    if (results[loser]->detail != "remote received unknown updates") ++ref_level_conflicts;
    EXPECT_EQ(results[loser]->remote_tip.value_or(""), commits[1 - loser]);

    // The loser's replay: fetch, hard reset, rebuild the same change, push again.
    std::optional<std::string> base;
    auto replay = workers[loser].Prepare(changes[loser], absl::StrCat("round ", round), &base);
    ASSERT_TRUE(replay.ok()) << replay.status();
    EXPECT_EQ(base.value_or(""), commits[1 - loser]);
    auto second = workers[loser].repo->Push("main", *replay, base);
    ASSERT_TRUE(second.ok()) << second.status();
    EXPECT_EQ(second->outcome, PushOutcome::kPushed);
  }
  EXPECT_EQ(conflicts, kRounds);
  std::cout << "conflicts: " << conflicts << ", stopped at the ref update: " << ref_level_conflicts
            << "\n";

  // Nothing lost: a linear history with every change, and a clean repository.
  auto count = Git(*remote, {"rev-list", "--count", "main"});
  EXPECT_EQ(Trim(count.value_or("")), absl::StrCat(1 + 2 * kRounds));
  auto merges = Git(*remote, {"rev-list", "--merges", "--count", "main"});
  EXPECT_EQ(Trim(merges.value_or("")), "0");
  auto files = testing::ListFiles(*remote, "main");
  ASSERT_TRUE(files.ok());
  EXPECT_EQ(files->size(), 1u + 2 * kRounds);
  EXPECT_TRUE(Git(*remote, {"fsck", "--strict"}).ok());
}

INSTANTIATE_TEST_SUITE_P(Remotes, PushRaceTest,
                         ::testing::Values(RaceRemote::kPath, RaceRemote::kFileUrl,
                                           RaceRemote::kGitDaemon),
                         [](const auto& info) {
                           switch (info.param) {
                             case RaceRemote::kPath:
                               return "Path";
                             case RaceRemote::kFileUrl:
                               return "FileUrl";
                             default:
                               return "GitDaemon";
                           }
                         });

// git daemon speaks the smart protocol with receive-pack: the path where the remote itself
// checks the old value and reports per-ref verdicts.
class GitDaemonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto remote = testing::CreateBareRemote(dir_.path());
    ASSERT_TRUE(remote.ok()) << remote.status();
    remote_ = *remote;
    auto port = testing::StartGitDaemon(dir_.path(), "remote.git", &daemon_);
    ASSERT_TRUE(port.ok()) << port.status();
    url_ = absl::StrCat("git://127.0.0.1:", *port, "/remote.git");
  }

  void InstallHook(const std::string& script) {
    std::string hook = remote_ + "/hooks/pre-receive";
    ASSERT_TRUE(testing::WriteFile(hook, "#!/bin/sh\n" + script).ok());
    ASSERT_EQ(chmod(hook.c_str(), 0755), 0);
  }

  std::string RemoteTip() { return Trim(Git(remote_, {"rev-parse", "main"}).value_or("")); }

  testing::ScopedTempDir dir_{"daemon"};
  std::string remote_;
  std::string url_;
  std::optional<testing::ChildProcess> daemon_;
};

TEST_F(GitDaemonTest, FetchCommitAndCasPushOverSmartProtocol) {
  Worker worker{nullptr, "smart"};
  auto repo = Repository::Open({dir_.path() + "/clone", url_, {}});
  ASSERT_TRUE(repo.ok()) << repo.status();
  worker.repo = std::move(*repo);
  std::optional<std::string> base;
  auto commit = worker.Prepare({{"a.yaml", "a\n"}}, "a", &base);
  ASSERT_TRUE(commit.ok()) << commit.status();
  auto push = worker.repo->Push("main", *commit, base);
  ASSERT_TRUE(push.ok()) << push.status();
  EXPECT_EQ(push->outcome, PushOutcome::kPushed);
  EXPECT_EQ(RemoteTip(), *commit);
  EXPECT_EQ(testing::ShowFile(remote_, "main", "a.yaml").value_or(""), "a\n");

  auto again = worker.repo->Push("main", *commit, base);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->outcome, PushOutcome::kUpToDate);

  // Stale expectation: decided from the advertised refs, nothing sent.
  auto next = worker.repo->CommitOnBranch("main", {{"b.yaml", "b\n"}}, Spec("smart", "b"));
  ASSERT_TRUE(next.ok() && next->has_value());
  auto stale = worker.repo->Push("main", **next, base);
  ASSERT_TRUE(stale.ok());
  EXPECT_EQ(stale->outcome, PushOutcome::kConflict);
  EXPECT_EQ(RemoteTip(), *commit);
}

// The remote moves between our advertisement check and its ref update (a hook does it, which
// is exactly a concurrent push landing in that window): the server refuses the old value and
// the push reports a conflict with the new remote tip.
TEST_F(GitDaemonTest, ServerSideRejectionWhenTheRemoteMovesMidPush) {
  auto tree = Git(remote_, {"rev-parse", "main^{tree}"});
  ASSERT_TRUE(tree.ok());
  auto intruder = Git(remote_, {"commit-tree", Trim(*tree), "-p", "main", "-m", "intruder"});
  ASSERT_TRUE(intruder.ok()) << intruder.status();
  const std::string intruder_sha = Trim(*intruder);
  // Ref updates are refused inside receive-pack's object quarantine; step out of it, as a
  // concurrent receive-pack would be.
  InstallHook(absl::StrCat("unset GIT_QUARANTINE_PATH\ngit update-ref refs/heads/main ",
                           intruder_sha, " || exit 1\nexit 0\n"));

  Worker worker{nullptr, "smart"};
  auto repo = Repository::Open({dir_.path() + "/clone", url_, {}});
  ASSERT_TRUE(repo.ok());
  worker.repo = std::move(*repo);
  std::optional<std::string> base;
  auto commit = worker.Prepare({{"a.yaml", "a\n"}}, "a", &base);
  ASSERT_TRUE(commit.ok()) << commit.status();
  auto push = worker.repo->Push("main", *commit, base);
  ASSERT_TRUE(push.ok()) << push.status();
  EXPECT_EQ(push->outcome, PushOutcome::kConflict);
  EXPECT_EQ(push->remote_tip.value_or(""), intruder_sha);
  EXPECT_FALSE(push->detail.empty());
  EXPECT_EQ(RemoteTip(), intruder_sha);

  // Replay on top of the intruder succeeds (the hook no longer moves anything new).
  InstallHook("exit 0\n");
  auto replay = worker.Prepare({{"a.yaml", "a\n"}}, "a", &base);
  ASSERT_TRUE(replay.ok());
  EXPECT_EQ(base.value_or(""), intruder_sha);
  auto second = worker.repo->Push("main", *replay, base);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->outcome, PushOutcome::kPushed);
  EXPECT_EQ(RemoteTip(), *replay);
}

// A refusal that leaves the branch where it was (a policy hook) is transient, not a conflict.
TEST_F(GitDaemonTest, HookRefusalWithRemoteUnchangedIsTransient) {
  InstallHook("echo 'protected branch' >&2\nexit 1\n");
  Worker worker{nullptr, "smart"};
  auto repo = Repository::Open({dir_.path() + "/clone", url_, {}});
  ASSERT_TRUE(repo.ok());
  worker.repo = std::move(*repo);
  std::optional<std::string> base;
  auto commit = worker.Prepare({{"a.yaml", "a\n"}}, "a", &base);
  ASSERT_TRUE(commit.ok());
  auto push = worker.repo->Push("main", *commit, base);
  ASSERT_FALSE(push.ok());
  EXPECT_EQ(push.status().code(), absl::StatusCode::kUnavailable) << push.status();
  EXPECT_EQ(RemoteTip(), base.value_or(""));
}

TEST_F(GitDaemonTest, UnreachableRemoteIsUnavailable) {
  auto port = testing::PickFreePort();
  ASSERT_TRUE(port.ok());
  auto repo = Repository::Open(
      {dir_.path() + "/clone", absl::StrCat("git://127.0.0.1:", *port, "/remote.git"), {}});
  ASSERT_TRUE(repo.ok());
  absl::Status fetch = (*repo)->Fetch();
  EXPECT_EQ(fetch.code(), absl::StatusCode::kUnavailable) << fetch;
}

}  // namespace
}  // namespace reverser::git
