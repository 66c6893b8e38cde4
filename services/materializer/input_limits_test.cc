// The materializer binary against input it must not take whole: audit events nested too deeply
// or too large, audit bodies over the limit (over HTTPS with client certificates, as the API
// server sends them), and watch objects nested too deeply. Real parts: the materializer process,
// a real redis-server, kube-sim.

#include <grpcpp/grpcpp.h>

#include <map>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "libs/core/json_depth.h"
#include "libs/redisstore/materialization_store.h"
#include "libs/redisstore/test_redis.h"
#include "proto/reverser/v1/materializer.grpc.pb.h"
#include "tests/fixtures/audit_events.h"
#include "tests/fixtures/certs.h"
#include "tests/fixtures/process.h"
#include "tests/fixtures/redis_server.h"
#include "tests/fixtures/service_process.h"
#include "tests/fixtures/temp_dir.h"
#include "tools/kube-sim/kube_sim.h"

namespace reverser::materializer {
namespace {

using nlohmann::json;

const core::GroupVersionResource kWidgets{"example.com", "v1", "widgets"};

// An object nested `levels` deep: {"a":{"a":...{}...}}.
std::string Nested(int64_t levels) {
  std::string text;
  for (int64_t i = 1; i < levels; ++i) text += R"({"a":)";
  text += "{}";
  text.append(levels - 1, '}');
  return text;
}

// An accepted update of ConfigMap team/`name` by alice (testing::AuditConfigMapUpdate).
std::string Update(const std::string& id, const std::string& name,
                   const std::string& request_object = R"({"kind":"ConfigMap"})") {
  return testing::AuditConfigMapUpdate(id, name, "alice", request_object);
}

std::string EventList(const std::vector<std::string>& items) {
  return testing::AuditEventList(items);
}

// The value of the first series in a Prometheus text page that starts with `series`, or -1.
double Metric(const std::string& text, absl::string_view series) {
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (!absl::StartsWith(line, series)) continue;
    double value = 0;
    if (absl::SimpleAtod(line.substr(line.rfind(' ') + 1), &value)) return value;
  }
  return -1;
}

class InputLimitsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto redis = testing::RedisServer::Start();
    ASSERT_TRUE(redis.ok()) << redis.status();
    redis_ = std::move(*redis);
    auto sim = kubesim::KubeSim::Start({});
    ASSERT_TRUE(sim.ok()) << sim.status();
    sim_ = std::move(*sim);
    ASSERT_EQ(sim_->Call("POST", "/api/v1/namespaces", R"({"metadata":{"name":"team"}})").status,
              201);
    auto pki = testing::MakeTestPki(dir_.path());
    ASSERT_TRUE(pki.ok()) << pki.status();
    pki_ = *pki;
    ASSERT_TRUE(sim_->WriteKubeconfig(dir_.path() + "/kubeconfig").ok());
  }

  void TearDown() override {
    if (service_) {
      sim_.reset();  // its watch connections would hold the materializer's shutdown
      auto stopped = service_->process().Terminate();
      EXPECT_TRUE(stopped.ok()) << stopped.status() << "\n" << service_->Logs();
    }
  }

  // The binary with its audit webhook on HTTPS + mTLS.
  void StartMaterializer(const std::string& claims, const std::vector<std::string>& flags = {}) {
    auto port = testing::PickFreePort();
    ASSERT_TRUE(port.ok());
    audit_port_ = *port;
    std::vector<std::string> args = {"--kubeconfig=" + dir_.path() + "/kubeconfig",
                                     "--redis_address=" + redis_->address(),
                                     "--static_claims=" + claims,
                                     "--audit_port=" + std::to_string(audit_port_),
                                     "--audit_tls_cert=" + pki_.server_cert,
                                     "--audit_tls_key=" + pki_.server_key,
                                     "--audit_client_ca=" + pki_.ca_cert};
    args.insert(args.end(), flags.begin(), flags.end());
    auto service = testing::ServiceProcess::Start(
        "materializer", testing::RunfilePath("services/materializer/materializer"), args);
    ASSERT_TRUE(service.ok()) << service.status();
    service_ = std::move(*service);
    ASSERT_TRUE(service_->WaitReady().ok()) << service_->Logs();
  }

  // What the API server does: POST the list over mTLS.
  httplib::Result PostAudit(const std::string& body) {
    return testing::PostWithClientCert(pki_, {pki_.client_cert, pki_.client_key}, audit_port_,
                                       "/audit-webhook", body);
  }

  // The author fact recorded for ConfigMap `name` by Update(), "" if none.
  std::string FactFor(const std::string& name) {
    auto fact = redis_->Cli({"GET", testing::AuditConfigMapUpdateFactKey(name)});
    return fact.ok() ? std::string(absl::StripAsciiWhitespace(*fact)) : "";
  }

  // The service still answers after the input it refused.
  void ExpectHealthy() {
    auto health = service_->HttpGet("/healthz");
    ASSERT_TRUE(health.ok()) << health.status() << "\n" << service_->Logs();
    EXPECT_EQ(health->first, 200);
  }
  std::string Metrics() {
    auto metrics = service_->HttpGet("/metrics");
    return metrics.ok() ? metrics->second : "";
  }

  // A CRD whose objects may hold anything (kube-sim stores them as a real API server would,
  // far below its 10,000 levels; the materializer is run with a low --json_max_depth).
  void CreateWidgetType() {
    const json crd = {
        {"apiVersion", "apiextensions.k8s.io/v1"},
        {"kind", "CustomResourceDefinition"},
        {"metadata", {{"name", "widgets.example.com"}}},
        {"spec",
         {{"group", "example.com"},
          {"scope", "Namespaced"},
          {"names", {{"plural", "widgets"}, {"singular", "widget"}, {"kind", "Widget"}}},
          {"versions",
           {{{"name", "v1"},
             {"served", true},
             {"storage", true},
             {"schema",
              {{"openAPIV3Schema",
                {{"type", "object"}, {"x-kubernetes-preserve-unknown-fields", true}}}}}}}}}}};
    ASSERT_EQ(
        sim_->Call("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd.dump())
            .status,
        201);
  }

  void PutWidget(const std::string& name, const std::string& spec) {
    const std::string path = "/apis/example.com/v1/namespaces/team/widgets/" + name;
    const std::string body =
        absl::StrCat(R"({"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":")", name,
                     R"(","namespace":"team"},"spec":)", spec, "}");
    if (sim_->Call("GET", path).status == 404) {
      auto created = sim_->Call("POST", "/apis/example.com/v1/namespaces/team/widgets", body);
      ASSERT_EQ(created.status, 201) << created.body;
    } else {
      auto updated = sim_->Call("PUT", path, body);
      ASSERT_EQ(updated.status, 200) << updated.body;
    }
  }

  std::string ClusterRv(const std::string& name) {
    auto got = sim_->Call("GET", "/apis/example.com/v1/namespaces/team/widgets/" + name);
    return json::parse(got.body, nullptr, false)["metadata"].value("resourceVersion", "");
  }

  // name -> resourceVersion as the materialization's checkpoint + stream fold to.
  std::map<std::string, std::string> Materialized() {
    auto conn = redisstore::RedisConnection::Connect(redisstore::RedisOptionsFor(*redis_));
    if (!conn.ok()) return {};
    redisstore::MaterializationStore store(conn->get(), redisstore::KeyPrefix::Default(), kWidgets,
                                           core::WatchScope::Namespace("team"));
    auto view = store.Load();
    if (!view.ok() || !view->checkpoint.has_value()) return {{"<no checkpoint>", ""}};
    std::map<std::string, std::string> out;
    for (const auto& [identity, body] : view->Fold()) {
      json object = json::parse(body, nullptr, false);
      out[object["metadata"].value("name", "")] = object["metadata"].value("resourceVersion", "");
    }
    return out;
  }

  testing::ScopedTempDir dir_{"limits"};
  testing::TestPki pki_;
  std::unique_ptr<testing::RedisServer> redis_;
  std::unique_ptr<kubesim::KubeSim> sim_;
  std::unique_ptr<testing::ServiceProcess> service_;
  int audit_port_ = 0;
};

