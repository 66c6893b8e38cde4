// `--intake=audit` against real parts: kube-sim auditing (RequestResponse) to the materializer's
// audit webhook over real HTTP, a real redis-server, and for the binary test the real process,
// its gRPC admin API and reverserctl.

#include <grpcpp/grpcpp.h>

#include <map>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "libs/kube/config.h"
#include "libs/kube/httplib_transport.h"
#include "libs/redisstore/materialization_store.h"
#include "proto/reverser/v1/materializer.grpc.pb.h"
#include "services/materializer/audit_stream_writer.h"
#include "services/materializer/audit_webhook.h"
#include "services/materializer/claim_registry.h"
#include "services/materializer/redis_fact_sink.h"
#include "services/materializer/type_materializer.h"
#include "tests/fixtures/process.h"
#include "tests/fixtures/redis_server.h"
#include "tests/fixtures/service_process.h"
#include "tests/fixtures/temp_dir.h"
#include "tools/kube-sim/kube_sim.h"
#include "libs/redisstore/test_redis.h"

namespace reverser::materializer {
namespace {

using nlohmann::json;

const core::GroupVersionResource kConfigMaps{"", "v1", "configmaps"};
const core::GroupVersionResource kPods{"", "v1", "pods"};
const core::WatchScope kTeam = core::WatchScope::Namespace("team");

redisstore::KeyPrefix Prefix(const std::string& text) {
  auto prefix = redisstore::KeyPrefix::Parse(text);
  EXPECT_TRUE(prefix.ok());
  return prefix.ok() ? *prefix : redisstore::KeyPrefix::Default();
}

kubesim::AuditWebhookOptions AuditTo(int port) {
  kubesim::AuditWebhookOptions audit;
  audit.url = absl::StrCat("http://127.0.0.1:", port, "/audit-webhook");
  audit.max_wait = absl::Milliseconds(10);  // flush at once: tests wait for idle, not for time
  audit.initial_backoff = absl::Milliseconds(50);
  audit.backoff_steps = 20;
  return audit;
}

class AuditIntakeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto redis = testing::RedisServer::Start();
    ASSERT_TRUE(redis.ok()) << redis.status();
    redis_ = std::move(*redis);
  }

  void TearDown() override {
    workers_.clear();
    client_.reset();  // its keep-alive connection would hold kube-sim's shutdown
    sim_.reset();     // flushes audit to the webhook before it goes
    if (webhook_) webhook_->Stop();
  }

  redisstore::RedisOptions RedisOpts() { return redisstore::RedisOptionsFor(*redis_); }

  // The audit webhook (facts + stream entries under `prefix`), then kube-sim auditing to it.
  void StartStack(kubesim::AuditLevel level = kubesim::AuditLevel::kRequestResponse,
                  const std::string& prefix = "reverser") {
    fact_sink_ = std::make_unique<RedisFactSink>(RedisOpts(), Prefix(prefix), absl::Minutes(15));
    writer_ = std::make_unique<AuditStreamWriter>(RedisOpts(), Prefix(prefix), &claims_, &metrics_);
    intake_ = std::make_unique<AuditIntake>(fact_sink_.get(), &metrics_, writer_.get());
    AuditWebhookOptions options;
    options.listen_address = "127.0.0.1";
    options.port = 0;
    options.insecure = true;
    webhook_ = std::make_unique<AuditWebhookServer>(options, intake_.get());
    auto port = webhook_->Start();
    ASSERT_TRUE(port.ok()) << port.status();
    kubesim::KubeSimOptions sim_options;
    sim_options.audit_webhook = AuditTo(*port);
    sim_options.audit_policy = kubesim::AuditPolicy::AllAt(level);
    auto sim = kubesim::KubeSim::Start(sim_options);
    ASSERT_TRUE(sim.ok()) << sim.status();
    sim_ = std::move(*sim);
    auto config = kube::ParseKubeconfig(sim_->Kubeconfig(), "");
    ASSERT_TRUE(config.ok()) << config.status();
    auto client = kube::NewHttplibRestClient(*config);
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = *client;
    ASSERT_EQ(sim_->Call("POST", "/api/v1/namespaces", R"({"metadata":{"name":"team"}})").status, 201);
  }

