// The branch worker against a real bare remote, judged with the git CLI.

#include "services/gitworker/branch_worker.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "libs/manifest/yaml_reader.h"
#include "libs/sops/age.h"
#include "libs/sops/sops.h"
#include "services/gitworker/test_support.h"
#include "tests/fixtures/git_repos.h"
#include "tests/fixtures/temp_dir.h"

namespace reverser::gitworker {
namespace {

using ::reverser::testing::Git;
using namespace ::reverser::gitworker::testsupport;  // NOLINT
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

// A fixed age identity for tests.
sops::age::X25519Identity Identity() {
  return *sops::age::X25519Identity::FromSecretKey(std::string(32, 7));
}

std::vector<std::string> Lines(const std::string& text) {
  return absl::StrSplit(text, '\n', absl::SkipEmpty());
}

class BranchWorkerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto remote = testing::CreateBareRemote(dir_.path());
    ASSERT_TRUE(remote.ok()) << remote.status();
    remote_ = *remote;
  }

  std::unique_ptr<BranchWorker> MakeWorker(absl::Duration cooldown = absl::ZeroDuration(),
                                           size_t pack_threshold = git::kDefaultPackThreshold) {
    BranchWorkerOptions options;
    options.pack_threshold = pack_threshold;
    options.key = {"team", "repo", "main"};
    options.remote_url = remote_;
    options.work_dir = dir_.path() + "/work";
    options.push_cooldown = cooldown;
    options.clock = &clock_;
    options.metrics = &metrics_;
    return std::make_unique<BranchWorker>(options);
  }

  std::shared_ptr<const TargetSettings> Settings(const reverser::v1::GitTargetConfig& config) {
    auto settings = SettingsFromConfig(config);
    EXPECT_TRUE(settings.ok()) << settings.status();
    return *settings;
  }

  WorkItem EventItem(const reverser::v1::GitTargetConfig& config, reverser::v1::LiveEvent event) {
    WorkItem item;
    item.kind = WorkItem::Kind::kEvent;
    item.settings = Settings(config);
    item.event = std::move(event);
    item.covers.push_back(CoverageOf(item, sink_));
    return item;
  }

  WorkItem ResyncItem(const reverser::v1::GitTargetConfig& config,
                      reverser::v1::ClusterSnapshot snapshot) {
    WorkItem item;
    item.kind = WorkItem::Kind::kResync;
    item.settings = Settings(config);
    item.resync = std::move(snapshot);
    item.covers.push_back(CoverageOf(item, sink_));
    return item;
  }

  std::vector<std::string> Subjects() {
    auto log = Git(remote_, {"log", "--format=%s", "main"});
    EXPECT_TRUE(log.ok()) << log.status();
    return Lines(log.value_or(""));
  }
  std::vector<std::string> Files() {
    auto files = testing::ListFiles(remote_, "main");
    EXPECT_TRUE(files.ok()) << files.status();
    return files.value_or(std::vector<std::string>{});
  }
  // Sends `worker` one CREATE of ConfigMap default/a under clusters/a and pushes: the gate must
  // hold it (not written, not acked) and report the path. The last refusal reported.
  reverser::v1::PathRefusal CreateHeldByTheGate(BranchWorker& worker) {
    auto config = Config(remote_, 0);
    worker.Add(EventItem(config, Event(config, ConfigMaps(), reverser::v1::OPERATION_CREATE,
                                       "default", "a", "1", 10)));
    worker.PushIfDue();
    EXPECT_THAT(Files(), Not(Contains("clusters/a/default/configmaps/a.yaml")));
    EXPECT_EQ(sink_->AckedRv(ConfigMaps()), 0u);
    EXPECT_FALSE(sink_->path_refusals().empty());
    return sink_->path_refusals().empty() ? reverser::v1::PathRefusal()
                                          : sink_->path_refusals().back();
  }
  void ExpectFsckClean() {
    auto fsck = Git(remote_, {"fsck", "--strict"});
    EXPECT_TRUE(fsck.ok()) << fsck.status();
  }

  testing::ScopedTempDir dir_{"branch"};
  std::string remote_;
  core::FakeClock clock_;
  runtime::MetricsRegistry metrics_;
  std::shared_ptr<RecordingSink> sink_ = std::make_shared<RecordingSink>();
};

TEST_F(BranchWorkerTest, ResyncWritesCanonicalPathsWithBootstrapAndReconcileMessage) {
  auto worker = MakeWorker();
  auto config = Config(remote_, 0);
  worker->Add(ResyncItem(config, Snapshot(config, ConfigMaps(),
                                          {Object(ConfigMaps(), "default", "a", "1"),
                                           Object(ConfigMaps(), "kube-system", "b", "2")},
                                          120)));
  worker->PushIfDue();
  auto files = Files();
  EXPECT_THAT(files, Contains("clusters/a/default/configmaps/a.yaml"));
  EXPECT_THAT(files, Contains("clusters/a/kube-system/configmaps/b.yaml"));
  EXPECT_THAT(files, Contains("clusters/a/README.md"));
  EXPECT_THAT(files, Contains("clusters/a/.gittargetignore"));
  EXPECT_THAT(files, Contains("README.md"));  // the seed commit is kept
  EXPECT_EQ(Subjects().front(), "reconciled 2 configmaps (last resourceVersion: 120)");
  auto yaml = testing::ShowFile(remote_, "main", "clusters/a/default/configmaps/a.yaml");
  ASSERT_TRUE(yaml.ok());
  EXPECT_EQ(*yaml,
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  namespace: default\n"
            "data:\n  key: \"1\"\n");
  auto author = Git(remote_, {"log", "-1", "--format=%an <%ae>|%cn <%ce>", "main"});
  ASSERT_TRUE(author.ok());
  EXPECT_EQ(
      *author,
      "GitOps Reverser <noreply@configbutler.ai>|GitOps Reverser <noreply@configbutler.ai>\n");
  EXPECT_EQ(sink_->AckedRv(ConfigMaps()), 120u);

  // The same resync again is a no-op: no commit, but still acked.
  const size_t commits = Subjects().size();
  worker->Add(ResyncItem(config, Snapshot(config, ConfigMaps(),
                                          {Object(ConfigMaps(), "default", "a", "1"),
                                           Object(ConfigMaps(), "kube-system", "b", "2")},
                                          130)));
  worker->PushIfDue();
  EXPECT_EQ(Subjects().size(), commits);
  EXPECT_EQ(sink_->AckedRv(ConfigMaps()), 130u);
  ExpectFsckClean();
}

TEST_F(BranchWorkerTest, ReconcileSubjectCountsTheDocumentsTheResyncChanged) {
  auto worker = MakeWorker();
  auto config = Config(remote_, 0);
  auto resync = [&](std::vector<reverser::v1::ObjectBody> desired, uint64_t rv) {
    worker->Add(ResyncItem(config, Snapshot(config, ConfigMaps(), std::move(desired), rv)));
    worker->PushIfDue();
  };
  resync({Object(ConfigMaps(), "default", "a", "1"), Object(ConfigMaps(), "default", "b", "2"),
          Object(ConfigMaps(), "default", "c", "3")},
         100);
  EXPECT_EQ(Subjects().front(), "reconciled 3 configmaps (last resourceVersion: 100)");
  // Three desired, one of them changed: one document written, the other two are not counted.
  resync(
      {Object(ConfigMaps(), "default", "a", "1"), Object(ConfigMaps(), "default", "b", "changed"),
       Object(ConfigMaps(), "default", "c", "3")},
      110);
  EXPECT_EQ(Subjects().front(), "reconciled 1 configmaps (last resourceVersion: 110)");
  auto diff = Git(remote_, {"show", "--name-status", "--format=", "main"});
  ASSERT_TRUE(diff.ok());
  EXPECT_THAT(Lines(*diff), ElementsAre("M\tclusters/a/default/configmaps/b.yaml"));
  // One new, one swept, one unchanged: two.
  resync(
      {Object(ConfigMaps(), "default", "a", "1"), Object(ConfigMaps(), "default", "b", "changed"),
       Object(ConfigMaps(), "default", "d", "4")},
      120);
  EXPECT_EQ(Subjects().front(), "reconciled 2 configmaps (last resourceVersion: 120)");
  // Nothing changed: no commit at all.
  const size_t commits = Subjects().size();
  resync(
      {Object(ConfigMaps(), "default", "a", "1"), Object(ConfigMaps(), "default", "b", "changed"),
       Object(ConfigMaps(), "default", "d", "4")},
      130);
  EXPECT_EQ(Subjects().size(), commits);
  EXPECT_EQ(sink_->AckedRv(ConfigMaps()), 130u);
  ExpectFsckClean();
}

