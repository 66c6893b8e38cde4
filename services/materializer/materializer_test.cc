// The materializer against real parts: kube-sim (in-process, real HTTP), a real redis-server,
// and for the binary test the real materializer process.

#include <fstream>

#include <map>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "libs/kube/config.h"
#include "libs/kube/httplib_transport.h"
#include "libs/redisstore/author_fact_store.h"
#include "libs/redisstore/body_cipher.h"
#include "libs/redisstore/materialization_store.h"
#include "services/materializer/supervisor.h"
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

class MaterializerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto redis = testing::RedisServer::Start();
    ASSERT_TRUE(redis.ok()) << redis.status();
    redis_ = std::move(*redis);
    auto sim = kubesim::KubeSim::Start({});
    ASSERT_TRUE(sim.ok()) << sim.status();
    sim_ = std::move(*sim);
    auto config = kube::ParseKubeconfig(sim_->Kubeconfig(), "");
    ASSERT_TRUE(config.ok()) << config.status();
    auto client = kube::NewHttplibRestClient(*config);
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = *client;
    ASSERT_EQ(sim_->Call("POST", "/api/v1/namespaces", R"({"metadata":{"name":"team"}})").status, 201);
  }

  TypeMaterializerOptions Options() {
    TypeMaterializerOptions o;
    o.gvr = kConfigMaps;
    o.scope = core::WatchScope::Namespace("team");
    o.redis = redisstore::RedisOptionsFor(*redis_);
    return o;
  }

  void PutConfigMap(const std::string& name, const std::string& value) {
    std::string path = "/api/v1/namespaces/team/configmaps/" + name;
    json body = {{"apiVersion", "v1"},
                 {"kind", "ConfigMap"},
                 {"metadata", {{"name", name}, {"namespace", "team"}}},
                 {"data", {{"k", value}}}};
    auto got = sim_->Call("GET", path);
    if (got.status == 404) {
      ASSERT_EQ(sim_->Call("POST", "/api/v1/namespaces/team/configmaps", body.dump()).status, 201);
    } else {
      ASSERT_EQ(sim_->Call("PUT", path, body.dump()).status, 200);
    }
  }

  void DeleteConfigMap(const std::string& name) {
    ASSERT_EQ(sim_->Call("DELETE", "/api/v1/namespaces/team/configmaps/" + name).status, 200);
  }

  // name -> data.k, as the API server has it.
  std::map<std::string, std::string> ClusterState() {
    auto list = json::parse(sim_->Call("GET", "/api/v1/namespaces/team/configmaps").body);
    std::map<std::string, std::string> out;
    for (const auto& item : list["items"]) {
      out[item["metadata"]["name"]] = item["data"]["k"];
    }
    return out;
  }

  // name -> data.k, as checkpoint + stream fold to.
  std::map<std::string, std::string> MaterializedState() {
    auto conn = redisstore::RedisConnection::Connect(Options().redis);
    if (!conn.ok()) return {};
    redisstore::MaterializationStore store(conn->get(), redisstore::KeyPrefix::Default(),
                                           kConfigMaps, core::WatchScope::Namespace("team"));
    auto view = store.Load();
    if (!view.ok() || !view->checkpoint.has_value()) return {{"<no checkpoint>", ""}};
    std::map<std::string, std::string> out;
    for (const auto& [identity, body] : view->Fold()) {
      auto object = json::parse(body);
      EXPECT_FALSE(object["metadata"].contains("managedFields"));
      out[object["metadata"]["name"]] = object["data"]["k"];
    }
    return out;
  }

  bool Converged() { return MaterializedState() == ClusterState(); }

  // A worker checking for lost state every `state_check`, once it streams (null if it never did).
  std::unique_ptr<TypeMaterializer> StartStreaming(absl::Duration state_check) {
    TypeMaterializerOptions options = Options();
    options.state_check_interval = state_check;
    auto worker = std::make_unique<TypeMaterializer>(client_, options, &metrics_);
    worker->Start();
    if (!testing::WaitFor([&] { return worker->Status().phase == "Streaming"; },
                          absl::Seconds(20))) {
      return nullptr;
    }
    return worker;
  }

  int WatchRequests() {
    int n = 0;
    for (const auto& line : sim_->RequestLog()) {
      if (absl::StrContains(line, "/configmaps") && absl::StrContains(line, "watch=")) ++n;
    }
    return n;
  }

  std::unique_ptr<testing::RedisServer> redis_;
  std::unique_ptr<kubesim::KubeSim> sim_;
  std::shared_ptr<kube::RestClient> client_;
  runtime::MetricsRegistry metrics_;
};