  TypeMaterializer& StartWorker(const core::GroupVersionResource& gvr, Intake intake,
                                const std::string& prefix = "reverser",
                                absl::Duration relist = absl::Hours(1),
                                bool early_relists = false,
                                absl::Duration heal_settle = absl::ZeroDuration(),
                                absl::Duration state_check = absl::Seconds(5)) {
    TypeMaterializerOptions o;
    o.heal_settle = heal_settle;
    o.state_check_interval = state_check;
    if (early_relists) {
      o.relist_requests = &claims_;
      o.relist_request_poll = absl::Milliseconds(10);
      o.relist_request_min_gap = absl::ZeroDuration();
    }
    o.gvr = gvr;
    o.scope = kTeam;
    o.redis = RedisOpts();
    o.prefix = Prefix(prefix);
    o.intake = intake;
    o.relist_interval = relist;
    workers_.push_back(std::make_unique<TypeMaterializer>(client_, o, &metrics_));
    workers_.back()->Start();
    return *workers_.back();
  }

  static bool Streaming(const TypeMaterializer& worker) {
    return worker.Status().phase == "Streaming";
  }

  void PutConfigMap(const std::string& name, const std::string& value,
                    const std::map<std::string, std::string>& labels = {}) {
    std::string path = "/api/v1/namespaces/team/configmaps/" + name;
    json body = {{"apiVersion", "v1"},
                 {"kind", "ConfigMap"},
                 {"metadata", {{"name", name}, {"namespace", "team"}}},
                 {"data", {{"k", value}}}};
    if (!labels.empty()) body["metadata"]["labels"] = labels;
    if (sim_->Call("GET", path).status == 404) {
      ASSERT_EQ(sim_->Call("POST", "/api/v1/namespaces/team/configmaps", body.dump()).status, 201);
    } else {
      ASSERT_EQ(sim_->Call("PUT", path, body.dump()).status, 200);
    }
  }

  void DeleteConfigMap(const std::string& name) {
    ASSERT_EQ(sim_->Call("DELETE", "/api/v1/namespaces/team/configmaps/" + name).status, 200);
  }

  // Waits until kube-sim has delivered every audit event to the webhook.
  void FlushAudit() { ASSERT_TRUE(sim_->audit()->WaitIdle(absl::Seconds(20))); }

  // identity -> object JSON as the API server has it (managedFields removed), for `gvr`.
  std::map<std::string, std::string> ClusterState(const core::GroupVersionResource& gvr) {
    auto list = json::parse(sim_->Call("GET", "/api/v1/namespaces/team/" + gvr.resource).body);
    std::map<std::string, std::string> out;
    for (auto item : list["items"]) {
      item["metadata"].erase("managedFields");
      out[item["metadata"]["name"].get<std::string>()] = item["metadata"]["resourceVersion"];
    }
    return out;
  }

  // name -> resourceVersion as checkpoint + stream fold to.
  std::map<std::string, std::string> MaterializedState(const core::GroupVersionResource& gvr,
                                                       const std::string& prefix = "reverser") {
    auto conn = redisstore::RedisConnection::Connect(RedisOpts());
    if (!conn.ok()) return {};
    redisstore::MaterializationStore store(conn->get(), Prefix(prefix), gvr, kTeam);
    auto view = store.Load();
    if (!view.ok() || !view->checkpoint.has_value()) return {{"<no checkpoint>", ""}};
    std::map<std::string, std::string> out;
    for (const auto& [identity, body] : view->Fold()) {
      auto object = json::parse(body);
      EXPECT_FALSE(object["metadata"].contains("managedFields"));
      out[object["metadata"]["name"].get<std::string>()] = object["metadata"]["resourceVersion"];
    }
    return out;
  }

  bool Converged(const core::GroupVersionResource& gvr, const std::string& prefix = "reverser") {
    return MaterializedState(gvr, prefix) == ClusterState(gvr);
  }

  std::vector<redisstore::StreamEntry> StreamEntries(const core::GroupVersionResource& gvr,
                                                     const std::string& prefix) {
    auto conn = redisstore::RedisConnection::Connect(RedisOpts());
    EXPECT_TRUE(conn.ok());
    if (!conn.ok()) return {};
    redisstore::MaterializationStore store(conn->get(), Prefix(prefix), gvr, kTeam);
    auto batch = store.ReadAfter(core::StreamPosition::Zero(), 100000);
    EXPECT_TRUE(batch.ok()) << batch.status();
    return batch.ok() ? batch->entries : std::vector<redisstore::StreamEntry>{};
  }

  int WatchRequests() {
    int n = 0;
    for (const auto& line : sim_->RequestLog()) n += absl::StrContains(line, "watch=") ? 1 : 0;
    return n;
  }

  double Metric(absl::string_view series) {
    std::string text = metrics_.RenderText();
    for (absl::string_view line : absl::StrSplit(text, '\n')) {
      if (absl::StartsWith(line, series)) {
        double value = 0;
        if (absl::SimpleAtod(line.substr(series.size()), &value)) return value;
      }
    }
    return 0;
  }