TEST_F(BranchWorkerTest, EveryEffectiveWriteAddsTheBootstrapFilesThatAreMissing) {
  auto worker = MakeWorker();
  auto config = Config(remote_, 0);
  auto create = [&](const reverser::v1::GitTargetConfig& with, const std::string& name,
                    const std::string& value, uint64_t rv) {
    worker->Add(EventItem(with, Event(with, ConfigMaps(), reverser::v1::OPERATION_CREATE, "default",
                                      name, value, rv)));
    worker->PushIfDue();
  };
  create(config, "a", "1", 10);
  EXPECT_THAT(Files(), Contains("clusters/a/README.md"));
  EXPECT_THAT(Files(), Contains("clusters/a/.gittargetignore"));
  EXPECT_THAT(Files(), Not(Contains("clusters/a/.sops.yaml"))) << "no recipients yet";

  // Encryption is enabled later: the next write brings the .sops.yaml.
  auto encrypted = config;
  encrypted.add_age_recipients(Identity().Recipient().String());
  create(encrypted, "b", "2", 11);
  EXPECT_THAT(Files(), Contains("clusters/a/.sops.yaml"));
  auto sops = testing::ShowFile(remote_, "main", "clusters/a/.sops.yaml");
  ASSERT_TRUE(sops.ok());
  EXPECT_NE(sops->find(Identity().Recipient().String()), std::string::npos);
  auto diff = Git(remote_, {"show", "--name-status", "--format=", "main"});
  ASSERT_TRUE(diff.ok());
  EXPECT_THAT(Lines(*diff),
              ElementsAre("A\tclusters/a/.sops.yaml", "A\tclusters/a/default/configmaps/b.yaml"));

  // A person deletes the README and edits the ignore file: a re-delivery that changes nothing
  // commits nothing (the README stays away), the next real change brings the README back and
  // leaves the edited ignore file as it is.
  auto clone = testing::CloneRepo(remote_, dir_.path());
  ASSERT_TRUE(clone.ok()) << clone.status();
  ASSERT_EQ(std::remove((*clone + "/clusters/a/README.md").c_str()), 0);
  ASSERT_TRUE(testing::WriteFile(*clone + "/clusters/a/.gittargetignore", "notes.txt\n").ok());
  ASSERT_TRUE(testing::CommitAndPush(*clone, "hand edits").ok());
  const size_t commits = Subjects().size();
  create(encrypted, "b", "2", 12);
  worker->PushIfDue(/*force=*/true);
  EXPECT_EQ(Subjects().size(), commits);
  EXPECT_THAT(Files(), Not(Contains("clusters/a/README.md")));
  create(encrypted, "c", "3", 13);
  EXPECT_EQ(Subjects().size(), commits + 1);
  EXPECT_THAT(Files(), Contains("clusters/a/README.md"));
  EXPECT_EQ(testing::ShowFile(remote_, "main", "clusters/a/.gittargetignore").value_or(""),
            "notes.txt\n");
  EXPECT_EQ(sink_->AckedRv(ConfigMaps()), 13u);
  ExpectFsckClean();
}

TEST_F(BranchWorkerTest, WindowZeroCommitsEachEventWithTheEventTemplateAndAuthor) {
  auto worker = MakeWorker();
  auto config = Config(remote_, 0);
  worker->Add(EventItem(config, Event(config, ConfigMaps(), reverser::v1::OPERATION_CREATE,
                                      "default", "a", "1", 10, "alice@example.com")));
  worker->Add(EventItem(config, Event(config, ConfigMaps(), reverser::v1::OPERATION_UPDATE,
                                      "default", "a", "2", 11, "alice@example.com")));
  worker->Add(EventItem(config, Event(config, Deployments(), reverser::v1::OPERATION_CREATE,
                                      "default", "web", "nginx", 12)));
  EXPECT_TRUE(sink_->acks().empty()) << "nothing is acked before the push";
  worker->PushIfDue();
  auto subjects = Subjects();
  ASSERT_GE(subjects.size(), 4u);
  EXPECT_EQ(subjects[0], "[CREATE] apps/v1/deployments/web");
  EXPECT_EQ(subjects[1], "[UPDATE] v1/configmaps/a");
  EXPECT_EQ(subjects[2], "[CREATE] v1/configmaps/a");
  auto authors = Git(remote_, {"log", "-3", "--format=%an <%ae>|%cn", "main"});
  ASSERT_TRUE(authors.ok());
  EXPECT_THAT(Lines(*authors),
              ElementsAre("GitOps Reverser <noreply@configbutler.ai>|GitOps Reverser",
                          "alice@example.com <alice@example.com>|GitOps Reverser",
                          "alice@example.com <alice@example.com>|GitOps Reverser"));
  EXPECT_THAT(Files(), Contains("clusters/a/default/apps/deployments/web.yaml"));
  EXPECT_EQ(sink_->AckedRv(ConfigMaps()), 11u);
  EXPECT_EQ(sink_->AckedRv(Deployments()), 12u);
  ExpectFsckClean();
}