TEST_F(MaterializerTest, CheckpointAndStreamHoldExactlyTheClusterState) {
  PutConfigMap("a", "1");
  PutConfigMap("b", "1");
  TypeMaterializer worker(client_, Options(), &metrics_);
  worker.Start();
  ASSERT_TRUE(testing::WaitFor([&] { return worker.Status().phase == "Streaming"; }, absl::Seconds(20)));
  EXPECT_EQ(MaterializedState(), (std::map<std::string, std::string>{{"a", "1"}, {"b", "1"}}));
  PutConfigMap("a", "2");
  PutConfigMap("c", "1");
  DeleteConfigMap("b");
  ASSERT_TRUE(testing::WaitFor([&] { return Converged(); }, absl::Seconds(20)))
      << "cluster and materialization differ";
  // The counter moves just after the write the fold already shows.
  ASSERT_TRUE(testing::WaitFor([&] { return worker.Status().appended == 3; }, absl::Seconds(20)));
  EXPECT_EQ(worker.Status().replays, 1);
  worker.Stop();
}

// A list/watch RBAC forbids is Blocked with WatchNotPermitted — in the state record too, with
// the API server's words, for the splice streams — until it is allowed: then the first sync
// replays; a resumed watch that was refused streams again with its next event.
TEST_F(MaterializerTest, ForbiddenListWatchIsBlockedWithWatchNotPermittedUntilAllowed) {
  PutConfigMap("a", "1");
  sim_->authenticator().AddToken("restricted-token",
                                 {"restricted", "uid-r", {"system:authenticated"}, {}});
  // Only namespace "other" is allowed: the worker's namespace "team" is not.
  sim_->authorizer().AddRule({.users = {"restricted"},
                              .verbs = {"get", "list", "watch"},
                              .api_groups = {""},
                              .resources = {"configmaps"},
                              .namespaces = {"other"}});
  auto config = kube::ParseKubeconfig(sim_->Kubeconfig("restricted-token"), "");
  ASSERT_TRUE(config.ok()) << config.status();
  auto restricted = kube::NewHttplibRestClient(*config);
  ASSERT_TRUE(restricted.ok()) << restricted.status();
  auto state = [&]() -> std::optional<redisstore::MaterializationState> {
    auto conn = redisstore::RedisConnection::Connect(Options().redis);
    if (!conn.ok()) return std::nullopt;
    redisstore::MaterializationStore store(conn->get(), redisstore::KeyPrefix::Default(),
                                           kConfigMaps, core::WatchScope::Namespace("team"));
    auto read = store.ReadState();
    return read.ok() ? *read : std::nullopt;
  };
  auto blocked = [&](const TypeMaterializer& worker) {
    auto s = state();
    return worker.Status().phase == "Blocked" && worker.Status().reason == "WatchNotPermitted" &&
           s && s->phase == "Blocked" && s->reason == "WatchNotPermitted";
  };
  {
    TypeMaterializer worker(*restricted, Options(), &metrics_);
    worker.Start();
    ASSERT_TRUE(testing::WaitFor([&] { return blocked(worker); }, absl::Seconds(20)))
        << worker.Status().phase << " " << worker.Status().reason;
    EXPECT_NE(state()->message.find("forbidden: "), std::string::npos) << state()->message;
    EXPECT_NE(state()->message.find("resource \"configmaps\""), std::string::npos)
        << state()->message;
    sim_->authorizer().AddRule({.users = {"restricted"},
                                .verbs = {"get", "list", "watch"},
                                .api_groups = {""},
                                .resources = {"configmaps"},
                                .namespaces = {"team"}});
    ASSERT_TRUE(
        testing::WaitFor([&] { return worker.Status().phase == "Streaming"; }, absl::Seconds(20)));
    EXPECT_EQ(MaterializedState(), (std::map<std::string, std::string>{{"a", "1"}}));
    EXPECT_EQ(state()->reason, "AllStreamsReady");
    worker.Stop();
  }
  EXPECT_GE(metrics_
                .GetCounter("reverser_materializer_watch_restarts_total", "",
                            {{"group", ""},
                             {"version", "v1"},
                             {"resource", "configmaps"},
                             {"scope", "ns:team"},
                             {"reason", "WatchNotPermitted"}})
                .Value(),
            1);

  // Resuming over the checkpoint while forbidden: Blocked; allowed, the next event streams.
  sim_->authorizer().Clear();
  sim_->authorizer().AddRule({.users = {"restricted"},
                              .verbs = {"get", "list", "watch"},
                              .api_groups = {""},
                              .resources = {"configmaps"},
                              .namespaces = {"other"}});
  TypeMaterializer resumed(*restricted, Options(), &metrics_);
  resumed.Start();
  ASSERT_TRUE(testing::WaitFor([&] { return blocked(resumed); }, absl::Seconds(20)));
  sim_->authorizer().AddRule({.users = {"restricted"},
                              .verbs = {"get", "list", "watch"},
                              .api_groups = {""},
                              .resources = {"configmaps"},
                              .namespaces = {"team"}});
  ASSERT_TRUE(testing::WaitFor([&] { return sim_->ActiveWatches() > 0; }, absl::Seconds(20)));
  PutConfigMap("a", "2");
  ASSERT_TRUE(testing::WaitFor([&] { return resumed.Status().phase == "Streaming" && Converged(); },
                               absl::Seconds(20)));
  EXPECT_EQ(resumed.Status().reason, "ResumedFromCursor");
  EXPECT_EQ(resumed.Status().replays, 0) << "a resume over the checkpoint does not replay";
  resumed.Stop();
}