  std::unique_ptr<testing::RedisServer> redis_;
  runtime::MetricsRegistry metrics_;
  ClaimRegistry claims_;
  std::unique_ptr<RedisFactSink> fact_sink_;
  std::unique_ptr<AuditStreamWriter> writer_;
  std::unique_ptr<AuditIntake> intake_;
  std::unique_ptr<AuditWebhookServer> webhook_;
  std::unique_ptr<kubesim::KubeSim> sim_;
  std::shared_ptr<kube::RestClient> client_;
  std::vector<std::unique_ptr<TypeMaterializer>> workers_;
};

TEST_F(AuditIntakeTest, CreateUpdateDeleteAndDeleteCollectionArriveThroughTheAuditLog) {
  StartStack();
  claims_.Replace({{kConfigMaps, kTeam}});
  PutConfigMap("a", "1");
  PutConfigMap("b", "1");
  FlushAudit();  // streamed before the first checkpoint, which then covers (and trims) them
  TypeMaterializer& worker = StartWorker(kConfigMaps, Intake::kAudit);
  ASSERT_TRUE(testing::WaitFor([&] { return Streaming(worker); }, absl::Seconds(20)));
  EXPECT_EQ(worker.Status().relists, 1);
  ASSERT_TRUE(Converged(kConfigMaps));
  const std::string appended =
      "reverser_materializer_audit_entries_total{group=\"\",version=\"v1\","
      "resource=\"configmaps\",outcome=\"appended\"} ";
  const double appended_before = Metric(appended);

  PutConfigMap("c", "1");                      // create
  PutConfigMap("a", "2");                      // update
  ASSERT_EQ(sim_->Call("PATCH", "/api/v1/namespaces/team/configmaps/c", R"({"data":{"k":"3"}})",
                       "application/merge-patch+json")
                .status,
            200);                              // patch
  DeleteConfigMap("b");                        // delete answered with a Status
  PutConfigMap("d", "1", {{"sweep", "yes"}});
  PutConfigMap("e", "1", {{"sweep", "yes"}});
  ASSERT_EQ(sim_->Call("DELETE", "/api/v1/namespaces/team/configmaps?labelSelector=sweep%3Dyes")
                .status,
            200);                              // deletecollection
  FlushAudit();
  ASSERT_TRUE(testing::WaitFor([&] { return Converged(kConfigMaps); }, absl::Seconds(20)))
      << "cluster and materialization differ";
  // Only the audit log delivered those changes: one LIST at start, no watch at all.
  EXPECT_EQ(worker.Status().relists, 1);
  EXPECT_EQ(WatchRequests(), 0);
  std::vector<redisstore::StreamEntry> entries = StreamEntries(kConfigMaps, "reverser");
  std::vector<std::string> ops;
  for (const auto& e : entries) {
    ops.push_back(absl::StrCat(redisstore::ChangeOpName(e.op), " ", e.name));
    EXPECT_EQ(e.source, redisstore::ChangeSource::kAudit);
    EXPECT_FALSE(e.object_json.empty()) << "every entry carries a body, deletes included";
  }
  EXPECT_EQ(ops, (std::vector<std::string>{"ADDED c", "MODIFIED a", "MODIFIED c", "DELETED b",
                                           "ADDED d", "ADDED e", "DELETED d", "DELETED e"}));
  EXPECT_EQ(Metric(appended) - appended_before, 8);
  // The author facts are there too (written before the entries).
  auto facts = redis_->Cli({"--scan", "--pattern", "reverser:author:v1:audit:configmaps:*"});
  ASSERT_TRUE(facts.ok());
  EXPECT_TRUE(absl::StrContains(*facts, ":last")) << *facts;
}

