// The gitworker binary's reference metrics, read from its /metrics: resyncs applied and failed,
// live events committed, and Secret encryption. A splicer-like client on GitWorker.Deliver, real
// bare remotes, the `age` CLI for a real recipient.

#include <gtest/gtest.h>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "services/gitworker/test_support.h"
#include "tests/fixtures/git_repos.h"
#include "tests/fixtures/metrics_text.h"
#include "tests/fixtures/process.h"
#include "tests/fixtures/service_process.h"
#include "tests/fixtures/temp_dir.h"

namespace reverser::gitworker {
namespace {

using namespace ::reverser::gitworker::testsupport;  // NOLINT
using ::reverser::testing::MetricSample;

constexpr absl::Duration kWait = absl::Seconds(30);

std::string Completed(const std::string& target) {
  return absl::StrCat(
      "gitopsreverser_target_reconcile_completed_total{gittarget_namespace=\"team\","
      "gittarget_name=\"",
      target, "\",trigger=\"type_reconcile\"}");
}

std::string Failed(const std::string& target) {
  return absl::StrCat(
      "gitopsreverser_resync_background_failures_total{gittarget_namespace=\"team\","
      "gittarget_name=\"",
      target, "\"}");
}

class GitWorkerReferenceMetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto remote = testing::CreateBareRemote(dir_.path());
    ASSERT_TRUE(remote.ok()) << remote.status();
    remote_ = *remote;
    auto service = testing::ServiceProcess::Start(
        "gitworker", testing::RunfilePath("services/gitworker/gitworker"),
        {"--work_dir=" + dir_.path() + "/work", "--push_cooldown=0s"});
    ASSERT_TRUE(service.ok()) << service.status();
    service_ = std::move(*service);
    ASSERT_EQ(service_->WaitReady(), absl::OkStatus());
  }

  std::string Metrics() {
    auto metrics = service_->HttpGet("/metrics");
    EXPECT_TRUE(metrics.ok()) << metrics.status();
    return metrics.ok() ? metrics->second : "";
  }

  // Polls /metrics until `done` holds; the last text read.
  std::string MetricsOnce(const std::function<bool(const std::string&)>& done) {
    std::string text;
    EXPECT_TRUE(testing::WaitFor(
        [&] {
          text = Metrics();
          return done(text);
        },
        kWait))
        << text << service_->Logs();
    return text;
  }

  // An age recipient whose identity the `age` CLI holds.
  std::string Recipient() {
    auto keygen = testing::RunCommand({"age-keygen"});
    EXPECT_TRUE(keygen.ok() && keygen->exit_code == 0);
    const std::string key_file = dir_.path() + "/age.txt";
    EXPECT_TRUE(testing::WriteFile(key_file, keygen.ok() ? keygen->out : "").ok());
    auto recipient = testing::RunCommand({"age-keygen", "-y", key_file});
    EXPECT_TRUE(recipient.ok() && recipient->exit_code == 0);
    return recipient.ok() ? std::string(absl::StripAsciiWhitespace(recipient->out)) : "";
  }

  testing::ScopedTempDir dir_{"gitworker-metrics"};
  std::string remote_;
  std::unique_ptr<testing::ServiceProcess> service_;
};

TEST_F(GitWorkerReferenceMetricsTest, AppliedResyncsAndCommittedEventsAreCounted) {
  auto config = Config(remote_, 0);
  DeliveryClient client(service_->grpc_target());
  client.SendConfig(config);
  client.SendResync(Snapshot(
      config, ConfigMaps(),
      {Object(ConfigMaps(), "default", "a", "1"), Object(ConfigMaps(), "default", "b", "2")}, 100));
  client.SendEvent(Event(config, ConfigMaps(), reverser::v1::OPERATION_UPDATE, "default", "a",
                         "changed", 101, "alice"));
  client.SendEvent(Event(config, ConfigMaps(), reverser::v1::OPERATION_DELETE, "default", "b", "",
                         102, "alice"));
  ASSERT_TRUE(testing::WaitFor([&] { return client.AckedRv(ConfigMaps()) == 102; }, kWait))
      << service_->Logs();
  std::string text = Metrics();
  EXPECT_EQ(MetricSample(text, Completed("tgt")), 1) << text;
  EXPECT_EQ(MetricSample(text, Failed("tgt")), std::nullopt);
  // The reference counts the live events of each commit, not libgit2 calls.
  EXPECT_EQ(MetricSample(text, "gitopsreverser_git_operations_total"), 2);
  EXPECT_EQ(MetricSample(text, "reverser_gitworker_git_operations_total{operation=\"commit\"}"), 3);

  // The same resync again changes nothing: applied all the same. Events that commit nothing
  // (already in Git) are no Git work.
  client.SendResync(
      Snapshot(config, ConfigMaps(), {Object(ConfigMaps(), "default", "a", "changed")}, 103));
  client.SendEvent(Event(config, ConfigMaps(), reverser::v1::OPERATION_UPDATE, "default", "a",
                         "changed", 104, "alice"));
  ASSERT_TRUE(testing::WaitFor([&] { return client.AckedRv(ConfigMaps()) == 104; }, kWait));
  text = Metrics();
  EXPECT_EQ(MetricSample(text, Completed("tgt")), 2) << text;
  EXPECT_EQ(MetricSample(text, "gitopsreverser_git_operations_total"), 2);
}