TEST_F(MaterializerTest, RestartResumesWithoutReplayAndCatchesUp) {
  PutConfigMap("a", "1");
  {
    TypeMaterializer worker(client_, Options(), &metrics_);
    worker.Start();
    ASSERT_TRUE(testing::WaitFor([&] { return worker.Status().phase == "Streaming"; }, absl::Seconds(20)));
    worker.Stop();
  }
  // Changes while no materializer runs.
  PutConfigMap("a", "2");
  PutConfigMap("d", "1");
  TypeMaterializer restarted(client_, Options(), &metrics_);
  restarted.Start();
  ASSERT_TRUE(testing::WaitFor([&] { return Converged(); }, absl::Seconds(20)));
  EXPECT_EQ(restarted.Status().replays, 0) << "a resume must not replay";
  restarted.Stop();
}

TEST_F(MaterializerTest, BacklogIsAppendedInBatchesInRvOrderOnceEach) {
  PutConfigMap("a", "0");
  {
    TypeMaterializer worker(client_, Options(), &metrics_);
    worker.Start();
    ASSERT_TRUE(testing::WaitFor([&] { return worker.Status().phase == "Streaming"; }, absl::Seconds(20)));
    worker.Stop();
  }
  // More changes than one AppendAll batch holds, waiting in the watch history.
  constexpr int kChanges = 700;
  for (int i = 0; i < kChanges; ++i) PutConfigMap("b" + std::to_string(i % 50), std::to_string(i));
  TypeMaterializer resumed(client_, Options(), &metrics_);
  resumed.Start();
  ASSERT_TRUE(testing::WaitFor([&] { return resumed.Status().appended == kChanges; },
                               absl::Seconds(30)))
      << resumed.Status().appended;
  EXPECT_TRUE(Converged());
  EXPECT_EQ(resumed.Status().diverted, 0);
  auto conn = redisstore::RedisConnection::Connect(Options().redis);
  ASSERT_TRUE(conn.ok());
  redisstore::MaterializationStore store(conn->get(), redisstore::KeyPrefix::Default(), kConfigMaps,
                                         core::WatchScope::Namespace("team"));
  auto batch = store.ReadAfter(core::StreamPosition(), kChanges + 1);
  ASSERT_TRUE(batch.ok()) << batch.status();
  ASSERT_EQ(batch->entries.size(), static_cast<size_t>(kChanges));
  for (size_t i = 0; i < batch->entries.size(); ++i) {
    const redisstore::StreamEntry& entry = batch->entries[i];
    EXPECT_EQ(entry.position.ToString(), entry.resource_version + "-0");
    if (i > 0) EXPECT_LT(batch->entries[i - 1].position, entry.position);
    EXPECT_TRUE(absl::StrContains(entry.object_json, "\"k\":\"" + std::to_string(i) + "\""))
        << i << " " << entry.object_json;
  }
  // Every entry went through an AppendAll; at most one round trip each.
  const runtime::Labels labels = {
      {"group", ""}, {"version", "v1"}, {"resource", "configmaps"}, {"scope", "ns:team"}};
  const double batches =
      metrics_.GetCounter("reverser_materializer_append_batches_total", "", labels).Value();
  EXPECT_GE(batches, 1);
  EXPECT_LE(batches, kChanges);
  resumed.Stop();
}