// The same writes materialized twice, by the watch (prefix `watch`) and by the audit log (prefix
// `audit`): the stream entries are the same, position for position, but for `src`.
TEST_F(AuditIntakeTest, AuditEntriesAreTheEntriesTheWatchWrites) {
  StartStack(kubesim::AuditLevel::kRequestResponse, "audit");
  claims_.Replace({{kConfigMaps, kTeam}, {kPods, kTeam}});
  TypeMaterializer& watch_cm = StartWorker(kConfigMaps, Intake::kWatch, "watch");
  TypeMaterializer& watch_pods = StartWorker(kPods, Intake::kWatch, "watch");
  TypeMaterializer& audit_cm = StartWorker(kConfigMaps, Intake::kAudit, "audit");
  TypeMaterializer& audit_pods = StartWorker(kPods, Intake::kAudit, "audit");
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        return Streaming(watch_cm) && Streaming(watch_pods) && Streaming(audit_cm) &&
               Streaming(audit_pods);
      },
      absl::Seconds(20)));
  ASSERT_TRUE(sim_->WaitForActiveWatches(2, absl::Seconds(20)));

  PutConfigMap("x", "1");
  PutConfigMap("x", "2");
  ASSERT_EQ(sim_->Call("PATCH", "/api/v1/namespaces/team/configmaps/x",
                       R"({"metadata":{"labels":{"l":"1"}}})", "application/merge-patch+json")
                .status,
            200);
  PutConfigMap("y", "1", {{"sweep", "yes"}});
  json pod = {{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata", {{"name", "p"}, {"namespace", "team"}}},
              {"spec", {{"containers", {{{"name", "c"}, {"image", "busybox"}}}}}}};
  ASSERT_EQ(sim_->Call("POST", "/api/v1/namespaces/team/pods", pod.dump()).status, 201);
  // A pod's delete answers with the deleted object: its entry is the watch's DELETED exactly.
  ASSERT_EQ(sim_->Call("DELETE", "/api/v1/namespaces/team/pods/p").status, 200);
  ASSERT_EQ(sim_->Call("DELETE", "/api/v1/namespaces/team/configmaps?labelSelector=sweep%3Dyes")
                .status,
            200);
  PutConfigMap("z", "1");
  DeleteConfigMap("z");  // answered with a Status: the one documented difference
  FlushAudit();
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        return Converged(kConfigMaps, "watch") && Converged(kConfigMaps, "audit") &&
               Converged(kPods, "watch") && Converged(kPods, "audit");
      },
      absl::Seconds(20)));

  size_t compared = 0;
  for (const auto& gvr : {kConfigMaps, kPods}) {
    std::vector<redisstore::StreamEntry> by_watch = StreamEntries(gvr, "watch");
    std::vector<redisstore::StreamEntry> by_audit = StreamEntries(gvr, "audit");
    ASSERT_EQ(by_watch.size(), by_audit.size()) << gvr.resource;
    for (size_t i = 0; i < by_watch.size(); ++i) {
      redisstore::StreamEntry from_watch = by_watch[i];
      redisstore::StreamEntry from_audit = by_audit[i];
      EXPECT_EQ(from_watch.source, redisstore::ChangeSource::kWatch);
      EXPECT_EQ(from_audit.source, redisstore::ChangeSource::kAudit);
      if (from_watch.name == "z" && from_watch.op == redisstore::ChangeOp::kDeleted) {
        // No RV and no body in a Status: attached to the stream top, with the last known body.
        EXPECT_EQ(from_audit.op, redisstore::ChangeOp::kDeleted);
        EXPECT_EQ(from_audit.uid, from_watch.uid);
        EXPECT_EQ(from_audit.resource_version, "");
        EXPECT_EQ(from_audit.position.rv(), by_audit[i - 1].position.rv());
        EXPECT_EQ(json::parse(from_audit.object_json)["metadata"]["name"], "z");
        continue;
      }
      from_audit.source = from_watch.source;
      EXPECT_EQ(from_watch, from_audit)
          << gvr.resource << " entry " << i << "\nwatch: " << from_watch.object_json
          << "\naudit: " << from_audit.object_json;
      ++compared;
    }
  }
  // configmaps: x ADDED, MODIFIED, MODIFIED; y ADDED, DELETED; z ADDED. pods: ADDED, DELETED.
  EXPECT_EQ(compared, 8u);
}

TEST_F(AuditIntakeTest, PeriodicListHealsWhatTheAuditLogMissed) {
  // Metadata level: no bodies, so nothing can be streamed from audit; only the LIST helps.
  StartStack(kubesim::AuditLevel::kMetadata);
  claims_.Replace({{kConfigMaps, kTeam}});
  PutConfigMap("a", "1");
  TypeMaterializer& worker =
      StartWorker(kConfigMaps, Intake::kAudit, "reverser", absl::Milliseconds(100));
  ASSERT_TRUE(testing::WaitFor([&] { return Streaming(worker); }, absl::Seconds(20)));
  PutConfigMap("a", "2");
  PutConfigMap("b", "1");
  FlushAudit();
  ASSERT_TRUE(testing::WaitFor([&] { return Converged(kConfigMaps); }, absl::Seconds(20)));
  EXPECT_GE(Metric("reverser_materializer_relists_total{group=\"\",version=\"v1\",resource="
                   "\"configmaps\",scope=\"ns:team\",outcome=\"healed\"} "),
            1);
  EXPECT_GE(Metric("reverser_materializer_audit_entries_total{group=\"\",version=\"v1\","
                   "resource=\"configmaps\",outcome=\"skipped_no_response_body\"} "),
            2);
  // Once healed, further LISTs find nothing to change (and only fold the stream).
  int64_t relists = worker.Status().relists;
  ASSERT_TRUE(testing::WaitFor([&] { return worker.Status().relists >= relists + 2; },
                               absl::Seconds(20)));
  EXPECT_GE(Metric("reverser_materializer_relists_total{group=\"\",version=\"v1\",resource="
                   "\"configmaps\",scope=\"ns:team\",outcome=\"unchanged\"} "),
            1);
}

