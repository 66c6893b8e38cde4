// Measurement, not a gate (tagged manual). The first-mirror bench is
// //bench/gitworker:first_mirror_bench.

#include <gtest/gtest.h>

#include <iostream>

#include "absl/strings/str_cat.h"
#include "services/gitworker/branch_worker.h"
#include "services/gitworker/test_support.h"
#include "tests/fixtures/git_repos.h"
#include "tests/fixtures/process.h"
#include "tests/fixtures/temp_dir.h"

namespace reverser::gitworker {
namespace {

using namespace ::reverser::gitworker::testsupport;  // NOLINT

// Single-object commits per second: window 0, cooldown 0 (commit + push per event) through the
// branch worker, against a loop of `git commit` + `git push` with the git CLI.
TEST(CommitRateBench, BranchWorkerAgainstGitCli) {
  const char* env = std::getenv("COMMIT_ROUNDS");
  const int n = env ? std::atoi(env) : 200;
  testing::ScopedTempDir dir("rate");
  auto remote = testing::CreateBareRemote(dir.path());
  ASSERT_TRUE(remote.ok());
  auto config = Config(*remote, 0);
  runtime::MetricsRegistry metrics;
  BranchWorkerOptions options;
  options.key = {"team", "repo", "main"};
  options.remote_url = *remote;
  options.work_dir = dir.path() + "/work";
  options.push_cooldown = absl::ZeroDuration();
  options.metrics = &metrics;
  BranchWorker worker(options);
  auto sink = std::make_shared<RecordingSink>();
  auto settings = *SettingsFromConfig(config);
  const absl::Time start = absl::Now();
  for (int i = 0; i < n; ++i) {
    WorkItem item;
    item.settings = settings;
    item.event = Event(config, ConfigMaps(), reverser::v1::OPERATION_UPDATE, "default", "cm",
                       absl::StrCat("v", i), 10 + i);
    item.covers.push_back(CoverageOf(item, sink));
    worker.Add(std::move(item));
    worker.PushIfDue();
  }
  const absl::Duration ours = absl::Now() - start;
  ASSERT_EQ(sink->AckedRv(ConfigMaps()), 10u + n - 1);

  auto cli_remote = testing::CreateBareRemote(dir.path(), "cli.git");
  ASSERT_TRUE(cli_remote.ok());
  auto clone = testing::CloneRepo(*cli_remote, dir.path(), "cli");
  ASSERT_TRUE(clone.ok());
  const absl::Time cli_start = absl::Now();
  for (int i = 0; i < n; ++i) {
    ASSERT_TRUE(testing::WriteFile(*clone + "/cm.yaml", absl::StrCat("v", i, "\n")).ok());
    ASSERT_TRUE(testing::CommitAndPush(*clone, absl::StrCat("c", i)).ok());
  }
  const absl::Duration theirs = absl::Now() - cli_start;
  const double our_rate = n / absl::ToDoubleSeconds(ours);
  const double their_rate = n / absl::ToDoubleSeconds(theirs);
  std::cout << n << " single-object commits+pushes: gitworker " << our_rate << "/s, git CLI "
            << their_rate << "/s, ratio " << our_rate / their_rate << "\n";
}

// The commit path alone: the same single-object commits with pushes held back (a long cooldown),
// then one push of them all, timed separately, so the per-commit cost and the push cost show
// apart.
TEST(CommitRateBench, CommitsThenOnePush) {
  const char* env = std::getenv("COMMIT_ROUNDS");
  const int n = env ? std::atoi(env) : 200;
  testing::ScopedTempDir dir("rate");
  auto remote = testing::CreateBareRemote(dir.path());
  ASSERT_TRUE(remote.ok());
  auto config = Config(*remote, 0);
  runtime::MetricsRegistry metrics;
  BranchWorkerOptions options;
  options.key = {"team", "repo", "main"};
  options.remote_url = *remote;
  options.work_dir = dir.path() + "/work";
  options.push_cooldown = absl::Hours(1);
  options.metrics = &metrics;
  BranchWorker worker(options);
  auto sink = std::make_shared<RecordingSink>();
  auto settings = *SettingsFromConfig(config);
  // The clone is made (and the first push done) before the clock starts.
  {
    WorkItem item;
    item.settings = settings;
    item.event =
        Event(config, ConfigMaps(), reverser::v1::OPERATION_UPDATE, "default", "cm", "v-first", 9);
    item.covers.push_back(CoverageOf(item, sink));
    worker.Add(std::move(item));
    worker.PushIfDue(/*force=*/true);
  }
  const absl::Time start = absl::Now();
  for (int i = 0; i < n; ++i) {
    WorkItem item;
    item.settings = settings;
    item.event = Event(config, ConfigMaps(), reverser::v1::OPERATION_UPDATE, "default", "cm",
                       absl::StrCat("v", i), 10 + i);
    item.covers.push_back(CoverageOf(item, sink));
    worker.Add(std::move(item));
  }
  const absl::Duration commits = absl::Now() - start;
  const absl::Time push_start = absl::Now();
  worker.PushIfDue(/*force=*/true);
  const absl::Duration push = absl::Now() - push_start;
  ASSERT_EQ(sink->AckedRv(ConfigMaps()), 10u + n - 1);
  std::cout << n << " single-object commits: " << n / absl::ToDoubleSeconds(commits) << "/s ("
            << absl::ToDoubleMilliseconds(commits) / n << " ms each); one push of them "
            << absl::ToDoubleMilliseconds(push) << " ms\n";
}

}  // namespace
}  // namespace reverser::gitworker
