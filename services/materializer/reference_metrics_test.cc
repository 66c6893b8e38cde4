// The materializer binary's reference metrics, read from its /metrics: the audit webhook's
// EventList item counter and duration by outcome, and the author fact index size (a real
// redis-server holds the facts; kube-sim serves the one claimed type).

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "tests/fixtures/metrics_text.h"
#include "tests/fixtures/process.h"
#include "tests/fixtures/redis_server.h"
#include "tests/fixtures/service_process.h"
#include "tests/fixtures/temp_dir.h"
#include "tools/kube-sim/kube_sim.h"

namespace reverser::materializer {
namespace {

using nlohmann::json;
using testing::MetricSample;

json Update(const std::string& uid, const std::string& rv) {
  return {{"auditID", "id-" + rv},
          {"stage", "ResponseComplete"},
          {"verb", "update"},
          {"requestURI", "/api/v1/namespaces/team/configmaps/web"},
          {"user", {{"username", "alice"}}},
          {"objectRef",
           {{"resource", "configmaps"},
            {"namespace", "team"},
            {"name", "web"},
            {"uid", uid},
            {"apiVersion", "v1"}}},
          {"responseStatus", {{"code", 200}}},
          {"responseObject",
           {{"kind", "ConfigMap"},
            {"metadata", {{"name", "web"}, {"uid", uid}, {"resourceVersion", rv}}}}}};
}

json Get() {
  return {{"auditID", "id-get"},
          {"stage", "ResponseComplete"},
          {"verb", "get"},
          {"user", {{"username", "alice"}}},
          {"objectRef", {{"resource", "configmaps"}, {"apiVersion", "v1"}}}};
}

// A deletecollection whose response names `items` ConfigMaps (each becomes a `:last` fact).
json DeleteCollection(int items) {
  json list = json::array();
  for (int i = 0; i < items; ++i) {
    const std::string name = "gone-" + std::to_string(i);
    list.push_back({{"metadata", {{"name", name}, {"namespace", "team"}, {"uid", "u-" + name}}}});
  }
  return {{"auditID", "id-dc"},
          {"stage", "ResponseComplete"},
          {"verb", "deletecollection"},
          {"requestURI", "/api/v1/namespaces/team/configmaps"},
          {"user", {{"username", "bob"}}},
          {"objectRef", {{"resource", "configmaps"}, {"namespace", "team"}, {"apiVersion", "v1"}}},
          {"responseStatus", {{"code", 200}}},
          {"responseObject", {{"kind", "ConfigMapList"}, {"apiVersion", "v1"}, {"items", list}}}};
}

std::string EventList(const json& items) {
  return json{{"kind", "EventList"}, {"apiVersion", "audit.k8s.io/v1"}, {"items", items}}.dump();
}

class ReferenceMetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto redis = testing::RedisServer::Start();
    ASSERT_TRUE(redis.ok()) << redis.status();
    redis_ = std::move(*redis);
    auto sim = kubesim::KubeSim::Start({});
    ASSERT_TRUE(sim.ok()) << sim.status();
    sim_ = std::move(*sim);
    ASSERT_TRUE(sim_->WriteKubeconfig(dir_.path() + "/kubeconfig").ok());
    auto audit_port = testing::PickFreePort();
    ASSERT_TRUE(audit_port.ok());
    audit_port_ = *audit_port;
    auto service = testing::ServiceProcess::Start(
        "materializer", testing::RunfilePath("services/materializer/materializer"),
        {"--kubeconfig=" + dir_.path() + "/kubeconfig", "--redis_address=" + redis_->address(),
         "--static_claims=v1/configmaps@team", "--audit_insecure",
         "--audit_port=" + std::to_string(audit_port_), "--fact_index_size_interval=0s"});
    ASSERT_TRUE(service.ok()) << service.status();
    service_ = std::move(*service);
  }

  // POSTs `body` to the audit webhook; the answer's status (0 when nothing answered).
  int Post(const std::string& body) {
    httplib::Client webhook("127.0.0.1", audit_port_);
    auto res = webhook.Post("/audit-webhook", body, "application/json");
    return res ? res->status : 0;
  }

  std::string Metrics() {
    auto metrics = service_->HttpGet("/metrics");
    EXPECT_TRUE(metrics.ok()) << metrics.status();
    return metrics.ok() ? metrics->second : "";
  }

  // The audit fact keys Redis holds, counted independently of the service.
  int FactKeys() {
    auto keys = redis_->Cli({"--scan", "--pattern", "reverser:author:v1:audit:*"});
    EXPECT_TRUE(keys.ok()) << keys.status();
    std::vector<std::string> lines = absl::StrSplit(keys.value_or(""), '\n', absl::SkipEmpty());
    return static_cast<int>(lines.size());
  }