// Redis lost everything: the audit intake goes on appending (it does not guard), and the
// worker's state check notices the checkpoint is gone and relists at once, replacing it without
// waiting for differences to settle (heal_settle is an hour here).
TEST_F(AuditIntakeTest, LostStateIsRebuiltByTheNextCheckWithoutSettling) {
  StartStack();
  claims_.Replace({{kConfigMaps, kTeam}});
  PutConfigMap("a", "1");
  TypeMaterializer& worker =
      StartWorker(kConfigMaps, Intake::kAudit, "reverser", absl::Hours(1), false, absl::Hours(1),
                  absl::Milliseconds(50));
  ASSERT_TRUE(testing::WaitFor([&] { return Streaming(worker) && Converged(kConfigMaps); },
                               absl::Seconds(20)));
  ASSERT_TRUE(redis_->Cli({"FLUSHALL"}).ok());
  PutConfigMap("b", "1");
  PutConfigMap("a", "2");
  FlushAudit();
  ASSERT_TRUE(testing::WaitFor([&] { return Converged(kConfigMaps); }, absl::Seconds(20)));
  EXPECT_EQ(worker.Status().state_losses, 1);
  EXPECT_EQ(Metric("reverser_materializer_state_lost_total{group=\"\",version=\"v1\",resource="
                   "\"configmaps\",scope=\"ns:team\",reason=\"checkpoint_vanished\"} "),
            1);
  EXPECT_EQ(Metric("reverser_materializer_relists_total{group=\"\",version=\"v1\",resource="
                   "\"configmaps\",scope=\"ns:team\",outcome=\"rebuilt\"} "),
            1);
  // Audit entries after the rebuild land on the new checkpoint as before.
  PutConfigMap("a", "3");
  FlushAudit();
  ASSERT_TRUE(testing::WaitFor([&] { return Converged(kConfigMaps); }, absl::Seconds(20)));
}

TEST_F(AuditIntakeTest, AChangeTheAuditLogCannotCarryBringsTheListForward) {
  StartStack(kubesim::AuditLevel::kMetadata);
  claims_.Replace({{kConfigMaps, kTeam}});
  TypeMaterializer& worker =
      StartWorker(kConfigMaps, Intake::kAudit, "reverser", absl::Hours(1), /*early_relists=*/true);
  ASSERT_TRUE(testing::WaitFor([&] { return Streaming(worker); }, absl::Seconds(20)));
  ASSERT_EQ(worker.Status().relists, 1);
  PutConfigMap("a", "1");  // audited without a body: the intake asks for a LIST
  FlushAudit();
  ASSERT_TRUE(testing::WaitFor([&] { return Converged(kConfigMaps); }, absl::Seconds(20)));
  EXPECT_GE(worker.Status().relists, 2) << "the periodic LIST is an hour away";
}

// A LIST that sees writes whose audit events are still on the way does not replace the
// checkpoint (which would make every reader splice again): the events arrive and fill the gap.
TEST_F(AuditIntakeTest, AListAheadOfTheAuditLogWaitsForItInsteadOfHealing) {
  StartStack();
  claims_.Replace({{kConfigMaps, kTeam}});
  PutConfigMap("a", "1");
  TypeMaterializer& worker = StartWorker(kConfigMaps, Intake::kAudit, "reverser",
                                         absl::Milliseconds(20), /*early_relists=*/false,
                                         /*heal_settle=*/absl::Hours(1));
  ASSERT_TRUE(testing::WaitFor([&] { return Streaming(worker); }, absl::Seconds(20)));
  sim_->audit()->SetHeld(true);  // the audit pipeline runs late
  PutConfigMap("a", "2");
  PutConfigMap("b", "1");
  DeleteConfigMap("a");
  int64_t relists = worker.Status().relists;
  ASSERT_TRUE(testing::WaitFor([&] { return worker.Status().relists >= relists + 3; },
                               absl::Seconds(20)));
  const std::string series =
      "reverser_materializer_relists_total{group=\"\",version=\"v1\",resource=\"configmaps\","
      "scope=\"ns:team\",outcome=";
  EXPECT_GE(Metric(series + "\"deferred\"} "), 3);
  EXPECT_FALSE(Converged(kConfigMaps)) << "nothing delivered the changes yet";
  sim_->audit()->SetHeld(false);
  FlushAudit();
  ASSERT_TRUE(testing::WaitFor([&] { return Converged(kConfigMaps); }, absl::Seconds(20)));
  EXPECT_EQ(Metric(series + "\"healed\"} "), 0);
  EXPECT_EQ(worker.Status().replays, 1) << "only the initial LIST built a checkpoint";
}