TEST_F(MaterializerTest, ExpiredResourceVersionRebuildsTheCheckpoint) {
  PutConfigMap("a", "1");
  TypeMaterializer worker(client_, Options(), &metrics_);
  worker.Start();
  ASSERT_TRUE(testing::WaitFor([&] { return worker.Status().phase == "Streaming"; }, absl::Seconds(20)));
  worker.Stop();
  for (int i = 0; i < 5; ++i) PutConfigMap("x" + std::to_string(i), "1");
  sim_->Compact();  // the worker's cursor is now too old: 410 on resume
  TypeMaterializer resumed(client_, Options(), &metrics_);
  resumed.Start();
  ASSERT_TRUE(testing::WaitFor([&] { return resumed.Status().replays == 1 && Converged(); },
                               absl::Seconds(20)));
  resumed.Stop();
}

double StateLost(runtime::MetricsRegistry& metrics, const std::string& reason) {
  return metrics
      .GetCounter("reverser_materializer_state_lost_total", "",
                  {{"group", ""},
                   {"version", "v1"},
                   {"resource", "configmaps"},
                   {"scope", "ns:team"},
                   {"reason", reason}})
      .Value();
}

// Redis restarted empty (no persistence) while changes flow: the next append notices, the watch
// relists, and the materialization holds the cluster state again, without a restart.
TEST_F(MaterializerTest, RedisRestartedEmptyIsRebuiltWhileChangesFlow) {
  PutConfigMap("a", "1");
  PutConfigMap("b", "1");
  auto started = StartStreaming(absl::Hours(1));  // only the appends notice it here
  ASSERT_TRUE(started);
  TypeMaterializer& worker = *started;
  PutConfigMap("a", "2");
  ASSERT_TRUE(testing::WaitFor([&] { return Converged(); }, absl::Seconds(20)));

  ASSERT_TRUE(redis_->Restart().ok());
  PutConfigMap("c", "1");
  DeleteConfigMap("b");
  PutConfigMap("a", "3");
  ASSERT_TRUE(testing::WaitFor([&] { return Converged(); }, absl::Seconds(20)))
      << "materialized " << MaterializedState().size() << " objects";
  ASSERT_TRUE(testing::WaitFor([&] { return worker.Status().phase == "Streaming"; }, absl::Seconds(20)));
  EXPECT_EQ(worker.Status().state_losses, 1);
  EXPECT_EQ(worker.Status().replays, 2);
  EXPECT_EQ(StateLost(metrics_, "checkpoint_vanished"), 1);
  auto meta = redis_->Cli({"HGET", "reverser:mat:v1:{configmaps:ns:team}:ckpt:meta", "incarnation"});
  ASSERT_TRUE(meta.ok());
  EXPECT_EQ(meta->size(), 17u) << *meta;  // a new incarnation (16 hex digits and a newline)
  // Later changes are appended as before.
  const int64_t appended = worker.Status().appended;
  PutConfigMap("d", "1");
  ASSERT_TRUE(testing::WaitFor([&] { return Converged() && worker.Status().appended > appended; },
                               absl::Seconds(20)));
}