TEST_F(InputLimitsTest, AnAuditEventTooDeepIsSkippedAndTheRestOfItsListIsRecorded) {
  StartMaterializer("v1/configmaps@team");  // default limits: the API server's own depth
  // Ready includes the webhook: the API server's first batch finds it listening.
  auto readyz = service_->HttpGet("/readyz");
  ASSERT_TRUE(readyz.ok());
  EXPECT_TRUE(absl::StrContains(readyz->second, "[+] audit_webhook")) << readyz->second;
  auto res = PostAudit(EventList(
      {Update("a-1", "one"), Update("a-2", "deep", Nested(core::kApiObjectMaxDepth + 1)),
       Update("a-3", "three"), Update("a-4", "deepest", Nested(core::kApiObjectMaxDepth))}));
  ASSERT_TRUE(res) << httplib::to_string(res.error());
  EXPECT_EQ(res->status, 200) << res->body;
  EXPECT_TRUE(absl::StrContains(res->body, "1 event(s) refused")) << res->body;
  for (const char* name : {"one", "three", "deepest"}) {
    EXPECT_TRUE(absl::StrContains(FactFor(name), "\"author\":\"alice\"")) << name;
  }
  EXPECT_EQ(FactFor("deep"), "");
  const std::string metrics = Metrics();
  EXPECT_EQ(
      Metric(metrics, "reverser_materializer_audit_events_refused_total{reason=\"too_deep\"}"), 1)
      << metrics;
  EXPECT_TRUE(absl::StrContains(service_->Logs(), "audit event refused")) << service_->Logs();
  EXPECT_TRUE(absl::StrContains(service_->Logs(), "\"audit_id\":\"a-2\""));
  ExpectHealthy();
}