TEST_F(GitWorkerReferenceMetricsTest, ResyncFailuresAreCountedOncePerResync) {
  // A remote that is not there yet: the resync is pending while every cycle fails.
  const std::string later = dir_.path() + "/later.git";
  auto config = Config(later, 0, "clusters/a", "late");
  config.mutable_destination()->set_provider_name("later");  // a branch worker of its own
  DeliveryClient client(service_->grpc_target());
  client.SendConfig(config);
  client.SendResync(
      Snapshot(config, ConfigMaps(), {Object(ConfigMaps(), "default", "a", "1")}, 100));
  std::string text =
      MetricsOnce([](const std::string& t) { return MetricSample(t, Failed("late")) == 1; });
  EXPECT_EQ(MetricSample(text, Completed("late")), std::nullopt);
  // Once the remote exists the same resync lands: applied, and still counted failed once.
  auto created = testing::CreateBareRemote(dir_.path(), "later.git");
  ASSERT_TRUE(created.ok()) << created.status();
  ASSERT_TRUE(testing::WaitFor([&] { return client.AckedRv(ConfigMaps(), "late") == 100; }, kWait))
      << service_->Logs();
  text = Metrics();
  EXPECT_EQ(MetricSample(text, Completed("late")), 1) << text;
  EXPECT_EQ(MetricSample(text, Failed("late")), 1);

  // A resync whose commit the tree refuses (a file where its directory must go) fails and is
  // not applied.
  auto human = testing::CloneRepo(remote_, dir_.path(), "human");
  ASSERT_TRUE(human.ok()) << human.status();
  ASSERT_TRUE(testing::WriteFile(*human + "/clusters/b", "a file, not a directory\n").ok());
  ASSERT_TRUE(testing::CommitAndPush(*human, "a file in the way").ok());
  auto blocked = Config(remote_, 0, "clusters/b", "blocked");
  client.SendConfig(blocked);
  client.SendResync(
      Snapshot(blocked, ConfigMaps(), {Object(ConfigMaps(), "default", "a", "1")}, 200));
  ASSERT_TRUE(
      testing::WaitFor([&] { return client.AckedRv(ConfigMaps(), "blocked") == 200; }, kWait))
      << service_->Logs();
  text = Metrics();
  EXPECT_EQ(MetricSample(text, Failed("blocked")), 1) << text;
  EXPECT_EQ(MetricSample(text, Completed("blocked")), std::nullopt);
}

TEST_F(GitWorkerReferenceMetricsTest, SecretEncryptionIsCountedAsTheReference) {
  auto config = Config(remote_, 0);
  config.add_age_recipients(Recipient());
  const auto secrets = Claim("", "v1", "secrets", "Secret");
  auto secret = [&](const std::string& value) {
    reverser::v1::ObjectBody object = Object(secrets, "default", "s", value);
    object.set_sensitive(true);
    return object;
  };
  DeliveryClient client(service_->grpc_target());
  client.SendConfig(config);
  client.SendResync(Snapshot(config, secrets, {secret("aHVudGVyMg==")}, 100));
  ASSERT_TRUE(testing::WaitFor([&] { return client.AckedRv(secrets) == 100; }, kWait))
      << service_->Logs();
  std::string text = Metrics();
  EXPECT_EQ(MetricSample(text, "gitopsreverser_secret_encryption_attempts_total"), 1) << text;
  EXPECT_EQ(MetricSample(text, "gitopsreverser_secret_encryption_success_total"), 1);
  EXPECT_EQ(MetricSample(text, "gitopsreverser_secret_encryption_cache_hits_total"), std::nullopt);

  // Unchanged: its encrypted file is reused (a cache hit and a marker skip), nothing encrypted.
  client.SendResync(Snapshot(config, secrets, {secret("aHVudGVyMg==")}, 101));
  ASSERT_TRUE(testing::WaitFor([&] { return client.AckedRv(secrets) == 101; }, kWait));
  text = Metrics();
  EXPECT_EQ(MetricSample(text, "gitopsreverser_secret_encryption_attempts_total"), 1) << text;
  EXPECT_EQ(MetricSample(text, "gitopsreverser_secret_encryption_cache_hits_total"), 1);
  EXPECT_EQ(MetricSample(text, "gitopsreverser_secret_encryption_marker_skips_total"), 1);

  // Changed: encrypted again.
  auto changed = Event(config, secrets, reverser::v1::OPERATION_UPDATE, "default", "s", "c2VjcmV0",
                       102, "alice");
  changed.mutable_object()->set_sensitive(true);
  client.SendEvent(changed);
  ASSERT_TRUE(testing::WaitFor([&] { return client.AckedRv(secrets) == 102; }, kWait));
  text = Metrics();
  EXPECT_EQ(MetricSample(text, "gitopsreverser_secret_encryption_attempts_total"), 2) << text;
  EXPECT_EQ(MetricSample(text, "gitopsreverser_secret_encryption_success_total"), 2);
  EXPECT_EQ(MetricSample(text, "gitopsreverser_secret_encryption_failures_total"), std::nullopt);

  // A recipient that is no age key: the encryption fails and the Secret is refused.
  auto broken = Config(remote_, 0, "clusters/enc", "tgt-enc");
  broken.add_age_recipients("age1notarecipient");
  client.SendConfig(broken);
  auto refused =
      Event(broken, secrets, reverser::v1::OPERATION_CREATE, "default", "s", "aHVudGVyMg==", 103);
  refused.mutable_object()->set_sensitive(true);
  client.SendEvent(refused);
  ASSERT_TRUE(testing::WaitFor([&] { return client.AckedRv(secrets, "tgt-enc") == 103; }, kWait));
  text = Metrics();
  EXPECT_EQ(MetricSample(text, "gitopsreverser_secret_encryption_failures_total"), 1) << text;
  EXPECT_EQ(MetricSample(text, "gitopsreverser_secret_encryption_attempts_total"), 3);
  EXPECT_EQ(MetricSample(text, "gitopsreverser_secret_encryption_success_total"), 2);
}

}  // namespace
}  // namespace reverser::gitworker