TEST_F(BranchWorkerTest, WindowGroupsOneAuthorAndSplitsOnAuthorChange) {
  auto worker = MakeWorker();
  auto config = Config(remote_, 60'000);
  auto add = [&](const std::string& name, uint64_t rv, const std::string& user) {
    worker->Add(EventItem(config, Event(config, ConfigMaps(), reverser::v1::OPERATION_CREATE,
                                        "default", name, "v", rv, user)));
  };
  add("a", 10, "alice");
  add("b", 11, "alice");
  add("a", 12, "alice");  // same path again: last write wins, counted once
  add("c", 13, "bob");    // another author finalizes alice's window
  add("d", 14, "alice");
  add("e", 15, "alice");
  // The silence timer of the current window fires; an older generation does nothing.
  auto timer = worker->WindowTimer();
  ASSERT_TRUE(timer.has_value());
  EXPECT_EQ(timer->second, absl::Minutes(1));
  worker->OnWindowTimer(timer->first - 1);
  EXPECT_TRUE(worker->WindowTimer().has_value());
  worker->OnWindowTimer(timer->first);
  EXPECT_FALSE(worker->WindowTimer().has_value());
  worker->PushIfDue();
  auto subjects = Subjects();
  ASSERT_GE(subjects.size(), 3u);
  EXPECT_EQ(subjects[0], "alice on tgt: 2 resource(s)");
  EXPECT_EQ(subjects[1], "[CREATE] v1/configmaps/c");
  EXPECT_EQ(subjects[2], "alice on tgt: 2 resource(s)");
  auto authors = Git(remote_, {"log", "-3", "--format=%an", "main"});
  ASSERT_TRUE(authors.ok());
  EXPECT_THAT(Lines(*authors), ElementsAre("alice", "bob", "alice"));
  EXPECT_EQ(sink_->AckedRv(ConfigMaps()), 15u);
  ExpectFsckClean();
}

TEST_F(BranchWorkerTest, ResyncSweepDeletesOnlyAbsentDocumentsOfItsType) {
  auto worker = MakeWorker();
  auto config = Config(remote_, 0);
  worker->Add(ResyncItem(config, Snapshot(config, ConfigMaps(),
                                          {Object(ConfigMaps(), "default", "a", "1"),
                                           Object(ConfigMaps(), "default", "b", "2"),
                                           Object(ConfigMaps(), "other", "c", "3")},
                                          100)));
  worker->Add(ResyncItem(
      config,
      Snapshot(config, Deployments(), {Object(Deployments(), "default", "web", "nginx")}, 101)));
  worker->PushIfDue();
  // A hand-written kustomization and a README beside the mirrored files.
  auto clone = testing::CloneRepo(remote_, dir_.path());
  ASSERT_TRUE(clone.ok()) << clone.status();
  ASSERT_TRUE(testing::WriteFile(*clone + "/clusters/a/kustomization.yaml",
                                 "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: "
                                 "Kustomization\nresources: []\n")
                  .ok());
  ASSERT_TRUE(testing::CommitAndPush(*clone, "add kustomization").ok());

  // A namespaced resync of configmaps in "default" keeps only "a": b goes, c (other namespace),
  // the deployment and the kustomization stay.
  worker->Add(ResyncItem(config, Snapshot(config, ConfigMaps("default"),
                                          {Object(ConfigMaps(), "default", "a", "1")}, 200)));
  worker->PushIfDue();
  auto files = Files();
  EXPECT_THAT(files, Contains("clusters/a/default/configmaps/a.yaml"));
  EXPECT_THAT(files, Not(Contains("clusters/a/default/configmaps/b.yaml")));
  EXPECT_THAT(files, Contains("clusters/a/other/configmaps/c.yaml"));
  EXPECT_THAT(files, Contains("clusters/a/default/apps/deployments/web.yaml"));
  EXPECT_THAT(files, Contains("clusters/a/kustomization.yaml"));
  EXPECT_EQ(Subjects().front(), "reconciled 1 configmaps (last resourceVersion: 200)");
  EXPECT_EQ(metrics_
                .GetCounter("gitopsreverser_resync_sweep_deletes_total", "",
                            {{"group", ""}, {"version", "v1"}, {"resource", "configmaps"}})
                .Value(),
            1.0);
  ExpectFsckClean();
}

TEST_F(BranchWorkerTest, RedeliveredEventsCommitNothingButAreAcked) {
  auto worker = MakeWorker();
  auto config = Config(remote_, 0);
  for (int round = 0; round < 2; ++round) {
    worker->Add(EventItem(config, Event(config, ConfigMaps(), reverser::v1::OPERATION_CREATE,
                                        "default", "a", "1", 10, "alice")));
    worker->Add(EventItem(config, Event(config, ConfigMaps(), reverser::v1::OPERATION_DELETE,
                                        "default", "gone", "", 11, "alice")));
    worker->PushIfDue();
  }
  auto subjects = Subjects();
  EXPECT_EQ(subjects.size(), 2u) << "seed + one CREATE; the DELETE of a missing file is a no-op";
  EXPECT_EQ(sink_->AckedRv(ConfigMaps()), 11u);
  EXPECT_EQ(worker->QueueDepth(), 0u);
}

TEST_F(BranchWorkerTest, ConcurrentForeignPushIsSurvivedByFetchResetReplay) {
  auto worker = MakeWorker(absl::Hours(1));
  auto config = Config(remote_, 0);
  auto clone = testing::CloneRepo(remote_, dir_.path());
  ASSERT_TRUE(clone.ok()) << clone.status();
  for (int round = 0; round < 5; ++round) {
    const std::string name = absl::StrCat("cm", round);
    worker->Add(EventItem(config, Event(config, ConfigMaps(), reverser::v1::OPERATION_CREATE,
                                        "default", name, "x", 10 + round, "alice")));
    ASSERT_TRUE(Git(*clone, {"pull", "-q", "--rebase"}).ok());
    ASSERT_TRUE(testing::WriteFile(absl::StrCat(*clone, "/foreign", round, ".txt"), "f").ok());
    ASSERT_TRUE(testing::CommitAndPush(*clone, absl::StrCat("foreign ", round)).ok());
    EXPECT_LT(sink_->AckedRv(ConfigMaps()), 10u + round) << "not acked before the push";
    worker->PushIfDue(/*force=*/true);
    EXPECT_EQ(sink_->AckedRv(ConfigMaps()), 10u + round);
  }
  auto files = Files();
  for (int round = 0; round < 5; ++round) {
    EXPECT_THAT(files, Contains(absl::StrCat("clusters/a/default/configmaps/cm", round, ".yaml")));
    EXPECT_THAT(files, Contains(absl::StrCat("foreign", round, ".txt")));
  }
  EXPECT_EQ(Subjects().size(), 11u);  // seed + 5 foreign + 5 ours
  EXPECT_TRUE(sink_->resync_requests().empty()) << "pushes on top of ours rewrite nothing";
  EXPECT_GT(metrics_
                .GetCounter(
                    "reverser_gitworker_push_conflicts_total", "",
                    {{"provider_namespace", "team"}, {"provider_name", "repo"}, {"branch", "main"}})
                .Value(),
            0.0);
  ExpectFsckClean();
}

TEST_F(BranchWorkerTest, ARewrittenHistoryAsksEveryTargetOfTheBranchToResync) {
  auto worker = MakeWorker();
  auto config_a = Config(remote_, 0, "clusters/a", "tgt-a");
  auto config_b = Config(remote_, 0, "clusters/b", "tgt-b");
  auto other_sink = std::make_shared<RecordingSink>();
  worker->Add(EventItem(config_a, Event(config_a, ConfigMaps(), reverser::v1::OPERATION_CREATE,
                                        "default", "kept", "x", 10, "alice")));
  WorkItem b = EventItem(config_b, Event(config_b, ConfigMaps(), reverser::v1::OPERATION_CREATE,
                                         "default", "other", "x", 11, "alice"));
  for (Coverage& cover : b.covers) cover.sink = other_sink;
  worker->Add(std::move(b));
  worker->PushIfDue(/*force=*/true);
  ASSERT_THAT(Files(), Contains("clusters/a/default/configmaps/kept.yaml"));
  // Someone force-pushes the branch back to before our commits.
  auto clone = testing::CloneRepo(remote_, dir_.path());
  ASSERT_TRUE(clone.ok()) << clone.status();
  auto seed = Git(*clone, {"rev-list", "--max-parents=0", "HEAD"});
  ASSERT_TRUE(seed.ok()) << seed.status();
  ASSERT_TRUE(Git(*clone, {"reset", "-q", "--hard", Lines(*seed).front()}).ok());
  ASSERT_TRUE(testing::WriteFile(*clone + "/rewritten.txt", "r").ok());
  ASSERT_TRUE(Git(*clone, {"add", "rewritten.txt"}).ok());
  ASSERT_TRUE(Git(*clone, {"-c", "user.name=h", "-c", "user.email=h@example.com", "commit", "-q",
                           "-m", "rewrite"})
                  .ok());
  ASSERT_TRUE(Git(*clone, {"push", "-q", "--force", "origin", "HEAD:main"}).ok());
  // The next push finds it: the pending write is replayed on the new tip, and both targets of
  // the branch are asked to resync (kept.yaml is gone from the new history).
  worker->Add(EventItem(config_a, Event(config_a, ConfigMaps(), reverser::v1::OPERATION_CREATE,
                                        "default", "next", "x", 12, "alice")));
  worker->PushIfDue(/*force=*/true);
  EXPECT_THAT(Files(), Contains("clusters/a/default/configmaps/next.yaml"));
  EXPECT_THAT(Files(), Contains("rewritten.txt"));
  ASSERT_EQ(sink_->resync_requests().size(), 1u);
  EXPECT_EQ(sink_->resync_requests()[0].target().name(), "tgt-a");
  EXPECT_EQ(sink_->resync_requests()[0].reason(), "HistoryRewritten");
  EXPECT_THAT(sink_->resync_requests()[0].message(), HasSubstr("no longer an ancestor"));
  ASSERT_EQ(other_sink->resync_requests().size(), 1u);
  EXPECT_EQ(other_sink->resync_requests()[0].target().name(), "tgt-b");
  // tgt-b's stream ends and a new one delivers its next change: the new stream is asked too
  // (the old one may have ended without carrying the request); tgt-a's own stream is not asked
  // twice.
  auto reconnected = std::make_shared<RecordingSink>();
  WorkItem b_again =
      EventItem(config_b, Event(config_b, ConfigMaps(), reverser::v1::OPERATION_CREATE, "default",
                                "later", "x", 13, "alice"));
  for (Coverage& cover : b_again.covers) cover.sink = reconnected;
  worker->Add(std::move(b_again));
  worker->Add(EventItem(config_a, Event(config_a, ConfigMaps(), reverser::v1::OPERATION_CREATE,
                                        "default", "more", "x", 14, "alice")));
  ASSERT_EQ(reconnected->resync_requests().size(), 1u);
  EXPECT_EQ(reconnected->resync_requests()[0].reason(), "HistoryRewritten");
  EXPECT_EQ(sink_->resync_requests().size(), 1u);
  EXPECT_EQ(metrics_
                .GetCounter(
                    "reverser_gitworker_history_rewritten_total", "",
                    {{"provider_namespace", "team"}, {"provider_name", "repo"}, {"branch", "main"}})
                .Value(),
            1.0);
  ExpectFsckClean();
}

TEST_F(BranchWorkerTest, LargeResyncsArePackedAndReplayedAfterAForeignPush) {
  auto worker = MakeWorker(absl::Hours(1), /*pack_threshold=*/50);
  auto config = Config(remote_, 0);
  auto objects = [](int count, const std::string& value) {
    std::vector<reverser::v1::ObjectBody> out;
    for (int i = 0; i < count; ++i) {
      out.push_back(Object(ConfigMaps(), absl::StrCat("ns", i % 4), absl::StrCat("cm", i), value));
    }
    return out;
  };
  worker->Add(ResyncItem(config, Snapshot(config, ConfigMaps(), objects(300, "v1"), 100)));
  // Someone pushes before the worker does: the resync is replayed on the new tip from its
  // rendered files (the delivered objects are gone by then).
  auto clone = testing::CloneRepo(remote_, dir_.path());
  ASSERT_TRUE(clone.ok()) << clone.status();
  ASSERT_TRUE(testing::WriteFile(*clone + "/foreign.txt", "f").ok());
  ASSERT_TRUE(testing::CommitAndPush(*clone, "foreign").ok());
  worker->PushIfDue(/*force=*/true);
  EXPECT_EQ(sink_->AckedRv(ConfigMaps()), 100u);
  auto files = Files();
  EXPECT_EQ(files.size(), 300u + 4);  // + seed README, foreign.txt, bootstrap README, ignore file
  EXPECT_THAT(files, Contains("foreign.txt"));
  EXPECT_EQ(metrics_
                .GetCounter(
                    "reverser_gitworker_push_conflicts_total", "",
                    {{"provider_namespace", "team"}, {"provider_name", "repo"}, {"branch", "main"}})
                .Value(),
            1.0);
  ExpectFsckClean();
  // The worker's clone holds the mirror packed, not as 300 loose files.
  const std::string clone_path =
      git::LocalClonePath(dir_.path() + "/work", "team", "repo", "main", remote_);
  auto counts = Git(clone_path, {"count-objects", "-v"});
  ASSERT_TRUE(counts.ok());
  EXPECT_THAT(Lines(*counts), Contains(::testing::StartsWith("count: ")));
  for (const std::string& line : Lines(*counts)) {
    if (absl::StartsWith(line, "count: ")) {
      EXPECT_LT(std::stoi(line.substr(7)), 50) << line;
    }
  }

  // Later edits find the packed documents (match-first), and a smaller resync sweeps the rest.
  worker->Add(EventItem(config, Event(config, ConfigMaps(), reverser::v1::OPERATION_UPDATE, "ns1",
                                      "cm1", "edited", 150, "alice")));
  worker->PushIfDue(/*force=*/true);
  EXPECT_THAT(testing::ShowFile(remote_, "main", "clusters/a/ns1/configmaps/cm1.yaml").value_or(""),
              ::testing::HasSubstr("edited"));
  worker->Add(ResyncItem(config, Snapshot(config, ConfigMaps(), objects(250, "v2"), 200)));
  worker->PushIfDue(/*force=*/true);
  EXPECT_EQ(sink_->AckedRv(ConfigMaps()), 200u);
  EXPECT_EQ(Files().size(), 250u + 4);
  EXPECT_THAT(
      testing::ShowFile(remote_, "main", "clusters/a/ns3/configmaps/cm247.yaml").value_or(""),
      ::testing::HasSubstr("v2"));
  EXPECT_EQ(metrics_
                .GetCounter("gitopsreverser_resync_sweep_deletes_total", "",
                            {{"group", ""}, {"version", "v1"}, {"resource", "configmaps"}})
                .Value(),
            50.0);
  ExpectFsckClean();
}

TEST_F(BranchWorkerTest, CooldownHoldsPushesAndAcks) {
  auto worker = MakeWorker(absl::Seconds(5));
  auto config = Config(remote_, 0);
  worker->Add(EventItem(config, Event(config, ConfigMaps(), reverser::v1::OPERATION_CREATE,
                                      "default", "a", "1", 10)));
  worker->PushIfDue();
  EXPECT_EQ(sink_->AckedRv(ConfigMaps()), 10u);
  worker->Add(EventItem(config, Event(config, ConfigMaps(), reverser::v1::OPERATION_CREATE,
                                      "default", "b", "1", 11)));
  worker->PushIfDue();
  EXPECT_EQ(sink_->AckedRv(ConfigMaps()), 10u) << "committed locally, not pushed: no ack";
  EXPECT_EQ(Subjects().size(), 2u);
  ASSERT_TRUE(worker->NextPushAt().has_value());
  EXPECT_EQ(*worker->NextPushAt(), clock_.Now() + absl::Seconds(5));
  clock_.Advance(absl::Seconds(5));
  worker->PushIfDue();
  EXPECT_EQ(sink_->AckedRv(ConfigMaps()), 11u);
  EXPECT_EQ(Subjects().size(), 3u);
}

TEST_F(BranchWorkerTest, SensitiveObjectsAreNeverWrittenInPlaintext) {
  auto worker = MakeWorker();
  auto config = Config(remote_, 0);
  auto secrets = Claim("", "v1", "secrets", "Secret");
  auto event =
      Event(config, secrets, reverser::v1::OPERATION_CREATE, "default", "s", "hunter2", 10);
  event.mutable_object()->set_sensitive(true);
  worker->Add(EventItem(config, event));
  worker->PushIfDue();
  EXPECT_EQ(Subjects().size(), 1u) << "nothing committed";
  ASSERT_EQ(sink_->rejected().size(), 1u);
  EXPECT_NE(sink_->rejected()[0].find("no age recipients"), std::string::npos);
  const reverser::v1::Refusal refusal = sink_->refusals()[0];
  EXPECT_EQ(refusal.reason(), reverser::v1::REFUSAL_REASON_ENCRYPTION_UNAVAILABLE);
  EXPECT_EQ(refusal.kind(), "Secret");
  EXPECT_EQ(refusal.object().namespace_(), "default");
  EXPECT_EQ(refusal.object().name(), "s");
  EXPECT_EQ(refusal.target().name(), config.target().name());
  EXPECT_EQ(ClaimKey(refusal.claim()), ClaimKey(secrets));
  EXPECT_EQ(refusal.position().rv(), 10u);
  EXPECT_EQ(sink_->AckedRv(secrets), 10u) << "a rejected item does not stall the stream";
  auto grep = Git(remote_, {"grep", "-c", "hunter2", "main"});
  EXPECT_FALSE(grep.ok());
}

TEST_F(BranchWorkerTest, SensitiveObjectsAreSopsEncryptedAndRedeliveryCommitsNothing) {
  auto worker = MakeWorker();
  auto config = Config(remote_, 0);
  config.add_age_recipients(Identity().Recipient().String());
  auto secrets = Claim("", "v1", "secrets", "Secret");
  auto event =
      Event(config, secrets, reverser::v1::OPERATION_CREATE, "default", "s", "aHVudGVyMg==", 10);
  event.mutable_object()->set_sensitive(true);
  worker->Add(EventItem(config, event));
  worker->PushIfDue();
  EXPECT_TRUE(sink_->rejected().empty());
  auto file = testing::ShowFile(remote_, "main", "clusters/a/default/secrets/s.sops.yaml");
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->find("aHVudGVyMg=="), std::string::npos) << "never in plaintext";
  EXPECT_NE(file->find("ENC[AES256_GCM"), std::string::npos);
  auto decrypted = sops::DecryptYaml(*file, {Identity()});
  ASSERT_TRUE(decrypted.ok()) << decrypted.status();
  EXPECT_THAT(Files(), Contains("clusters/a/.sops.yaml"));
  const size_t commits = Subjects().size();
  auto again = event;
  again.mutable_position()->set_rv(11);
  worker->Add(EventItem(config, again));
  worker->PushIfDue();
  EXPECT_EQ(Subjects().size(), commits) << "unchanged Secret: no re-encryption commit";
  EXPECT_EQ(sink_->AckedRv(secrets), 11u);
  ExpectFsckClean();
}