TEST_F(InputLimitsTest, AnEventOverItsLimitIsSkippedAndABodyOverItsLimitIsAnswered413) {
  StartMaterializer("v1/configmaps@team",
                    {"--audit_max_event_bytes=16384", "--audit_max_body_bytes=262144"});
  const std::string big = absl::StrCat(R"({"data":")", std::string(40000, 'x'), R"("})");
  auto res = PostAudit(
      EventList({Update("a-1", "one"), Update("a-2", "big", big), Update("a-3", "three")}));
  ASSERT_TRUE(res) << httplib::to_string(res.error());
  EXPECT_EQ(res->status, 200) << res->body;
  EXPECT_NE(FactFor("one"), "");
  EXPECT_NE(FactFor("three"), "");
  EXPECT_EQ(FactFor("big"), "");

  std::vector<std::string> many;
  for (int i = 0; i < 800; ++i)
    many.push_back(Update(absl::StrCat("b-", i), absl::StrCat("m-", i)));
  const std::string too_long = EventList(many);
  ASSERT_GT(too_long.size(), 262144u);
  auto refused = PostAudit(too_long);
  if (refused) EXPECT_EQ(refused->status, 413) << refused->body;  // the server may close first

  // The service goes on: the next list is recorded.
  auto after = PostAudit(EventList({Update("a-5", "five")}));
  ASSERT_TRUE(after) << httplib::to_string(after.error());
  EXPECT_EQ(after->status, 200) << after->body;
  EXPECT_NE(FactFor("five"), "");
  const std::string metrics = Metrics();
  EXPECT_EQ(
      Metric(metrics, "reverser_materializer_audit_events_refused_total{reason=\"too_large\"}"), 1)
      << metrics;
  EXPECT_EQ(
      Metric(metrics, "reverser_materializer_audit_bodies_refused_total{reason=\"too_large\"}"), 1)
      << metrics;
  ExpectHealthy();
}

