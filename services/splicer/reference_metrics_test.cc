// The splicer binary's reference metrics, read from its /metrics: author facts matched for live
// events, streams resumed from their delivery cursor, and the running streams. A real
// redis-server holds the materialization and the facts; the gitworker is a peer over real gRPC
// that acks each delivery as pushed the moment it arrives.

#include <grpcpp/grpcpp.h>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "libs/redisstore/author_fact_store.h"
#include "libs/redisstore/materialization_store.h"
#include "libs/redisstore/test_redis.h"
#include "services/splicer/test_support.h"
#include "tests/fixtures/metrics_text.h"
#include "tests/fixtures/process.h"
#include "tests/fixtures/redis_server.h"
#include "tests/fixtures/service_process.h"
#include "tests/fixtures/temp_dir.h"

namespace reverser::splicer {
namespace {

using testing::MetricSample;
using testing::MetricSum;

constexpr char kTargetsJson[] = R"({"upserted": [{
  "target": {"namespace": "metrics", "name": "mirror", "uid": "metrics-target"},
  "types": [{
    "type": {"gvk": {"version": "v1", "kind": "ConfigMap"},
             "gvr": {"version": "v1", "resource": "configmaps"},
             "scope": "RESOURCE_SCOPE_NAMESPACED"},
    "namespaces": {"metrics": {"all": true}}}]}]})";

constexpr char kCursorResumed[] =
    "gitopsreverser_target_reconcile_completed_total{gittarget_namespace=\"metrics\","
    "gittarget_name=\"mirror\",trigger=\"cursor_resume\"}";
constexpr char kMatched[] = "gitopsreverser_attribution_fact_events_total{op=\"matched\"}";

class SplicerReferenceMetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto redis = testing::RedisServer::Start();
    ASSERT_TRUE(redis.ok()) << redis.status();
    redis_ = std::move(*redis);
    auto conn = redisstore::ConnectTo(*redis_);
    ASSERT_TRUE(conn.ok()) << conn.status();
    conn_ = std::move(*conn);
    store_ = std::make_unique<redisstore::MaterializationStore>(
        conn_.get(), redisstore::KeyPrefix::Default(),
        core::GroupVersionResource{"", "v1", "configmaps"}, core::WatchScope::Namespace("metrics"));
    facts_ = std::make_unique<redisstore::AuthorFactStore>(conn_.get(),
                                                           redisstore::KeyPrefix::Default());
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &peer_port_);
    builder.RegisterService(&peer_);
    server_ = builder.BuildAndStart();
    ASSERT_TRUE(server_);
    targets_file_ = dir_.path() + "/targets.json";
    ASSERT_TRUE(testing::WriteFile(targets_file_, kTargetsJson).ok());
  }

  void TearDown() override {
    splicer_.reset();
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(200));
  }

  void StartSplicer() {
    auto splicer = testing::ServiceProcess::Start(
        "splicer", testing::RunfilePath("services/splicer/splicer"),
        {"--redis_address=" + redis_->address(),
         absl::StrCat("--gitworker_address=127.0.0.1:", peer_port_),
         "--targets_file=" + targets_file_, "--attribution_grace=1s"});
    ASSERT_TRUE(splicer.ok()) << splicer.status();
    splicer_ = std::move(*splicer);
  }

  std::string Metrics() {
    auto metrics = splicer_->HttpGet("/metrics");
    return metrics.ok() ? metrics->second : "";
  }

  // Polls /metrics until `done` holds for it; the last text read.
  std::string MetricsOnce(const std::function<bool(const std::string&)>& done) {
    std::string text;
    EXPECT_TRUE(testing::WaitFor(
        [&] {
          text = Metrics();
          return done(text);
        },
        absl::Seconds(20)))
        << text << splicer_->Logs();
    return text;
  }

  // The persisted delivery cursor's position ("" when none).
  std::string Cursor() {
    auto v = redis_->Cli({"GET", "reverser:splice:v1:metrics-target:configmaps:ns:metrics:acked"});
    if (!v.ok()) return "";
    std::string text(absl::StripTrailingAsciiWhitespace(*v));
    return text.substr(0, text.find('@'));
  }

  void RecordFact(const std::string& name, int rv, const std::string& author) {
    redisstore::AuthorFact fact;
    fact.group_resource = "configmaps";
    fact.namespace_ = "metrics";
    fact.name = name;
    fact.uid = "uid-" + name;
    fact.author = author;
    fact.verb = "update";
    fact.resource_version = std::to_string(rv);
    ASSERT_TRUE(facts_->Record(fact).ok());
  }

  testing::ScopedTempDir dir_{"splicer-metrics"};
  std::unique_ptr<testing::RedisServer> redis_;
  std::unique_ptr<redisstore::RedisConnection> conn_;
  std::unique_ptr<redisstore::MaterializationStore> store_;
  std::unique_ptr<redisstore::AuthorFactStore> facts_;
  testutil::AckingGitWorker peer_;
  int peer_port_ = 0;
  std::unique_ptr<grpc::Server> server_;
  std::string targets_file_;
  std::unique_ptr<testing::ServiceProcess> splicer_;
};

TEST_F(SplicerReferenceMetricsTest, MatchedFactsAndCursorResumesAreCounted) {
  ASSERT_TRUE(
      store_
          ->ReplaceCheckpoint({{"metrics/a", testutil::ConfigMapJson("metrics", "a", "1", 5)}},
                              core::StreamPosition::EndOf(5))
          .ok());
  StartSplicer();
  // The first session has no cursor: it splices and sends a resync, no resume.
  ASSERT_TRUE(testing::WaitFor([&] { return !Cursor().empty(); }, absl::Seconds(20)))
      << splicer_->Logs();
  std::string text = MetricsOnce(
      [](const std::string& t) { return MetricSample(t, "reverser_splicer_streams").has_value(); });
  EXPECT_EQ(MetricSample(text, "reverser_splicer_streams"), 1);
  EXPECT_EQ(MetricSample(text, kCursorResumed), std::nullopt) << text;
  EXPECT_EQ(MetricSample(text, kMatched), std::nullopt);

  // An event whose author fact is in Redis: matched once.
  RecordFact("b", 6, "alice");
  ASSERT_TRUE(store_->Append(testutil::ConfigMapEntry("metrics", "b", "1", 6)).ok());
  text = MetricsOnce([](const std::string& t) { return MetricSample(t, kMatched) == 1; });
  EXPECT_EQ(
      MetricSum(text, "gitopsreverser_attribution_resolutions_total", {"result=\"exact_user\""}),
      1);
  // One without a fact: resolved absent after the grace, nothing matched.
  ASSERT_TRUE(store_->Append(testutil::ConfigMapEntry("metrics", "c", "1", 7)).ok());
  text = MetricsOnce([](const std::string& t) {
    return MetricSum(t, "gitopsreverser_attribution_resolutions_total", {"result=\"absent\""}) == 1;
  });
  EXPECT_EQ(MetricSample(text, kMatched), 1);
  ASSERT_TRUE(testing::WaitFor([&] { return Cursor() == "7-0"; }, absl::Seconds(20))) << Cursor();

  // A restarted splicer resumes from the persisted cursor: one cursor_resume for the stream.
  auto stopped = splicer_->process().Terminate();
  ASSERT_TRUE(stopped.ok()) << stopped.status();
  StartSplicer();
  text = MetricsOnce([](const std::string& t) { return MetricSample(t, kCursorResumed) == 1; });
  EXPECT_EQ(MetricSum(text, "reverser_splicer_resyncs_total"), 0) << "resumed without a resync";
}

}  // namespace
}  // namespace reverser::splicer