TEST_F(BranchWorkerTest, UnbornBranchStartsFromTheDefaultBranch) {
  BranchWorkerOptions options;
  options.key = {"team", "repo", "feature"};
  options.remote_url = remote_;
  options.work_dir = dir_.path() + "/work";
  options.push_cooldown = absl::ZeroDuration();
  options.clock = &clock_;
  options.metrics = &metrics_;
  BranchWorker worker(options);
  auto config = Config(remote_, 0);
  config.mutable_destination()->set_branch("feature");
  worker.Add(EventItem(config, Event(config, ConfigMaps(), reverser::v1::OPERATION_CREATE,
                                     "default", "a", "1", 10)));
  worker.PushIfDue();
  auto log = Git(remote_, {"log", "--format=%s", "feature"});
  ASSERT_TRUE(log.ok()) << log.status();
  EXPECT_EQ(Lines(*log).size(), 2u);  // our commit on top of main's seed
  auto files = testing::ListFiles(remote_, "feature");
  ASSERT_TRUE(files.ok());
  EXPECT_THAT(*files, Contains("README.md"));
}

TEST_F(BranchWorkerTest, BufferLimitFinalizesTheWindow) {
  BranchWorkerOptions options;
  options.key = {"team", "repo", "main"};
  options.remote_url = remote_;
  options.work_dir = dir_.path() + "/work";
  options.push_cooldown = absl::ZeroDuration();
  options.buffer_limit_bytes = 150;  // about two small ConfigMaps
  options.clock = &clock_;
  options.metrics = &metrics_;
  BranchWorker worker(options);
  auto config = Config(remote_, 60'000);
  for (int i = 0; i < 4; ++i) {
    worker.Add(EventItem(config, Event(config, ConfigMaps(), reverser::v1::OPERATION_CREATE,
                                       "default", absl::StrCat("cm", i), "v", 10 + i, "alice")));
  }
  EXPECT_FALSE(worker.WindowTimer().has_value()) << "the second event filled the buffer";
  worker.PushIfDue();
  EXPECT_EQ(Subjects().front(), "alice on tgt: 2 resource(s)");
  EXPECT_EQ(metrics_
                .GetCounter("reverser_gitworker_windows_finalized_total", "",
                            {{"reason", "buffer-limit"}})
                .Value(),
            2.0);
}

TEST_F(BranchWorkerTest, HundredRoundsAgainstASecondWriterLoseNothing) {
  auto worker = MakeWorker(absl::Hours(1));
  auto config = Config(remote_, 0);
  auto clone = testing::CloneRepo(remote_, dir_.path());
  ASSERT_TRUE(clone.ok()) << clone.status();
  constexpr int kRounds = 100;
  std::vector<std::string> expected = {"README.md", "clusters/a/.gittargetignore",
                                       "clusters/a/README.md"};
  for (int round = 0; round < kRounds; ++round) {
    const std::string name = absl::StrCat("cm", round);
    worker->Add(EventItem(config, Event(config, ConfigMaps(), reverser::v1::OPERATION_CREATE,
                                        "default", name, "x", 1000 + round, "alice")));
    ASSERT_TRUE(Git(*clone, {"pull", "-q", "--rebase"}).ok());
    ASSERT_TRUE(testing::WriteFile(absl::StrCat(*clone, "/foreign", round, ".txt"), "f").ok());
    ASSERT_TRUE(testing::CommitAndPush(*clone, absl::StrCat("foreign ", round)).ok());
    worker->PushIfDue(/*force=*/true);
    ASSERT_EQ(sink_->AckedRv(ConfigMaps()), 1000u + round);
    expected.push_back(absl::StrCat("clusters/a/default/configmaps/", name, ".yaml"));
    expected.push_back(absl::StrCat("foreign", round, ".txt"));
  }
  auto files = Files();
  std::sort(files.begin(), files.end());
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(files, expected);
  EXPECT_EQ(Subjects().size(), 1u + 2 * kRounds);
  auto foreign = Git(remote_, {"log", "--format=%s", "--grep=^foreign", "main"});
  ASSERT_TRUE(foreign.ok());
  EXPECT_EQ(Lines(*foreign).size(), static_cast<size_t>(kRounds));
  ExpectFsckClean();
}

TEST_F(BranchWorkerTest, TransientPushFailureKeepsLocalCommitsForTheNextCycle) {
  auto worker = MakeWorker();
  auto config = Config(remote_, 0);
  worker->Add(EventItem(config, Event(config, ConfigMaps(), reverser::v1::OPERATION_CREATE,
                                      "default", "a", "1", 10)));
  worker->PushIfDue();
  ASSERT_EQ(sink_->AckedRv(ConfigMaps()), 10u);
  // The remote disappears for a while.
  const std::string away = remote_ + ".away";
  ASSERT_EQ(std::rename(remote_.c_str(), away.c_str()), 0);
  worker->Add(EventItem(config, Event(config, ConfigMaps(), reverser::v1::OPERATION_CREATE,
                                      "default", "b", "1", 11)));
  worker->PushIfDue();
  EXPECT_EQ(sink_->AckedRv(ConfigMaps()), 10u);
  EXPECT_FALSE(worker->Status().last_error().empty());
  EXPECT_EQ(worker->Status().pending_writes(), 1u);
  auto failures = [&] {
    for (absl::string_view line : absl::StrSplit(metrics_.RenderText(), '\n')) {
      if (absl::StartsWith(line, "reverser_gitworker_push_failures_total{")) {
        return std::string(line.substr(line.rfind(' ') + 1));
      }
    }
    return std::string("absent");
  };
  EXPECT_EQ(failures(), "1");
  ASSERT_TRUE(worker->NextPushAt().has_value());
  EXPECT_GE(*worker->NextPushAt(), clock_.Now() + absl::Seconds(1)) << "backs off";
  ASSERT_EQ(std::rename(away.c_str(), remote_.c_str()), 0);
  clock_.Advance(absl::Seconds(1));
  worker->PushIfDue();
  EXPECT_EQ(sink_->AckedRv(ConfigMaps()), 11u);
  EXPECT_TRUE(worker->Status().last_error().empty());
  EXPECT_EQ(failures(), "1") << "a cycle that succeeds is not counted";
  EXPECT_THAT(Files(), Contains("clusters/a/default/configmaps/b.yaml"));
}

TEST_F(BranchWorkerTest, RemoteUnreachableAtStartIsRetriedAtThePushCadence) {
  const std::string away = remote_ + ".away";
  ASSERT_EQ(std::rename(remote_.c_str(), away.c_str()), 0);
  auto worker = MakeWorker();
  auto config = Config(remote_, 0);
  worker->Add(EventItem(config, Event(config, ConfigMaps(), reverser::v1::OPERATION_CREATE,
                                      "default", "a", "1", 10)));
  worker->PushIfDue();
  worker->Add(EventItem(config, Event(config, ConfigMaps(), reverser::v1::OPERATION_CREATE,
                                      "default", "b", "1", 11)));
  EXPECT_EQ(worker->Status().pending_writes(), 2u);
  EXPECT_FALSE(worker->Status().last_error().empty());
  EXPECT_EQ(
      metrics_.GetCounter("reverser_gitworker_git_operations_total", "", {{"operation", "fetch"}})
          .Value(),
      1.0)
      << "the second event does not reconnect before the backoff";
  ASSERT_EQ(std::rename(away.c_str(), remote_.c_str()), 0);
  clock_.Advance(absl::Seconds(1));
  worker->PushIfDue();
  EXPECT_EQ(sink_->AckedRv(ConfigMaps()), 11u);
  EXPECT_EQ(Subjects().size(), 3u);
}

TEST_F(BranchWorkerTest, PlacementTemplatesAndEncryptionBootstrap) {
  auto worker = MakeWorker();
  auto config = Config(remote_, 0, "apps/prod");
  (*config.mutable_placement_by_type())["apps/v1/deployments"] = "workloads/{name}.yaml";
  config.set_placement_default("{namespaceOrCluster}/{resource}-{name}.yaml");
  config.add_age_recipients(Identity().Recipient().String());
  worker->Add(EventItem(config, Event(config, Deployments(), reverser::v1::OPERATION_CREATE,
                                      "default", "web", "nginx", 10)));
  worker->Add(EventItem(config, Event(config, ConfigMaps(), reverser::v1::OPERATION_CREATE,
                                      "default", "settings", "1", 11)));
  worker->PushIfDue();
  auto files = Files();
  EXPECT_THAT(files, Contains("apps/prod/workloads/web.yaml"));
  EXPECT_THAT(files, Contains("apps/prod/default/configmaps-settings.yaml"));
  EXPECT_THAT(files, Contains("apps/prod/.sops.yaml"));
  auto sops = testing::ShowFile(remote_, "main", "apps/prod/.sops.yaml");
  ASSERT_TRUE(sops.ok());
  EXPECT_NE(sops->find(Identity().Recipient().String()), std::string::npos);
  EXPECT_NE(sops->find("^(data|stringData)$"), std::string::npos);
}

TEST_F(BranchWorkerTest, ExistingDocumentsAreEditedAndDeletedWhereTheyLive) {
  auto clone = testing::CloneRepo(remote_, dir_.path());
  ASSERT_TRUE(clone.ok()) << clone.status();
  std::filesystem::create_directories(*clone + "/clusters/a/hand");
  ASSERT_TRUE(testing::WriteFile(*clone + "/clusters/a/hand/web-config.yaml",
                                 "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n"
                                 "  namespace: default\ndata:\n  key: old\n")
                  .ok());
  ASSERT_TRUE(testing::WriteFile(*clone + "/clusters/a/hand/stale.yml",
                                 "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: stale\n"
                                 "  namespace: default\n")
                  .ok());
  ASSERT_TRUE(testing::CommitAndPush(*clone, "hand-placed").ok());

  auto worker = MakeWorker();
  auto config = Config(remote_, 0);
  worker->Add(EventItem(config, Event(config, ConfigMaps(), reverser::v1::OPERATION_UPDATE,
                                      "default", "a", "new", 10)));
  worker->PushIfDue();
  auto files = Files();
  EXPECT_THAT(files, Not(Contains("clusters/a/default/configmaps/a.yaml")));
  auto edited = testing::ShowFile(remote_, "main", "clusters/a/hand/web-config.yaml");
  ASSERT_TRUE(edited.ok());
  EXPECT_NE(edited->find("key: new"), std::string::npos) << *edited;

  // A resync keeps "a" where it lives and sweeps the stale hand-placed document.
  worker->Add(ResyncItem(
      config, Snapshot(config, ConfigMaps(), {Object(ConfigMaps(), "default", "a", "new")}, 20)));
  worker->PushIfDue();
  files = Files();
  EXPECT_THAT(files, Contains("clusters/a/hand/web-config.yaml"));
  EXPECT_THAT(files, Not(Contains("clusters/a/hand/stale.yml")));
  EXPECT_THAT(files, Not(Contains("clusters/a/default/configmaps/a.yaml")));

  worker->Add(EventItem(
      config, Event(config, ConfigMaps(), reverser::v1::OPERATION_DELETE, "default", "a", "", 30)));
  worker->PushIfDue();
  EXPECT_THAT(Files(), Not(Contains("clusters/a/hand/web-config.yaml")));
  EXPECT_EQ(Subjects().front(), "[DELETE] v1/configmaps/a");
  ExpectFsckClean();
}

// The documents of a YAML file on the remote's main: name → data.key (empty: no such file).
std::map<std::string, std::string> DocumentsOf(const std::string& remote, const std::string& path) {
  std::map<std::string, std::string> out;
  auto text = testing::ShowFile(remote, "main", path);
  if (!text.ok()) return out;
  auto docs = manifest::ParseYamlDocuments(*text);
  EXPECT_TRUE(docs.ok()) << docs.status() << *text;
  if (!docs.ok()) return out;
  for (const auto& doc : *docs) {
    if (!doc.is_object()) continue;
    out[doc["metadata"]["name"].get<std::string>()] =
        doc.contains("data") ? doc["data"]["key"].get<std::string>() : "";
  }
  return out;
}

// The lines the last commit on main removed and added in `path` (`git show -U0`).
std::pair<std::vector<std::string>, std::vector<std::string>> LastChangedLines(
    const std::string& remote, const std::string& path) {
  std::pair<std::vector<std::string>, std::vector<std::string>> out;
  auto diff = Git(remote, {"show", "-U0", "--format=", "main", "--", path});
  EXPECT_TRUE(diff.ok()) << diff.status();
  for (const std::string& line : Lines(diff.value_or(""))) {
    if (absl::StartsWith(line, "---") && !absl::StartsWith(line, "--- ")) {
      out.first.push_back(line.substr(1));
    } else if (absl::StartsWith(line, "+++") && !absl::StartsWith(line, "+++ ")) {
      out.second.push_back(line.substr(1));
    } else if (absl::StartsWith(line, "-") && !absl::StartsWith(line, "--- ")) {
      out.first.push_back(line.substr(1));
    } else if (absl::StartsWith(line, "+") && !absl::StartsWith(line, "+++ ")) {
      out.second.push_back(line.substr(1));
    }
  }
  return out;
}

// A placement template that bundles (docs/behaviour.md, Placement templates): fifty ConfigMaps of
// one namespace share one file. Every create, update and delete is its own commit; nothing is
// lost, and each commit changes only its object's lines (and its `---`).
TEST_F(BranchWorkerTest, BundlingPlacementKeepsEveryObjectAndEditsOnlyItsOwnLines) {
  auto worker = MakeWorker();
  auto config = Config(remote_, 0);
  config.set_placement_default("{namespace}/{resource}.yaml");
  const std::string bundle = "clusters/a/default/configmaps.yaml";
  std::map<std::string, std::string> expected;
  uint64_t rv = 0;
  auto name_of = [](int i) { return absl::StrCat("cm", i < 10 ? "0" : "", i); };
  // The rendered lines of one object, plus the separator it may bring.
  auto own_lines = [&](const std::string& name, const std::string& value) {
    std::vector<std::string> lines = {"---"};
    auto rendered = RenderObject(*Settings(config), Object(ConfigMaps(), "default", name, value));
    EXPECT_TRUE(rendered.ok());
    for (const std::string& line : Lines(rendered.value_or(""))) lines.push_back(line);
    return lines;
  };
  auto expect_only = [&](const std::vector<std::string>& changed,
                         const std::vector<std::string>& allowed, size_t count) {
    EXPECT_EQ(changed.size(), count) << absl::StrJoin(changed, "\n");
    for (const std::string& line : changed) EXPECT_THAT(allowed, Contains(line)) << line;
  };
  auto event = [&](reverser::v1::Operation op, const std::string& name, const std::string& value) {
    worker->Add(EventItem(config, Event(config, ConfigMaps(), op, "default", name, value, ++rv)));
    worker->PushIfDue();
    EXPECT_EQ(DocumentsOf(remote_, bundle), expected) << "after " << name;
  };

  for (int i = 0; i < 50; ++i) {
    const std::string name = name_of(i);
    expected[name] = "v1-" + name;
    event(reverser::v1::OPERATION_CREATE, name, expected[name]);
    auto [removed, added] = LastChangedLines(remote_, bundle);
    EXPECT_TRUE(removed.empty());
    expect_only(added, own_lines(name, expected[name]), i == 0 ? 7 : 8);
  }
  EXPECT_THAT(Files(), Not(Contains("clusters/a/default/configmaps/cm00.yaml")));

  // A resync of the type: cm07 is gone from the cluster, cm08 changed; both in the bundle.
  std::vector<reverser::v1::ObjectBody> desired;
  expected.erase("cm07");
  expected["cm08"] = "resynced";
  for (const auto& [name, value] : expected) {
    desired.push_back(Object(ConfigMaps(), "default", name, value));
  }
  worker->Add(ResyncItem(config, Snapshot(config, ConfigMaps(), std::move(desired), ++rv)));
  worker->PushIfDue();
  EXPECT_EQ(Subjects().front(),
            absl::StrCat("reconciled 2 configmaps (last resourceVersion: ", rv, ")"));
  EXPECT_EQ(DocumentsOf(remote_, bundle), expected);
  {
    auto [removed, added] = LastChangedLines(remote_, bundle);
    EXPECT_THAT(added, ElementsAre("  key: resynced"));
    EXPECT_EQ(removed.size(), 9u) << absl::StrJoin(removed, "\n");  // cm07 and cm08's old value
  }

  for (const auto& [name, value] : std::map<std::string, std::string>(expected)) {
    const std::string old_value = value;
    expected[name] = "v2-" + name;
    event(reverser::v1::OPERATION_UPDATE, name, expected[name]);
    auto [removed, added] = LastChangedLines(remote_, bundle);
    EXPECT_THAT(removed, ElementsAre("  key: " + old_value));
    EXPECT_THAT(added, ElementsAre("  key: " + expected[name]));
  }

  int left = static_cast<int>(expected.size());
  for (const auto& [name, value] : std::map<std::string, std::string>(expected)) {
    expected.erase(name);
    event(reverser::v1::OPERATION_DELETE, name, "");
    --left;
    if (left == 0) break;
    auto [removed, added] = LastChangedLines(remote_, bundle);
    EXPECT_TRUE(added.empty()) << absl::StrJoin(added, "\n");
    // The first document has no `---` of its own; the next one's stays.
    expect_only(removed, own_lines(name, value), name == "cm00" ? 7 : 8);
  }
  EXPECT_THAT(Files(), Not(Contains(bundle))) << "the last document took the file with it";
  EXPECT_EQ(Subjects().size(), 1u + 50 + 1 + 49 + 49);
  EXPECT_TRUE(sink_->refusals().empty());
  ExpectFsckClean();
}

// A bundle a person wrote (a header comment, CRLF, a commented separator): its objects change in
// the cluster and are edited where they are, never copied to their canonical paths; a resync
// splices out what is gone and the last delete removes the file.
TEST_F(BranchWorkerTest, HandWrittenBundlesAreEditedInPlace) {
  auto clone = testing::CloneRepo(remote_, dir_.path());
  ASSERT_TRUE(clone.ok()) << clone.status();
  std::filesystem::create_directories(*clone + "/clusters/a/hand");
  const std::string header = "# The team's settings, kept by hand.\r\n";
  const std::string b_separator = "--- # b\r\n";
  ASSERT_TRUE(
      testing::WriteFile(*clone + "/clusters/a/hand/bundle.yaml",
                         header +
                             "apiVersion: v1\r\nkind: ConfigMap\r\nmetadata:\r\n  name: a\r\n"
                             "  namespace: default\r\ndata:\r\n  key: hand-a\r\n" +
                             b_separator +
                             "apiVersion: v1\r\nkind: ConfigMap\r\nmetadata: {name: b, namespace: "
                             "default}\r\ndata: {key: hand-b}\r\n")
          .ok());
  ASSERT_TRUE(testing::WriteFile(*clone + "/clusters/a/hand/other.yaml",
                                 "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: other\n"
                                 "  namespace: default\n")
                  .ok());
  ASSERT_TRUE(testing::CommitAndPush(*clone, "hand-written bundle").ok());
  const std::string bundle = "clusters/a/hand/bundle.yaml";

  auto worker = MakeWorker();
  auto config = Config(remote_, 0);
  worker->Add(EventItem(config, Event(config, ConfigMaps(), reverser::v1::OPERATION_UPDATE,
                                      "default", "a", "cluster-a", 10)));
  worker->PushIfDue();
  // A person pushes meanwhile: the replay reads the branch again, the unchanged file by blob id.
  ASSERT_TRUE(Git(*clone, {"pull", "-q", "--rebase"}).ok());
  ASSERT_TRUE(testing::WriteFile(*clone + "/unrelated.txt", "x").ok());
  ASSERT_TRUE(testing::CommitAndPush(*clone, "unrelated").ok());
  worker->Add(EventItem(config, Event(config, ConfigMaps(), reverser::v1::OPERATION_UPDATE,
                                      "default", "b", "cluster-b", 11)));
  worker->PushIfDue();
  EXPECT_GT(metrics_.GetCounter("reverser_gitworker_index_files_total", "", {{"outcome", "reused"}})
                .Value(),
            0.0);

  auto files = Files();
  EXPECT_THAT(files, Not(Contains("clusters/a/default/configmaps/a.yaml")));
  EXPECT_THAT(files, Not(Contains("clusters/a/default/configmaps/b.yaml")));
  EXPECT_THAT(files, Contains("unrelated.txt"));
  EXPECT_EQ(DocumentsOf(remote_, bundle),
            (std::map<std::string, std::string>{{"a", "cluster-a"}, {"b", "cluster-b"}}));
  auto text = testing::ShowFile(remote_, "main", bundle);
  ASSERT_TRUE(text.ok());
  EXPECT_TRUE(absl::StartsWith(*text, header + "apiVersion: v1\r\n")) << *text;
  EXPECT_NE(text->find("\r\n" + b_separator + "apiVersion: v1\r\n"), std::string::npos) << *text;
  EXPECT_EQ(text->find("\r\n"), text->find('\n') - 1) << "CRLF kept";
  EXPECT_EQ(std::count(text->begin(), text->end(), '\n'),
            std::count(text->begin(), text->end(), '\r'));

  // A resync without b: b is spliced out, a and the other file stay.
  worker->Add(ResyncItem(config, Snapshot(config, ConfigMaps(),
                                          {Object(ConfigMaps(), "default", "a", "cluster-a"),
                                           Object(ConfigMaps(), "default", "other", "")},
                                          20)));
  worker->PushIfDue();
  EXPECT_EQ(DocumentsOf(remote_, bundle), (std::map<std::string, std::string>{{"a", "cluster-a"}}));
  text = testing::ShowFile(remote_, "main", bundle);
  ASSERT_TRUE(text.ok());
  EXPECT_TRUE(absl::StartsWith(*text, header)) << *text;
  EXPECT_EQ(text->find("---"), std::string::npos) << *text;

  worker->Add(EventItem(
      config, Event(config, ConfigMaps(), reverser::v1::OPERATION_DELETE, "default", "a", "", 30)));
  worker->PushIfDue();
  EXPECT_THAT(Files(), Not(Contains(bundle)));
  EXPECT_TRUE(sink_->refusals().empty());
  ExpectFsckClean();
}

// Objects the splicer cannot deliver (too deep) come as identities in `refused`: their files
// stay through a resync, and a deletion with an identity-only body removes them.
TEST_F(BranchWorkerTest, ResyncKeepsTheFilesOfObjectsTheSplicerRefused) {
  auto worker = MakeWorker();
  auto config = Config(remote_, 0);
  worker->Add(ResyncItem(config, Snapshot(config, ConfigMaps(),
                                          {Object(ConfigMaps(), "default", "a", "1"),
                                           Object(ConfigMaps(), "default", "deep", "2"),
                                           Object(ConfigMaps(), "default", "gone", "3")},
                                          10)));
  worker->PushIfDue();
  reverser::v1::ObjectBody deep = Object(ConfigMaps(), "default", "deep", "");
  deep.clear_sanitized_json();
  auto snapshot = Snapshot(config, ConfigMaps(), {Object(ConfigMaps(), "default", "a", "1")}, 20);
  *snapshot.add_refused() = deep;
  worker->Add(ResyncItem(config, snapshot));
  worker->PushIfDue();
  auto files = Files();
  EXPECT_THAT(files, Contains("clusters/a/default/configmaps/deep.yaml"));
  EXPECT_THAT(files, Not(Contains("clusters/a/default/configmaps/gone.yaml")));
  EXPECT_TRUE(sink_->rejected().empty());

  auto removal =
      Event(config, ConfigMaps(), reverser::v1::OPERATION_DELETE, "default", "deep", "", 30);
  *removal.mutable_object() = deep;
  worker->Add(EventItem(config, removal));
  worker->PushIfDue();
  EXPECT_THAT(Files(), Not(Contains("clusters/a/default/configmaps/deep.yaml")));
  EXPECT_EQ(Subjects().front(), "[DELETE] v1/configmaps/deep");
  ExpectFsckClean();
}

TEST_F(BranchWorkerTest, ResyncWithoutATypeNeverSweeps) {
  auto worker = MakeWorker();
  auto config = Config(remote_, 0);
  worker->Add(ResyncItem(
      config, Snapshot(config, ConfigMaps(), {Object(ConfigMaps(), "default", "a", "1")}, 10)));
  worker->PushIfDue();
  reverser::v1::Claim untyped;
  untyped.mutable_scope()->set_cluster(true);
  worker->Add(ResyncItem(config, Snapshot(config, untyped, {}, 20)));
  worker->PushIfDue();
  EXPECT_THAT(Files(), Contains("clusters/a/default/configmaps/a.yaml"));
  ASSERT_EQ(sink_->rejected().size(), 1u);
  EXPECT_NE(sink_->rejected()[0].find("no sweep"), std::string::npos);
}

// Every name the API server accepts gets a file (libs/manifest/paths.h): long names are
// shortened, RBAC names with backslashes or control characters escaped, names that would pass
// for our own file kinds escaped. The documents carry the full names, so updates, deletes and
// resync sweeps find the files again by identity.
TEST_F(BranchWorkerTest, EveryNameTheApiServerAcceptsIsMirroredAndFoundAgain) {
  auto worker = MakeWorker();
  auto config = Config(remote_, 0);
  const auto roles = Claim("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole");
  const std::string longest_dns(253, 'l');
  const std::string huge(5000, 'h');
  const std::vector<std::pair<reverser::v1::Claim, std::string>> objects = {
      {ConfigMaps(), longest_dns},
      {ConfigMaps(), "x.sops"},
      {ConfigMaps(), "kustomization"},
      {roles, "back\\slash"},
      {roles, "ctl\x01\nx"},
      {roles, ".sops"},
      {roles, huge}};
  auto ns_of = [&](const reverser::v1::Claim& claim) {
    return claim.type().gvr().resource() == "configmaps" ? "default" : "";
  };
  uint64_t rv = 100;
  for (const auto& [claim, name] : objects) {
    worker->Add(EventItem(config, Event(config, claim, reverser::v1::OPERATION_CREATE, ns_of(claim),
                                        name, "v1", ++rv)));
  }
  worker->PushIfDue();
  EXPECT_TRUE(sink_->refusals().empty()) << sink_->rejected()[0];
  const std::string cm = "clusters/a/default/configmaps/";
  const std::string cr = "clusters/a/_cluster/rbac.authorization.k8s.io/clusterroles/";
  const std::vector<std::string> expected_files = {
      cm + std::string(232, 'l') + "%-" + "453a73f66fc484aa.yaml",
      cm + "x%2Esops.yaml",
      cm + "%6Bustomization.yaml",
      cr + "back%5Cslash.yaml",
      cr + "ctl%01%0Ax.yaml",
      cr + "%2Esops.yaml",
      cr + std::string(232, 'h') + "%-" + "6d03fd352879726b.yaml"};
  auto files = Files();
  for (const std::string& file : expected_files) EXPECT_THAT(files, Contains(file));
  // The document holds the full name.
  auto role = testing::ShowFile(remote_, "main", cr + "ctl%01%0Ax.yaml");
  ASSERT_TRUE(role.ok()) << role.status();
  EXPECT_NE(role->find("name: \"ctl\\x01\\nx\""), std::string::npos) << *role;
  auto long_file = testing::ShowFile(remote_, "main", expected_files.back());
  ASSERT_TRUE(long_file.ok());
  EXPECT_NE(long_file->find(huge), std::string::npos);

  // Updates land in the same files (found by identity), nothing new appears.
  const size_t file_count = files.size();
  for (const auto& [claim, name] : objects) {
    worker->Add(EventItem(config, Event(config, claim, reverser::v1::OPERATION_UPDATE, ns_of(claim),
                                        name, "v2", ++rv)));
  }
  worker->PushIfDue();
  EXPECT_EQ(Files().size(), file_count);
  auto updated = testing::ShowFile(remote_, "main", cm + "x%2Esops.yaml");
  ASSERT_TRUE(updated.ok());
  EXPECT_NE(updated->find("key: v2"), std::string::npos) << *updated;

  // A delete finds its file; a resync sweeps the ones no longer desired and keeps the others.
  worker->Add(
      EventItem(config, Event(config, roles, reverser::v1::OPERATION_DELETE, "", huge, "", ++rv)));
  worker->PushIfDue();
  EXPECT_THAT(Files(), Not(Contains(expected_files.back())));
  worker->Add(ResyncItem(
      config,
      Snapshot(config, roles,
               {Object(roles, "", "back\\slash", "v2"), Object(roles, "", ".sops", "v2")}, ++rv)));
  worker->Add(ResyncItem(
      config,
      Snapshot(config, ConfigMaps(), {Object(ConfigMaps(), "default", longest_dns, "v2")}, ++rv)));
  worker->PushIfDue();
  files = Files();
  EXPECT_THAT(files, Contains(cr + "back%5Cslash.yaml"));
  EXPECT_THAT(files, Contains(cr + "%2Esops.yaml"));
  EXPECT_THAT(files, Not(Contains(cr + "ctl%01%0Ax.yaml")));
  EXPECT_THAT(files, Contains(expected_files[0]));
  EXPECT_THAT(files, Not(Contains(cm + "x%2Esops.yaml")));
  EXPECT_THAT(files, Not(Contains(cm + "%6Bustomization.yaml"))) << "swept like any document";
  EXPECT_TRUE(sink_->refusals().empty());
  ExpectFsckClean();
}

// A file the reader refuses is left alone: a resync neither overwrites nor sweeps it, and the
// object whose file it is comes back as refused; files that merely do not parse are no refusal.
TEST(ResyncPlanTest, RefusedFilesAreLeftAloneAndTheirObjectsRefused) {
  IdentityIndex index;
  const std::string refused = "clusters/a/default/configmaps/a.yaml";
  index.RefuseFile(refused, {reverser::v1::REFUSAL_REASON_UNSUPPORTED_CONTENT, "too large"});
  ASSERT_TRUE(index.IsRefused(refused));
  PreparedResync prepared;
  prepared.gvr = {"", "v1", "configmaps"};
  prepared.kind = "ConfigMap";
  prepared.upserts.push_back({{"", "ConfigMap", "default", "a"}, refused, "a: 1\n"});
  prepared.upserts.push_back(
      {{"", "ConfigMap", "default", "b"}, "clusters/a/default/configmaps/b.yaml", "b: 1\n"});
  ResyncChanges changes = PlanResyncChanges(index, prepared);
  EXPECT_EQ(changes.changes.count(refused), 0u);
  EXPECT_EQ(changes.changes.count("clusters/a/default/configmaps/b.yaml"), 1u);
  ASSERT_EQ(changes.refused.size(), 1u);
  EXPECT_EQ(changes.refused[0].key.name, "a");
  EXPECT_NE(changes.refused[0].status.message().find(refused), absl::string_view::npos);
  EXPECT_EQ(RefusalReasonOf(changes.refused[0].status),
            reverser::v1::REFUSAL_REASON_COMMIT_REFUSED);
  EXPECT_TRUE(changes.swept.empty());

  auto unparsable = IdentityIndex::ReadDocuments("key: [unclosed\n");
  ASSERT_TRUE(unparsable.ok()) << "not refused: " << unparsable.status();
  EXPECT_FALSE(unparsable->has_value());
}

TEST_F(BranchWorkerTest, UnsafeNamesAreRejectedWithoutWriting) {
  auto worker = MakeWorker();
  auto config = Config(remote_, 0);
  worker->Add(EventItem(config, Event(config, ConfigMaps(), reverser::v1::OPERATION_CREATE,
                                      "default", "..", "1", 10)));
  worker->Add(EventItem(config, Event(config, ConfigMaps(), reverser::v1::OPERATION_CREATE,
                                      "Not_A_Namespace", "x", "1", 11)));
  worker->PushIfDue();
  EXPECT_EQ(Subjects().size(), 1u);
  auto refusals = sink_->refusals();
  ASSERT_EQ(refusals.size(), 2u);
  EXPECT_EQ(refusals[0].reason(), reverser::v1::REFUSAL_REASON_UNSAFE_IDENTITY);
  EXPECT_EQ(refusals[0].object().name(), "..");
  EXPECT_EQ(refusals[1].reason(), reverser::v1::REFUSAL_REASON_UNSAFE_IDENTITY);
  EXPECT_EQ(refusals[1].object().namespace_(), "Not_A_Namespace");
  EXPECT_EQ(sink_->AckedRv(ConfigMaps()), 11u);
}

// The acceptance gate (docs/behaviour.md, Acceptance gate): a hand-pushed duplicate refuses the
// whole write of the target — nothing committed, nothing acked, the GitTarget told — and the
// held writes land once a second hand commit removes it.
TEST_F(BranchWorkerTest, AHandPushedDuplicateRefusesThePathUntilAPersonRemovesIt) {
  auto worker = MakeWorker();
  auto config = Config(remote_, 0);
  worker->Add(EventItem(config, Event(config, ConfigMaps(), reverser::v1::OPERATION_CREATE,
                                      "default", "a", "1", 10)));
  worker->PushIfDue();
  ASSERT_EQ(sink_->AckedRv(ConfigMaps()), 10u);
  const auto pushed_at = worker->Status().last_push();

  auto clone = testing::CloneRepo(remote_, dir_.path());
  ASSERT_TRUE(clone.ok()) << clone.status();
  std::filesystem::create_directories(*clone + "/clusters/a/hand");
  ASSERT_TRUE(testing::WriteFile(*clone + "/clusters/a/hand/dup.yaml",
                                 "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n"
                                 "  namespace: default\ndata:\n  key: hand\n")
                  .ok());
  ASSERT_TRUE(testing::CommitAndPush(*clone, "hand duplicate").ok());

  worker->Add(EventItem(config, Event(config, ConfigMaps(), reverser::v1::OPERATION_UPDATE,
                                      "default", "a", "2", 11)));
  worker->PushIfDue();
  EXPECT_EQ(Subjects().front(), "hand duplicate") << "nothing committed for the refused path";
  EXPECT_EQ(sink_->AckedRv(ConfigMaps()), 10u) << "held writes are not acked";
  auto refusals = sink_->path_refusals();
  ASSERT_FALSE(refusals.empty());
  const reverser::v1::PathRefusal& refused = refusals.back();
  EXPECT_EQ(refused.target().name(), config.target().name());
  EXPECT_EQ(refused.path(), "clusters/a");
  EXPECT_EQ(refused.reason(), "UnsupportedContent");
  EXPECT_EQ(refused.message(),
            "Git path refused at clusters/a: duplicate: ConfigMap default/a in "
            "clusters/a/default/configmaps/a.yaml and clusters/a/hand/dup.yaml");
  ASSERT_EQ(refused.issues_size(), 1);
  EXPECT_EQ(refused.issues(0).kind(), "duplicate");
  EXPECT_EQ(refused.issue_count(), 1u);
  EXPECT_EQ(
      metrics_.GetCounter("reverser_gitworker_path_refusals_total", "", {{"kind", "duplicate"}})
          .Value(),
      1);
  EXPECT_EQ(worker->Status().last_error(), refused.message());
  // The remote is looked at again at the retry cadence, not in a loop.
  ASSERT_TRUE(worker->NextPushAt().has_value());
  EXPECT_GE(*worker->NextPushAt(), clock_.Now() + absl::Seconds(1));

  // A racing live event for the refused path is never written either; the stream is told once.
  worker->Add(EventItem(config, Event(config, ConfigMaps(), reverser::v1::OPERATION_CREATE,
                                      "default", "b", "1", 12)));
  worker->PushIfDue();
  EXPECT_THAT(Files(), Not(Contains("clusters/a/default/configmaps/b.yaml")));
  EXPECT_EQ(sink_->AckedRv(ConfigMaps()), 10u);
  EXPECT_EQ(sink_->path_refusals().size(), refusals.size());
  clock_.Advance(absl::Seconds(5));
  worker->PushIfDue(/*force=*/true);  // a recheck while only held writes wait pushes nothing
  EXPECT_EQ(worker->Status().last_push().seconds(), pushed_at.seconds())
      << "the branch's last push is the last one that moved it";

  // A person removes the duplicate: the next cycle sees the branch moved and the path clean.
  ASSERT_TRUE(testing::Git(*clone, {"rm", "-q", "clusters/a/hand/dup.yaml"}).ok());
  ASSERT_TRUE(testing::CommitAndPush(*clone, "remove the duplicate").ok());
  clock_.Advance(absl::Seconds(1));
  worker->PushIfDue();
  EXPECT_EQ(sink_->AckedRv(ConfigMaps()), 12u);
  auto a = testing::ShowFile(remote_, "main", "clusters/a/default/configmaps/a.yaml");
  ASSERT_TRUE(a.ok());
  EXPECT_NE(a->find("key: \"2\""), std::string::npos) << *a;
  EXPECT_THAT(Files(), Contains("clusters/a/default/configmaps/b.yaml"));
  EXPECT_THAT(Subjects(), Contains("remove the duplicate"));
  ASSERT_FALSE(sink_->path_refusals().empty());
  EXPECT_EQ(sink_->path_refusals().back().issue_count(), 0u) << "the refusal ends";
  EXPECT_EQ(worker->Status().last_error(), "");
  ExpectFsckClean();
}

TEST_F(BranchWorkerTest, AnIgnorePatternShadowingAManagedPathRefusesTheWrite) {
  auto clone = testing::CloneRepo(remote_, dir_.path());
  ASSERT_TRUE(clone.ok()) << clone.status();
  std::filesystem::create_directories(*clone + "/clusters/a");
  ASSERT_TRUE(
      testing::WriteFile(*clone + "/clusters/a/.gittargetignore", "default/configmaps/\n").ok());
  ASSERT_TRUE(testing::CommitAndPush(*clone, "ignore configmaps").ok());

  auto worker = MakeWorker();
  const auto refused = CreateHeldByTheGate(*worker);
  EXPECT_EQ(refused.reason(), "IgnoreShadowsManagedPath");
  EXPECT_EQ(refused.message(),
            "Git path refused at clusters/a: ignore-shadows-managed: clusters/a/.gittargetignore "
            "hides clusters/a/default/configmaps/a.yaml, which reverser writes");

  // A pattern that would hide every manifest refuses the path, naming the line.
  ASSERT_TRUE(testing::WriteFile(*clone + "/clusters/a/.gittargetignore", "# all\n*.yaml\n").ok());
  ASSERT_TRUE(testing::CommitAndPush(*clone, "ignore everything").ok());
  clock_.Advance(absl::Seconds(1));
  worker->PushIfDue();
  const auto invalid = sink_->path_refusals().back();
  EXPECT_EQ(invalid.reason(), "IgnoreShadowsManagedPath");
  EXPECT_EQ(invalid.issues(0).kind(), "invalid-ignore");
  EXPECT_NE(invalid.message().find("clusters/a/.gittargetignore line 2: "), std::string::npos)
      << invalid.message();
  EXPECT_EQ(sink_->AckedRv(ConfigMaps()), 0u);
}

// What the gate reads from the tree itself: a non-YAML file and a kustomization's text.
TEST_F(BranchWorkerTest, AForeignFileAndAnUnsupportedKustomizationRefuseThePathUntilFixed) {
  auto clone = testing::CloneRepo(remote_, dir_.path());
  ASSERT_TRUE(clone.ok()) << clone.status();
  std::filesystem::create_directories(*clone + "/clusters/a");
  ASSERT_TRUE(testing::WriteFile(*clone + "/clusters/a/notes.txt", "hand-written\n").ok());
  ASSERT_TRUE(testing::WriteFile(*clone + "/clusters/a/kustomization.yaml",
                                 "configMapGenerator:\n  - name: c\n    literals: [a=b]\n")
                  .ok());
  ASSERT_TRUE(testing::CommitAndPush(*clone, "notes and a generator").ok());

  auto worker = MakeWorker();
  const auto refused = CreateHeldByTheGate(*worker);
  EXPECT_EQ(refused.reason(), "UnsupportedContent");
  EXPECT_EQ(refused.message(),
            "Git path refused at clusters/a: unsupported-kustomize: clusters/a/kustomization.yaml "
            "uses configMapGenerator, which reverser does not model (and 1 more issue(s))");
  ASSERT_EQ(refused.issues_size(), 2);
  EXPECT_EQ(refused.issues(1).text(),
            "foreign-file: clusters/a/notes.txt is no .yaml/.yml file (to keep it, name it in "
            "clusters/a/.gittargetignore)");

  // A person names the notes in .gittargetignore and keeps only resources: the write lands.
  ASSERT_TRUE(testing::WriteFile(*clone + "/clusters/a/.gittargetignore", "notes.txt\n").ok());
  ASSERT_TRUE(
      testing::WriteFile(*clone + "/clusters/a/kustomization.yaml", "resources: []\n").ok());
  ASSERT_TRUE(testing::CommitAndPush(*clone, "accept the notes, drop the generator").ok());
  clock_.Advance(absl::Seconds(1));
  worker->PushIfDue();
  EXPECT_EQ(sink_->AckedRv(ConfigMaps()), 10u);
  EXPECT_THAT(Files(), Contains("clusters/a/default/configmaps/a.yaml"));
  EXPECT_THAT(Files(), Contains("clusters/a/notes.txt"));
  EXPECT_EQ(sink_->path_refusals().back().issue_count(), 0u) << "the refusal ends";
}

TEST_F(BranchWorkerTest, IgnoredFilesAreNeverReadSweptOrWritten) {
  const std::string ghost =
      "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ghost\n  namespace: default\n";
  auto clone = testing::CloneRepo(remote_, dir_.path());
  ASSERT_TRUE(clone.ok()) << clone.status();
  std::filesystem::create_directories(*clone + "/clusters/a/legacy");
  ASSERT_TRUE(testing::WriteFile(*clone + "/clusters/a/.gittargetignore",
                                 "# kept by hand\nlegacy/\nREADME.md\n")
                  .ok());
  ASSERT_TRUE(testing::WriteFile(*clone + "/clusters/a/legacy/ghost.yaml", ghost).ok());
  ASSERT_TRUE(testing::WriteFile(*clone + "/clusters/a/legacy/values.yaml", "plain: 1\n").ok());
  ASSERT_TRUE(testing::WriteFile(*clone + "/clusters/a/legacy/broken.yaml", "a: [\n").ok());
  ASSERT_TRUE(testing::CommitAndPush(*clone, "legacy files").ok());

  auto worker = MakeWorker();
  auto config = Config(remote_, 0);
  worker->Add(ResyncItem(
      config, Snapshot(config, ConfigMaps(), {Object(ConfigMaps(), "default", "a", "1")}, 100)));
  worker->PushIfDue();
  EXPECT_TRUE(sink_->path_refusals().empty());
  EXPECT_EQ(sink_->AckedRv(ConfigMaps()), 100u);
  auto files = Files();
  EXPECT_THAT(files, Contains("clusters/a/default/configmaps/a.yaml"));
  EXPECT_THAT(files, Contains("clusters/a/legacy/ghost.yaml")) << "an ignored file is not swept";
  EXPECT_THAT(files, Not(Contains("clusters/a/README.md"))) << "an ignored bootstrap file";
  auto kept = testing::ShowFile(remote_, "main", "clusters/a/legacy/ghost.yaml");
  ASSERT_TRUE(kept.ok());
  EXPECT_EQ(*kept, ghost);
  auto diff = Git(remote_, {"show", "--name-only", "--format=", "main"});
  ASSERT_TRUE(diff.ok());
  EXPECT_EQ(diff->find("legacy"), std::string::npos) << *diff;
  ExpectFsckClean();
}

}  // namespace
}  // namespace reverser::gitworker