  testing::ScopedTempDir dir_{"mat-metrics"};
  std::unique_ptr<testing::RedisServer> redis_;
  std::unique_ptr<kubesim::KubeSim> sim_;
  std::unique_ptr<testing::ServiceProcess> service_;
  int audit_port_ = 0;
};

TEST_F(ReferenceMetricsTest, EventListItemsAndDurationAreCountedByOutcome) {
  // Two items, one of them an accepted update.
  ASSERT_EQ(Post(EventList(json::array({Update("u-1", "42"), Get()}))), 200);
  ASSERT_EQ(Post(EventList(json::array())), 200);
  ASSERT_EQ(Post("{not an event list"), 400);
  std::string text = Metrics();
  EXPECT_EQ(
      MetricSample(text, "gitopsreverser_audit_eventlist_events_total{outcome=\"processed\"}"), 2)
      << text;
  EXPECT_EQ(MetricSample(text, "gitopsreverser_audit_eventlist_events_total{outcome=\"empty\"}"),
            0);
  // The items of a body that is no EventList are not known: no sample, as the reference.
  EXPECT_FALSE(absl::StrContains(
      text, "gitopsreverser_audit_eventlist_events_total{outcome=\"decode_error\"}"));
  EXPECT_EQ(MetricSample(text, "gitopsreverser_audit_eventlists_total{outcome=\"decode_error\"}"),
            1);
  EXPECT_EQ(
      MetricSample(text,
                   "gitopsreverser_audit_eventlist_duration_seconds_count{outcome=\"processed\"}"),
      1);
  EXPECT_EQ(MetricSample(
                text, "gitopsreverser_audit_eventlist_duration_seconds_count{outcome=\"empty\"}"),
            1);

  ASSERT_EQ(Post(EventList(json::array({Update("u-1", "43"), Update("u-2", "44"), Get()}))), 200);
  EXPECT_EQ(
      MetricSample(Metrics(), "gitopsreverser_audit_eventlist_events_total{outcome=\"processed\"}"),
      5);

  // Redis down: the list is answered 500 and its items are counted under process_error.
  redis_->Crash();
  ASSERT_EQ(Post(EventList(json::array({Update("u-3", "45")}))), 500);
  text = Metrics();
  EXPECT_EQ(
      MetricSample(text, "gitopsreverser_audit_eventlist_events_total{outcome=\"process_error\"}"),
      1)
      << text;
  EXPECT_EQ(MetricSample(text, "gitopsreverser_audit_eventlists_total{outcome=\"process_error\"}"),
            1);
  ASSERT_TRUE(redis_->Revive().ok());
}

TEST_F(ReferenceMetricsTest, FactWritesAreCountedPerEvent) {
  ASSERT_EQ(
      Post(EventList(json::array({Update("u-1", "42"), Update("u-2", "43"), DeleteCollection(3)}))),
      200);
  const std::string text = Metrics();
  EXPECT_EQ(MetricSample(text, "gitopsreverser_attribution_fact_events_total{op=\"written\"}"), 2)
      << text;
  // One expansion however many items the collection named (three facts here).
  EXPECT_EQ(
      MetricSample(
          text, "gitopsreverser_attribution_fact_events_total{op=\"deletecollection_expanded\"}"),
      1);
  EXPECT_EQ(FactKeys(), 7);  // two exact and two `:last` keys, three `:last` keys
}

TEST_F(ReferenceMetricsTest, FactIndexSizeIsTheFactKeysRedisHolds) {
  // A uid and an rv: the exact key and the `:last` copy.
  ASSERT_EQ(Post(EventList(json::array({Update("u-1", "42")}))), 200);
  ASSERT_EQ(FactKeys(), 2);
  EXPECT_EQ(MetricSample(Metrics(), "gitopsreverser_attribution_fact_index_size"), 2);
  // A later write of the same object adds its exact key and replaces `:last`; another object
  // adds two.
  ASSERT_EQ(Post(EventList(json::array({Update("u-1", "43"), Update("u-2", "44")}))), 200);
  ASSERT_EQ(FactKeys(), 5);
  EXPECT_EQ(MetricSample(Metrics(), "gitopsreverser_attribution_fact_index_size"), 5);
  // Facts that expired are gone from the next count.
  ASSERT_TRUE(redis_->Cli({"DEL", "reverser:author:v1:audit:configmaps:object:u-1:42"}).ok());
  ASSERT_EQ(Post(EventList(json::array({Get()}))), 200);  // records nothing: no count
  EXPECT_EQ(MetricSample(Metrics(), "gitopsreverser_attribution_fact_index_size"), 5);
  ASSERT_EQ(Post(EventList(json::array({Update("u-3", "45")}))), 200);
  ASSERT_EQ(FactKeys(), 6);
  EXPECT_EQ(MetricSample(Metrics(), "gitopsreverser_attribution_fact_index_size"), 6);
}

}  // namespace
}  // namespace reverser::materializer