// No change at all: the idle check notices, and until the rebuild's LIST succeeds the status says
// why the materialization is replaying (never an old checkpoint from memory).
TEST_F(MaterializerTest, LostStateIsNoticedWithoutChangesAndShownUntilRebuilt) {
  PutConfigMap("a", "1");
  auto started = StartStreaming(absl::Milliseconds(50));
  ASSERT_TRUE(started);
  TypeMaterializer& worker = *started;
  ASSERT_FALSE(worker.Status().checkpoint.empty());
  for (const char* verb : {"list", "watch"}) {
    kubesim::FaultRule rule;
    rule.action = kubesim::FaultRule::Action::kInternalError;
    rule.verb = verb;
    rule.resource = "configmaps";
    sim_->faults().Add(rule);
  }
  ASSERT_TRUE(redis_->Cli({"FLUSHALL"}).ok());
  ASSERT_TRUE(testing::WaitFor([&] { return worker.Status().reason == kRedisStateLostReason; },
                               absl::Seconds(20)));
  EXPECT_EQ(worker.Status().phase, "Replaying");
  EXPECT_EQ(worker.Status().checkpoint, "");
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        auto state = redis_->Cli({"GET", "reverser:mat:v1:{configmaps:ns:team}:state"});
        return state.ok() &&
               absl::StrContains(*state, "Rebuilding after Redis state loss (the checkpoint vanished)");
      },
      absl::Seconds(20)));
  sim_->faults().Clear();
  ASSERT_TRUE(testing::WaitFor([&] { return Converged() && worker.Status().phase == "Streaming"; },
                               absl::Seconds(20)));
  EXPECT_FALSE(worker.Status().checkpoint.empty());
  EXPECT_EQ(worker.Status().state_losses, 1);
  EXPECT_EQ(StateLost(metrics_, "checkpoint_vanished"), 1);
  worker.Stop();
}

// Redis came back with an older snapshot: the stream top is below what this worker wrote. The
// next append is refused and the checkpoint rebuilt, so the changes in between are not lost.
TEST_F(MaterializerTest, AnOlderSnapshotIsNoticedAndRebuilt) {
  PutConfigMap("a", "1");
  auto started = StartStreaming(absl::Hours(1));
  ASSERT_TRUE(started);
  TypeMaterializer& worker = *started;
  PutConfigMap("a", "2");
  ASSERT_TRUE(testing::WaitFor([&] { return Converged(); }, absl::Seconds(20)));
  ASSERT_TRUE(redis_->Cli({"SAVE"}).ok());
  PutConfigMap("b", "1");
  PutConfigMap("a", "3");
  ASSERT_TRUE(testing::WaitFor([&] { return Converged(); }, absl::Seconds(20)));
  ASSERT_TRUE(redis_->Restart().ok());  // back at a=2, no b
  EXPECT_NE(MaterializedState(), ClusterState());
  PutConfigMap("c", "1");
  ASSERT_TRUE(testing::WaitFor([&] { return Converged(); }, absl::Seconds(20)));
  // The rebuild's counters move just after its checkpoint swap, which convergence shows first.
  ASSERT_TRUE(testing::WaitFor([&] { return worker.Status().replays >= 2; }, absl::Seconds(20)))
      << "replays " << worker.Status().replays;
  EXPECT_EQ(StateLost(metrics_, "went_backwards"), 1);
  EXPECT_EQ(worker.Status().replays, 2);
  worker.Stop();
}

