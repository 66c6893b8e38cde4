// Measurement, not a gate (tagged manual): first mirror of N objects (env MIRROR_OBJECTS,
// default 20000) into an empty repository through the branch worker, against `git fast-import`
// writing the same tree. Prints both times and the ratio.

#include <gtest/gtest.h>
#include <sys/resource.h>

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

TEST(FirstMirrorBench, BranchWorkerAgainstFastImport) {
  const char* env = std::getenv("MIRROR_OBJECTS");
  const int n = env ? std::atoi(env) : 20000;
  testing::ScopedTempDir dir("bench");
  auto remote = testing::CreateBareRemote(dir.path(), "remote.git", "main", /*seed=*/false);
  ASSERT_TRUE(remote.ok());
  auto config = Config(*remote, 0);
  std::vector<reverser::v1::ObjectBody> objects;
  for (int i = 0; i < n; ++i) {
    objects.push_back(Object(ConfigMaps(), absl::StrCat("ns", i % 50), absl::StrCat("cm", i),
                             absl::StrCat("value-", i)));
  }
  runtime::MetricsRegistry metrics;
  BranchWorkerOptions options;
  options.key = {"team", "repo", "main"};
  options.remote_url = *remote;
  options.work_dir = dir.path() + "/work";
  options.push_cooldown = absl::ZeroDuration();
  options.metrics = &metrics;
  BranchWorker worker(options);
  auto sink = std::make_shared<RecordingSink>();
  WorkItem item;
  item.kind = WorkItem::Kind::kResync;
  item.settings = *SettingsFromConfig(config);
  item.resync = Snapshot(config, ConfigMaps(), objects, 1);
  item.covers.push_back(CoverageOf(item, sink));

  const absl::Time prepare_start = absl::Now();
  PreparedResync prepared = PrepareResync(*item.settings, item.resync);
  const absl::Duration prepare_time = absl::Now() - prepare_start;
  ASSERT_EQ(prepared.upserts.size(), static_cast<size_t>(n));
  const absl::Time start = absl::Now();
  worker.Add(std::move(item));
  const absl::Duration commit_time = absl::Now() - start;
  worker.PushIfDue();
  const absl::Duration ours = absl::Now() - start;
  ASSERT_EQ(sink->AckedRv(ConfigMaps()), 1u);
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);

  // The same files through git fast-import into a fresh repository.
  auto files = testing::ListFiles(*remote, "main");
  ASSERT_TRUE(files.ok());
  ASSERT_EQ(files->size(), static_cast<size_t>(n) + 2);
  std::string stream = "commit refs/heads/main\ncommitter A <a@b> 1700000000 +0000\ndata 2\nm\n";
  std::string request;
  for (const auto& path : *files) absl::StrAppend(&request, "main:", path, "\n");
  auto batch = testing::RunCommand({"git", "-C", *remote, "cat-file", "--batch"}, request);
  ASSERT_TRUE(batch.ok() && batch->exit_code == 0);
  size_t at = 0;
  for (const auto& path : *files) {
    // "<sha> blob <size>\n<content>\n"
    size_t header_end = batch->out.find('\n', at);
    ASSERT_NE(header_end, std::string::npos);
    size_t size = std::stoul(batch->out.substr(batch->out.rfind(' ', header_end) + 1));
    std::string content = batch->out.substr(header_end + 1, size);
    at = header_end + 1 + size + 1;
    absl::StrAppend(&stream, "M 100644 inline ", path, "\ndata ", content.size(), "\n", content,
                    "\n");
  }
  auto target = testing::CreateBareRemote(dir.path(), "import.git", "main", false);
  ASSERT_TRUE(target.ok());
  const absl::Time import_start = absl::Now();
  auto imported = testing::RunCommand({"git", "-C", *target, "fast-import", "--quiet"}, stream);
  const absl::Duration theirs = absl::Now() - import_start;
  ASSERT_TRUE(imported.ok());
  ASSERT_EQ(imported->exit_code, 0) << imported->err;
  auto ours_tree = testing::Git(*remote, {"rev-parse", "main^{tree}"});
  auto their_tree = testing::Git(*target, {"rev-parse", "main^{tree}"});
  ASSERT_TRUE(ours_tree.ok() && their_tree.ok());
  EXPECT_EQ(*ours_tree, *their_tree);
  std::cout << "first mirror of " << n << " objects: gitworker " << absl::FormatDuration(ours)
            << " (render+commit " << absl::FormatDuration(commit_time) << ", of which render "
            << absl::FormatDuration(prepare_time) << ")"
            << " (peak RSS " << usage.ru_maxrss / 1024 << " MiB), git fast-import "
            << absl::FormatDuration(theirs) << ", ratio " << absl::FDivDuration(ours, theirs)
            << "\n";
}

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

}  // namespace
}  // namespace reverser::gitworker