TEST_F(InputLimitsTest, AWatchObjectTooDeepIsSkippedCountedReportedAndTheWatchGoesOn) {
  CreateWidgetType();
  const std::string deep = Nested(40);  // the Widget is 41 levels deep
  PutWidget("before-deep", deep);
  PutWidget("good-1", R"({"size":1})");
  const std::string good_1_rv = ClusterRv("good-1");
  StartMaterializer("example.com/v1/widgets@team", {"--json_max_depth=32"});
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        return Materialized() == std::map<std::string, std::string>{{"good-1", good_1_rv}};
      },
      absl::Seconds(20)))
      << service_->Logs();

  // Live: a deep object is not stored, the next change is.
  PutWidget("live-deep", deep);
  PutWidget("good-2", R"({"size":2})");
  ASSERT_TRUE(
      testing::WaitFor([&] { return Materialized().count("good-2") == 1; }, absl::Seconds(20)));
  EXPECT_EQ(Materialized().count("live-deep"), 0u);

  // A stored object turned too deep keeps its last stored body...
  PutWidget("good-1", deep);
  PutWidget("good-2", R"({"size":3})");
  const std::string good_2_rv = ClusterRv("good-2");
  ASSERT_TRUE(
      testing::WaitFor([&] { return Materialized()["good-2"] == good_2_rv; }, absl::Seconds(20)));
  EXPECT_EQ(Materialized()["good-1"], good_1_rv);
  // ...and its deletion is recorded all the same.
  ASSERT_EQ(sim_->Call("DELETE", "/apis/example.com/v1/namespaces/team/widgets/good-1").status,
            200);
  ASSERT_TRUE(
      testing::WaitFor([&] { return Materialized().count("good-1") == 0; }, absl::Seconds(20)));
  // Once shallow again, the object refused at the start is stored: the watch went on.
  PutWidget("before-deep", R"({"size":4})");
  const std::string before_rv = ClusterRv("before-deep");
  ASSERT_TRUE(testing::WaitFor([&] { return Materialized()["before-deep"] == before_rv; },
                               absl::Seconds(20)));

  // Refused: before-deep (initial), live-deep (ADDED), good-1 (MODIFIED, DELETED).
  const std::string metrics = Metrics();
  EXPECT_EQ(Metric(metrics,
                   "reverser_materializer_refused_objects_total{group=\"example.com\","
                   "version=\"v1\",resource=\"widgets\",scope=\"ns:team\","
                   "reason=\"too_deep\"}"),
            4)
      << metrics;
  auto admin = reverser::v1::MaterializerAdmin::NewStub(
      grpc::CreateChannel(service_->grpc_target(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  reverser::v1::ListMaterializationsResponse list;
  ASSERT_TRUE(admin->ListMaterializations(&context, {}, &list).ok());
  ASSERT_EQ(list.materializations_size(), 1);
  const reverser::v1::MaterializationState& state = list.materializations(0);
  EXPECT_EQ(state.phase(), reverser::v1::MATERIALIZATION_PHASE_STREAMING);
  EXPECT_EQ(state.refused_objects(), 4u);
  EXPECT_TRUE(absl::StrContains(state.last_refused(), "Widget team/good-1"))
      << state.last_refused();
  EXPECT_TRUE(absl::StrContains(state.last_refused(), "deeper than 32 levels"));
  // Named once per object version in the log.
  EXPECT_TRUE(absl::StrContains(service_->Logs(), "\"name\":\"live-deep\""));
  // Not a watch error: no relisting, one long watch.
  int watches = 0;
  for (const std::string& line : sim_->RequestLog()) {
    if (absl::StrContains(line, "/widgets") && absl::StrContains(line, "watch=")) ++watches;
  }
  EXPECT_EQ(watches, 1);
  EXPECT_EQ(Metric(metrics, "reverser_materializer_watch_restarts_total"), -1) << metrics;
  ExpectHealthy();
}

TEST_F(InputLimitsTest, AnObjectThatBecameTooDeepKeepsItsLastBodyThroughARelist) {
  CreateWidgetType();
  PutWidget("good-1", R"({"size":1})");
  const std::string good_1_rv = ClusterRv("good-1");
  StartMaterializer("example.com/v1/widgets@team", {"--json_max_depth=32"});
  ASSERT_TRUE(
      testing::WaitFor([&] { return Materialized()["good-1"] == good_1_rv; }, absl::Seconds(20)));
  PutWidget("good-1", Nested(40));
  PutWidget("marker", R"({"size":2})");
  ASSERT_TRUE(
      testing::WaitFor([&] { return Materialized().count("marker") == 1; }, absl::Seconds(20)));
  // The materializer restarts after the API server has forgotten the history it would resume
  // from: it lists again and rebuilds the checkpoint, meeting good-1 too deep once more.
  auto stopped = service_->process().Terminate();
  ASSERT_TRUE(stopped.ok()) << stopped.status();
  service_.reset();
  PutWidget("marker", R"({"size":3})");
  const std::string marker_rv = ClusterRv("marker");
  sim_->Compact();
  StartMaterializer("example.com/v1/widgets@team", {"--json_max_depth=32"});
  const std::string replays =
      "reverser_materializer_replays_total{group=\"example.com\",version=\"v1\","
      "resource=\"widgets\",scope=\"ns:team\"}";
  ASSERT_TRUE(testing::WaitFor(
      [&] { return Metric(Metrics(), replays) == 1 && Materialized()["marker"] == marker_rv; },
      absl::Seconds(20)))
      << service_->Logs();
  // It is still there with the body last stored: not dropped from the new checkpoint.
  EXPECT_EQ(Materialized()["good-1"], good_1_rv);
  EXPECT_EQ(Materialized().count("marker"), 1u);
  EXPECT_EQ(Metric(Metrics(), "reverser_materializer_refused_objects_total"), 1);  // this process
  EXPECT_TRUE(absl::StrContains(service_->Logs(), "\"name\":\"good-1\"")) << service_->Logs();
}

TEST(InputLimitFlagsTest, LimitsOutsideTheirRangeAreRejectedAtStart) {
  const std::string binary = testing::RunfilePath("services/materializer/materializer");
  for (const auto& [flag, message] : std::vector<std::pair<std::string, std::string>>{
           {"--json_max_depth=10001", "--json_max_depth must be within 1..10000"},
           {"--json_max_depth=0", "--json_max_depth must be within 1..10000"},
           {"--audit_max_event_bytes=10", "--audit_max_event_bytes must be at least 1024"},
           {"--audit_max_body_bytes=2048", "at least --audit_max_event_bytes"},
           {"--audit_read_timeout=0s", "--audit_read_timeout must be at least 1s"},
           {"--audit_idle_timeout=500ms", "--audit_idle_timeout must be at least 1s"}}) {
    auto run =
        testing::RunCommand({binary, flag, "--static_claims=v1/configmaps",
                             "--redis_address=127.0.0.1:1", "--grpc_port=0", "--http_port=0"});
    ASSERT_TRUE(run.ok());
    EXPECT_NE(run->exit_code, 0) << flag;
    EXPECT_TRUE(absl::StrContains(run->err, message)) << flag << ": " << run->err;
  }
}

}  // namespace
}  // namespace reverser::materializer