// Redis down for a while, then back empty: writes are retried with backoff meanwhile (the watch
// waits, nothing is skipped or crashes), and once it answers the state is rebuilt.
TEST_F(MaterializerTest, RedisDownForAWhileIsRetriedThenRebuilt) {
  PutConfigMap("a", "1");
  auto started = StartStreaming(absl::Milliseconds(50));
  ASSERT_TRUE(started);
  TypeMaterializer& worker = *started;
  redis_->Crash();
  PutConfigMap("a", "2");
  PutConfigMap("b", "1");
  const runtime::Labels labels = {
      {"group", ""}, {"version", "v1"}, {"resource", "configmaps"}, {"scope", "ns:team"}};
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        return metrics_.GetCounter("reverser_materializer_redis_retries_total", "", labels)
                   .Value() >= 2;
      },
      absl::Seconds(20)));
  EXPECT_FALSE(worker.Status().last_error.empty());
  ASSERT_TRUE(redis_->Revive().ok());
  ASSERT_TRUE(testing::WaitFor([&] { return Converged() && worker.Status().phase == "Streaming"; },
                               absl::Seconds(30)));
  EXPECT_EQ(worker.Status().state_losses, 1);
  worker.Stop();
}

TEST_F(MaterializerTest, SupervisorRunsOneWorkerPerClaimAndReleasesWithdrawnOnes) {
  caf::actor_system_config config;
  caf::actor_system system{config};
  std::atomic<size_t> workers{0};
  SupervisorOptions options;
  auto base = Options();
  auto client = client_;
  auto* metrics = &metrics_;
  options.make_worker = [=](const core::GroupVersionResource& gvr, const core::WatchScope& scope,
                            bool /*sensitive*/) {
    TypeMaterializerOptions o = base;
    o.gvr = gvr;
    o.scope = scope;
    return std::make_unique<TypeMaterializer>(client, o, metrics);
  };
  options.on_applied = [&](size_t n) { workers = n; };
  SupervisorActor supervisor = SpawnSupervisor(system, options);
  // Two GitTargets claiming the same type yield one claim: one worker, one watch.
  auto claims = rules::ParseStaticClaims("v1/configmaps@team,v1/configmaps@team");
  ASSERT_TRUE(claims.ok());
  caf::anon_send(supervisor, claims_atom::value, *claims);
  ASSERT_TRUE(testing::WaitFor([&] { return workers == 1 && Converged(); }, absl::Seconds(20)));
  ASSERT_TRUE(testing::WaitFor([&] { return WatchRequests() >= 1; }, absl::Seconds(10)));
  EXPECT_EQ(WatchRequests(), 1);
  EXPECT_EQ(*redis_->Cli({"EXISTS", "reverser:mat:v1:{configmaps:ns:team}:ckpt:rv"}), "1\n");
  // Withdrawn: the worker stops and the keys go.
  caf::anon_send(supervisor, claims_atom::value, reverser::v1::ClaimSet());
  ASSERT_TRUE(testing::WaitFor([&] { return workers == 0; }, absl::Seconds(20)));
  ASSERT_TRUE(testing::WaitFor(
      [&] { return *redis_->Cli({"EXISTS", "reverser:mat:v1:{configmaps:ns:team}:ckpt:rv"}) == "0\n"; },
      absl::Seconds(10)));
  caf::anon_send_exit(supervisor, caf::exit_reason::user_shutdown);
}