TEST_F(AuditIntakeTest, ListsAndAuditEntriesInterleaveWithoutLosingChanges) {
  StartStack();
  claims_.Replace({{kConfigMaps, kTeam}});
  TypeMaterializer& worker =
      StartWorker(kConfigMaps, Intake::kAudit, "reverser", absl::Milliseconds(20));
  ASSERT_TRUE(testing::WaitFor([&] { return Streaming(worker); }, absl::Seconds(20)));
  for (int i = 0; i < 40; ++i) {
    PutConfigMap("cm" + std::to_string(i % 7), std::to_string(i));
    if (i % 5 == 4) DeleteConfigMap("cm" + std::to_string(i % 7));
  }
  FlushAudit();
  ASSERT_TRUE(testing::WaitFor([&] { return Converged(kConfigMaps); }, absl::Seconds(20)));
  ASSERT_TRUE(testing::WaitFor([&] { return worker.Status().relists >= 3; }, absl::Seconds(20)));
  EXPECT_TRUE(Converged(kConfigMaps));
}

TEST_F(AuditIntakeTest, UnclaimedTypesGetFactsButNoStream) {
  StartStack();
  claims_.Replace({{kConfigMaps, kTeam}});
  ASSERT_EQ(sim_->Call("POST", "/api/v1/namespaces/team/secrets",
                       R"({"metadata":{"name":"s"},"stringData":{"k":"v"}})")
                .status,
            201);
  PutConfigMap("other", "1");
  FlushAudit();
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        auto n = redis_->Cli({"EXISTS", "reverser:mat:v1:{configmaps:ns:team}:stream"});
        return n.ok() && *n == "1\n";
      },
      absl::Seconds(20)));
  auto keys = redis_->Cli({"--scan", "--pattern", "reverser:mat:v1:{secrets*"});
  ASSERT_TRUE(keys.ok());
  EXPECT_EQ(*keys, "");
  auto facts = redis_->Cli({"--scan", "--pattern", "reverser:author:v1:audit:secrets:*"});
  ASSERT_TRUE(facts.ok());
  EXPECT_FALSE(facts->empty());
  EXPECT_EQ(Metric("reverser_materializer_audit_entries_total{group=\"\",version=\"v1\","
                   "resource=\"secrets\",outcome=\"unclaimed\"} "),
            1);
}

class RecordingFacts : public FactSink {
 public:
  absl::Status Write(const std::vector<redisstore::AuthorFact>& facts) override {
    written += facts.size();
    return absl::OkStatus();
  }
  size_t written = 0;
};

TEST(AuditStreamWriterTest, RedisDownAnswers500SoTheApiServerRetries) {
  auto dead = testing::PickFreePort();
  ASSERT_TRUE(dead.ok());
  redisstore::RedisOptions options;
  options.host = "127.0.0.1";
  options.port = *dead;
  ClaimRegistry claims;
  claims.Replace({{kConfigMaps, kTeam}});
  runtime::MetricsRegistry metrics;
  RecordingFacts facts;
  AuditStreamWriter writer(options, redisstore::KeyPrefix::Default(), &claims, &metrics);
  AuditIntake intake(&facts, &metrics, &writer);
  json list = {
      {"kind", "EventList"},
      {"apiVersion", "audit.k8s.io/v1"},
      {"items",
       {{{"auditID", "x"},
         {"stage", "ResponseComplete"},
         {"verb", "create"},
         {"requestURI", "/api/v1/namespaces/team/configmaps"},
         {"user", {{"username", "alice"}}},
         {"objectRef", {{"resource", "configmaps"}, {"namespace", "team"}, {"apiVersion", "v1"}}},
         {"responseStatus", {{"code", 201}}},
         {"responseObject",
          {{"kind", "ConfigMap"},
           {"apiVersion", "v1"},
           {"metadata",
            {{"name", "a"}, {"namespace", "team"}, {"uid", "u"}, {"resourceVersion", "5"}}}}}}}}};
  AuditResponse response = intake.Handle("POST", "/audit-webhook", list.dump());
  EXPECT_EQ(response.status, 500) << response.body;
  EXPECT_EQ(facts.written, 1u) << "facts are written before entries";
  EXPECT_TRUE(absl::StrContains(metrics.RenderText(), "outcome=\"write_error\""));
}