// The binary: watches into Redis and records author facts from the audit webhook.
TEST_F(MaterializerTest, BinaryMaterializesAndRecordsAuthorFacts) {
  testing::ScopedTempDir dir("mat");
  ASSERT_TRUE(sim_->WriteKubeconfig(dir.path() + "/kubeconfig").ok());
  auto audit_port = testing::PickFreePort();
  ASSERT_TRUE(audit_port.ok());
  auto service = testing::ServiceProcess::Start(
      "materializer", testing::RunfilePath("services/materializer/materializer"),
      {"--kubeconfig=" + dir.path() + "/kubeconfig", "--redis_address=" + redis_->address(),
       "--static_claims=v1/configmaps@team", "--audit_insecure",
       "--audit_port=" + std::to_string(*audit_port)});
  ASSERT_TRUE(service.ok()) << service.status();
  ASSERT_EQ((*service)->WaitReady(), absl::OkStatus());
  // Created only once the initial sync is done, so it reaches Redis as a live append (created
  // during the sync it would land in the checkpoint and no append would be counted).
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        auto state = redis_->Cli({"GET", "reverser:mat:v1:{configmaps:ns:team}:state"});
        return state.ok() && absl::StrContains(*state, "\"Streaming\"");
      },
      absl::Seconds(20)));
  PutConfigMap("web", "1");
  ASSERT_TRUE(testing::WaitFor([&] { return Converged(); }, absl::Seconds(20)));

  std::string uid = json::parse(sim_->Call("GET", "/api/v1/namespaces/team/configmaps/web").body)
                        ["metadata"]["uid"];
  json event_list = {
      {"kind", "EventList"},
      {"apiVersion", "audit.k8s.io/v1"},
      {"items",
       {{{"auditID", "x"},
         {"stage", "ResponseComplete"},
         {"verb", "update"},
         {"requestURI", "/api/v1/namespaces/team/configmaps/web"},
         {"user", {{"username", "alice"}}},
         {"objectRef",
          {{"resource", "configmaps"}, {"namespace", "team"}, {"name", "web"}, {"uid", uid}, {"apiVersion", "v1"}}},
         {"responseStatus", {{"code", 200}}},
         {"responseObject",
          {{"kind", "ConfigMap"}, {"metadata", {{"name", "web"}, {"uid", uid}, {"resourceVersion", "77"}}}}}}}}};
  httplib::Client webhook("127.0.0.1", *audit_port);
  auto res = webhook.Post("/audit-webhook", event_list.dump(), "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200) << res->body;
  auto fact = redis_->Cli({"GET", "reverser:author:v1:audit:configmaps:object:" + uid + ":77"});
  ASSERT_TRUE(fact.ok());
  EXPECT_TRUE(absl::StrContains(*fact, "\"author\":\"alice\"")) << *fact;
  // The append counter moves just after the write the fold already shows.
  std::string metrics_text;
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        auto metrics = (*service)->HttpGet("/metrics");
        if (!metrics.ok()) return false;
        metrics_text = metrics->second;
        return absl::StrContains(metrics_text, "reverser_materializer_stream_appends_total");
      },
      absl::Seconds(20)))
      << metrics_text;
  EXPECT_TRUE(absl::StrContains(metrics_text, "gitopsreverser_audit_events_total{outcome=\"queued\""));

  // A malformed body gets a clear 400 and the service keeps serving.
  auto bad = webhook.Post("/audit-webhook", "{oops", "application/json");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);
  EXPECT_EQ((*service)->HttpGet("/healthz")->first, 200);
  auto stopped = (*service)->process().Terminate();
  ASSERT_TRUE(stopped.ok());
}