// The binary in audit mode: no watch, entries from the webhook, and the admin Compact call over
// gRPC and through reverserctl.
TEST_F(AuditIntakeTest, BinaryAuditIntakeAndCompactOverGrpc) {
  auto audit_port = testing::PickFreePort();
  ASSERT_TRUE(audit_port.ok());
  kubesim::KubeSimOptions sim_options;
  sim_options.audit_webhook = AuditTo(*audit_port);  // retried until the materializer listens
  auto sim = kubesim::KubeSim::Start(sim_options);
  ASSERT_TRUE(sim.ok()) << sim.status();
  sim_ = std::move(*sim);
  ASSERT_EQ(sim_->Call("POST", "/api/v1/namespaces", R"({"metadata":{"name":"team"}})").status, 201);
  testing::ScopedTempDir dir("mat");
  ASSERT_TRUE(sim_->WriteKubeconfig(dir.path() + "/kubeconfig").ok());
  auto service = testing::ServiceProcess::Start(
      "materializer", testing::RunfilePath("services/materializer/materializer"),
      {"--kubeconfig=" + dir.path() + "/kubeconfig", "--redis_address=" + redis_->address(),
       "--static_claims=v1/configmaps@team", "--intake=audit", "--audit_insecure",
       "--audit_port=" + std::to_string(*audit_port)});
  ASSERT_TRUE(service.ok()) << service.status();
  ASSERT_EQ((*service)->WaitReady(), absl::OkStatus());
  auto channel = grpc::CreateChannel((*service)->grpc_target(), grpc::InsecureChannelCredentials());
  auto admin = reverser::v1::MaterializerAdmin::NewStub(channel);
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        grpc::ClientContext context;
        reverser::v1::ListMaterializationsResponse list;
        return admin->ListMaterializations(&context, {}, &list).ok() &&
               list.materializations_size() == 1 &&
               list.materializations(0).phase() == reverser::v1::MATERIALIZATION_PHASE_STREAMING;
      },
      absl::Seconds(20)));
  PutConfigMap("a", "1");
  PutConfigMap("b", "1");
  PutConfigMap("a", "2");
  FlushAudit();
  ASSERT_TRUE(testing::WaitFor([&] { return Converged(kConfigMaps); }, absl::Seconds(20)));
  EXPECT_EQ(WatchRequests(), 0);
  std::string rv_of_a = ClusterState(kConfigMaps)["a"];
  {
    // The audit intake appended the three changes; the admin view reads them from Redis.
    grpc::ClientContext context;
    reverser::v1::ListMaterializationsResponse list;
    ASSERT_TRUE(admin->ListMaterializations(&context, {}, &list).ok());
    ASSERT_EQ(list.materializations_size(), 1);
    EXPECT_EQ(list.materializations(0).stream_length(), 3u);
  }

  reverser::v1::CompactRequest one;
  one.mutable_claim()->mutable_type()->mutable_gvr()->set_version("v1");
  one.mutable_claim()->mutable_type()->mutable_gvr()->set_resource("configmaps");
  one.mutable_claim()->mutable_scope()->set_namespace_("team");
  {
    grpc::ClientContext context;
    reverser::v1::CompactResponse response;
    grpc::Status status = admin->Compact(&context, one, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
    ASSERT_EQ(response.results_size(), 1);
    EXPECT_TRUE(response.results(0).compacted());
    EXPECT_EQ(response.results(0).folded(), 3u);
    EXPECT_EQ(response.results(0).trimmed(), 3);
    EXPECT_EQ(absl::StrCat(response.results(0).checkpoint().rv()), rv_of_a);
    EXPECT_EQ(response.results(0).error(), "");
  }
  EXPECT_EQ(*redis_->Cli({"XLEN", "reverser:mat:v1:{configmaps:ns:team}:stream"}), "0\n");
  EXPECT_TRUE(Converged(kConfigMaps));
  {
    grpc::ClientContext context;
    reverser::v1::ListMaterializationsResponse list;
    ASSERT_TRUE(admin->ListMaterializations(&context, {}, &list).ok());
    ASSERT_EQ(list.materializations_size(), 1);
    EXPECT_EQ(list.materializations(0).stream_length(), 0u);  // folded into the checkpoint
  }
  {
    grpc::ClientContext context;
    reverser::v1::CompactRequest unknown = one;
    unknown.mutable_claim()->mutable_type()->mutable_gvr()->set_resource("secrets");
    reverser::v1::CompactResponse response;
    EXPECT_EQ(admin->Compact(&context, unknown, &response).error_code(), grpc::StatusCode::NOT_FOUND);
  }
  // reverserctl: every claim (nothing left to fold), then a bad claim text.
  std::string ctl = testing::RunfilePath("tools/reverserctl/reverserctl");
  auto all = testing::RunCommand({ctl, "--grpc_insecure", "--addr=" + (*service)->grpc_target(), "compact", "-o", "json"});
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->exit_code, 0) << all->err;
  EXPECT_TRUE(absl::StrContains(all->out, "\"compacted\": false")) << all->out;
  EXPECT_TRUE(absl::StrContains(all->out, "\"resource\": \"configmaps\"")) << all->out;
  PutConfigMap("b", "2");
  FlushAudit();
  ASSERT_TRUE(testing::WaitFor([&] { return Converged(kConfigMaps); }, absl::Seconds(20)));
  auto named = testing::RunCommand(
      {ctl, "--grpc_insecure", "--addr=" + (*service)->grpc_target(), "compact", "v1/configmaps@team", "-o", "json"});
  ASSERT_TRUE(named.ok());
  EXPECT_EQ(named->exit_code, 0) << named->err;
  EXPECT_TRUE(absl::StrContains(named->out, "\"compacted\": true")) << named->out;
  auto bad = testing::RunCommand({ctl, "--grpc_insecure", "--addr=" + (*service)->grpc_target(), "compact", "nope"});
  ASSERT_TRUE(bad.ok());
  EXPECT_EQ(bad->exit_code, 2);
  EXPECT_TRUE(absl::StrContains(bad->err, "is not group/version/resource")) << bad->err;
  auto missing = testing::RunCommand(
      {ctl, "--grpc_insecure", "--addr=" + (*service)->grpc_target(), "compact", "v1/secrets@team"});
  ASSERT_TRUE(missing.ok());
  EXPECT_EQ(missing->exit_code, 1);
  EXPECT_TRUE(absl::StrContains(missing->err, "does not own")) << missing->err;

  auto metrics = (*service)->HttpGet("/metrics");
  ASSERT_TRUE(metrics.ok());
  EXPECT_TRUE(absl::StrContains(metrics->second, "reverser_materializer_audit_entries_total"));
  EXPECT_TRUE(absl::StrContains(metrics->second, "reverser_materializer_compactions_total"));
  // kube-sim's audit backend keeps its connection to the webhook alive, and the webhook's HTTP
  // server waits for idle keep-alive connections (5 s) when it stops: close it first.
  sim_.reset();
  auto stopped = (*service)->process().Terminate();
  ASSERT_TRUE(stopped.ok()) << stopped.status() << "\n" << (*service)->Logs();
}

TEST(IntakeFlagTest, TheBinaryRejectsABadIntakeClearly) {
  std::string binary = testing::RunfilePath("services/materializer/materializer");
  auto bogus = testing::RunCommand({binary, "--intake=both", "--static_claims=v1/configmaps",
                                    "--redis_address=127.0.0.1:1", "--grpc_port=0",
                                    "--http_port=0"});
  ASSERT_TRUE(bogus.ok());
  EXPECT_NE(bogus->exit_code, 0);
  EXPECT_TRUE(absl::StrContains(bogus->err, "expected watch or audit")) << bogus->err;
  auto no_webhook = testing::RunCommand(
      {binary, "--intake=audit", "--audit_webhook=false", "--static_claims=v1/configmaps",
       "--redis_address=127.0.0.1:1", "--grpc_port=0", "--http_port=0"});
  ASSERT_TRUE(no_webhook.ok());
  EXPECT_NE(no_webhook->exit_code, 0);
  EXPECT_TRUE(absl::StrContains(no_webhook->err, "needs the audit webhook")) << no_webhook->err;
}

TEST(IntakeFlagTest, ParsesWatchAndAudit) {
  EXPECT_EQ(*ParseIntake("watch"), Intake::kWatch);
  EXPECT_EQ(*ParseIntake("audit"), Intake::kAudit);
  EXPECT_FALSE(ParseIntake("both").ok());
}

}  // namespace
}  // namespace reverser::materializer