// The catalog marks a type sensitive later (--additional_sensitive_resources changed): the
// supervisor replaces its worker, and the materialization is rebuilt sealed; unmarked again, it
// is rebuilt in plaintext.
TEST_F(MaterializerTest, SupervisorRebuildsATypeThatBecomesSensitiveSealedAndBack) {
  // Before the actor system: its workers use the cipher until the system is gone.
  auto cipher = redisstore::BodyCipher::FromKeys({{"k1", std::string(32, '\x11')}});
  ASSERT_TRUE(cipher.ok()) << cipher.status();
  std::shared_ptr<const redisstore::BodyCipher> shared_cipher = std::move(*cipher);
  caf::actor_system_config config;
  caf::actor_system system{config};
  std::atomic<size_t> workers{0};
  SupervisorOptions options;
  auto base = Options();
  base.body_cipher = shared_cipher.get();
  auto client = client_;
  auto* metrics = &metrics_;
  options.make_worker = [=](const core::GroupVersionResource& gvr, const core::WatchScope& scope,
                            bool sensitive) {
    TypeMaterializerOptions o = base;
    o.gvr = gvr;
    o.scope = scope;
    o.sensitive = sensitive;
    return std::make_unique<TypeMaterializer>(client, o, metrics);
  };
  options.on_applied = [&](size_t n) { workers = n; };
  SupervisorActor supervisor = SpawnSupervisor(system, options);
  PutConfigMap("plain", "visible-value");
  auto claims = rules::ParseStaticClaims("v1/configmaps@team");
  ASSERT_TRUE(claims.ok());
  auto stored = [&] {
    return redis_->Cli({"HGET", "reverser:mat:v1:{configmaps:ns:team}:ckpt:items", "team/plain"})
        .value_or("");
  };
  caf::anon_send(supervisor, claims_atom::value, *claims);
  ASSERT_TRUE(testing::WaitFor([&] { return absl::StrContains(stored(), "visible-value"); },
                               absl::Seconds(20)));

  claims->mutable_claims(0)->set_sensitive(true);
  claims->set_generation(2);
  caf::anon_send(supervisor, claims_atom::value, *claims);
  ASSERT_TRUE(testing::WaitFor(
      [&] { return absl::StartsWith(stored(), "rvenc1:k1:"); }, absl::Seconds(20)))
      << stored();
  EXPECT_FALSE(absl::StrContains(stored(), "visible-value"));

  claims->mutable_claims(0)->set_sensitive(false);
  claims->set_generation(3);
  caf::anon_send(supervisor, claims_atom::value, *claims);
  ASSERT_TRUE(testing::WaitFor([&] { return absl::StrContains(stored(), "visible-value"); },
                               absl::Seconds(20)))
      << stored();
  EXPECT_EQ(workers, 1u);
  caf::anon_send_exit(supervisor, caf::exit_reason::user_shutdown);
}

// Without a catalog (--static_claims) the catalog's default rule still marks core Secrets
// sensitive: their bodies reach Redis sealed, never in plaintext.
TEST_F(MaterializerTest, StaticClaimsOfSecretsAreSealedInRedis) {
  testing::ScopedTempDir dir("mat-sealed");
  ASSERT_TRUE(sim_->WriteKubeconfig(dir.path() + "/kubeconfig").ok());
  const std::string keys = dir.path() + "/body-keys";
  {
    std::ofstream out(keys);
    out << "k1:" << absl::Base64Escape(std::string(32, '\x5a')) << "\n";
  }
  const std::string marker = "static-claim-marker-7f3a";
  json secret = {{"apiVersion", "v1"},
                 {"kind", "Secret"},
                 {"type", "Opaque"},
                 {"metadata", {{"name", "db"}, {"namespace", "team"}}},
                 {"data", {{"password", absl::Base64Escape(marker)}}}};
  ASSERT_EQ(sim_->Call("POST", "/api/v1/namespaces/team/secrets", secret.dump()).status, 201);
  auto audit_port = testing::PickFreePort();
  ASSERT_TRUE(audit_port.ok());
  auto service = testing::ServiceProcess::Start(
      "materializer", testing::RunfilePath("services/materializer/materializer"),
      {"--kubeconfig=" + dir.path() + "/kubeconfig", "--redis_address=" + redis_->address(),
       "--redis_body_key_file=" + keys, "--static_claims=v1/secrets@team", "--audit_insecure",
       "--audit_port=" + std::to_string(*audit_port)});
  ASSERT_TRUE(service.ok()) << service.status();
  ASSERT_EQ((*service)->WaitReady(), absl::OkStatus());
  std::string stored;
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        auto item = redis_->Cli({"HGET", "reverser:mat:v1:{secrets:ns:team}:ckpt:items", "team/db"});
        stored = item.value_or("");
        return item.ok() && !stored.empty() && stored != "\n";
      },
      absl::Seconds(20)))
      << (*service)->Logs();
  EXPECT_TRUE(absl::StartsWith(stored, "rvenc1:k1:")) << stored;
  EXPECT_FALSE(absl::StrContains(stored, absl::Base64Escape(marker))) << stored;
  EXPECT_FALSE(absl::StrContains(stored, "password")) << stored;
}

}  // namespace
}  // namespace reverser::materializer
