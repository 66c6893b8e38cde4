// The catalog's reference metrics. The binary against kube-sim, read from its /metrics: refresh
// outcomes, resources by the default watch policy, group/versions, watched types per GitTarget.
// The degraded group/version count from a scan with a failed group/version (kube-sim serves
// aggregated discovery, which has no failed group/versions to offer).

#include "services/catalog/catalog_metrics.h"

#include <grpcpp/grpcpp.h>

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "libs/typeset/scan_builder.h"
#include "nlohmann/json.hpp"
#include "proto/reverser/v1/catalog.grpc.pb.h"
#include "tests/fixtures/metrics_text.h"
#include "tests/fixtures/process.h"
#include "tests/fixtures/service_process.h"
#include "tests/fixtures/temp_dir.h"
#include "tools/kube-sim/kube_sim.h"

namespace reverser::catalog {
namespace {

using nlohmann::json;
using testing::MetricSample;
using typeset::testing::Res;
using typeset::testing::ScanBuilder;

constexpr absl::Duration kWait = absl::Seconds(30);
constexpr char kAllowed[] = "gitopsreverser_api_catalog_resources{state=\"allowed\"}";
constexpr char kExcluded[] = "gitopsreverser_api_catalog_resources{state=\"excluded\"}";
constexpr char kTrusted[] = "gitopsreverser_api_catalog_group_versions{state=\"trusted\"}";
constexpr char kDegraded[] = "gitopsreverser_api_catalog_group_versions{state=\"degraded\"}";
constexpr char kChanged[] = "gitopsreverser_api_catalog_refresh_total{outcome=\"changed\"}";
constexpr char kUnchanged[] = "gitopsreverser_api_catalog_refresh_total{outcome=\"unchanged\"}";
constexpr char kError[] = "gitopsreverser_api_catalog_refresh_total{outcome=\"error\"}";

std::string WatchedTypes(const std::string& ns, const std::string& name) {
  return absl::StrCat("gitopsreverser_watched_types{gittarget_namespace=\"", ns,
                      "\",gittarget_name=\"", name, "\"}");
}

TEST(CatalogMetricsTest, CountsResourcesByPolicyAndGroupVersionsByState) {
  runtime::MetricsRegistry registry;
  CatalogMetrics metrics(&registry);
  typeset::ApiResourceCatalog catalog;
  catalog.Update(ScanBuilder()
                     .Core({Res("configmaps", "ConfigMap"), Res("pods", "Pod"),
                            Res("events", "Event"), Res("pods/status", "Pod")})
                     .Group("apps", "v1", {Res("deployments", "Deployment")})
                     .Failed("metrics.k8s.io", "v1beta1")
                     .Incomplete()
                     .Build());
  metrics.CatalogCounts(catalog.current(), typeset::WatchPolicy::Default());
  const std::string text = registry.RenderText();
  EXPECT_EQ(MetricSample(text, kAllowed), 2) << text;  // configmaps, deployments
  EXPECT_EQ(MetricSample(text, kExcluded), 2);         // pods, events; not pods/status
  EXPECT_EQ(MetricSample(text, kTrusted), 2);          // v1, apps/v1
  EXPECT_EQ(MetricSample(text, kDegraded), 1);         // metrics.k8s.io/v1beta1
}

TEST(CatalogMetricsTest, WatchedTypesOfATargetAFullUpdateNoLongerListsDropToZero) {
  runtime::MetricsRegistry registry;
  CatalogMetrics metrics(&registry);
  auto table = [](const std::string& name, int types) {
    reverser::v1::WatchedTypeTable t;
    t.mutable_target()->set_namespace_("team");
    t.mutable_target()->set_name(name);
    for (int i = 0; i < types; ++i) t.add_types();
    return t;
  };
  reverser::v1::TableUpdate full;
  full.set_full(true);
  *full.add_upserted() = table("a", 2);
  *full.add_upserted() = table("b", 1);
  metrics.WatchedTypes(full);
  reverser::v1::TableUpdate only_a;
  only_a.set_full(true);
  *only_a.add_upserted() = table("a", 3);
  metrics.WatchedTypes(only_a);
  const std::string text = registry.RenderText();
  EXPECT_EQ(MetricSample(text, WatchedTypes("team", "a")), 3) << text;
  EXPECT_EQ(MetricSample(text, WatchedTypes("team", "b")), 0);
}

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

class CatalogMetricsBinaryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto sim = kubesim::KubeSim::Start({});
    ASSERT_TRUE(sim.ok()) << sim.status();
    sim_ = *std::move(sim);
    for (const char* plural :
         {"gitproviders", "gittargets", "watchrules", "clusterwatchrules", "commitrequests"}) {
      auto r = sim_->Call("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                          ReadText(absl::StrCat("deploy/crds/configbutler.ai_", plural, ".yaml")),
                          "application/yaml");
      ASSERT_EQ(r.status, 201) << r.body;
    }
    ASSERT_EQ(sim_->Call("POST", "/api/v1/namespaces", R"({"metadata":{"name":"team-a"}})").status,
              201);
    const std::string kubeconfig = dir_.path() + "/kubeconfig";
    ASSERT_TRUE(sim_->WriteKubeconfig(kubeconfig).ok());
    auto service = testing::ServiceProcess::Start(
        "catalog", testing::RunfilePath("services/catalog/catalog"),
        {"--kubeconfig=" + kubeconfig, "--discovery_refresh_period=1s"});
    ASSERT_TRUE(service.ok()) << service.status();
    service_ = std::move(*service);
    ASSERT_TRUE(service_->WaitReady().ok()) << service_->Logs();
  }
  void TearDown() override {
    service_.reset();
    if (sim_) sim_->Stop();
  }

  std::string Metrics() {
    auto metrics = service_->HttpGet("/metrics");
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
        << text;
    return text;
  }

  // Types the catalog's registry refuses by the default watch policy.
  int PolicyRefusedTypes() {
    auto channel = grpc::CreateChannel(service_->grpc_target(), grpc::InsecureChannelCredentials());
    auto catalog = reverser::v1::Catalog::NewStub(channel);
    grpc::ClientContext context;
    reverser::v1::ListTypesResponse types;
    EXPECT_TRUE(catalog->ListTypes(&context, {}, &types).ok());
    int refused = 0;
    for (const auto& record : types.records()) {
      for (const auto& check : record.checks()) {
        if (check.requirement() == "policy" && !check.passed()) ++refused;
      }
    }
    return refused;
  }

  void Apply(const std::string& path, json object) {
    object["apiVersion"] = "configbutler.ai/v1alpha3";
    auto r = sim_->Call("POST", path, object.dump());
    ASSERT_EQ(r.status, 201) << r.body;
  }

  testing::ScopedTempDir dir_{"catalog-metrics"};
  testing::ScopedTempDir remote_{"remote"};
  std::unique_ptr<kubesim::KubeSim> sim_;
  std::unique_ptr<testing::ServiceProcess> service_;
};

TEST_F(CatalogMetricsBinaryTest, RefreshOutcomesAndCatalogCounts) {
  // The first pass builds the catalog; the 1 s passes after it find nothing new.
  std::string text = MetricsOnce([](const std::string& t) {
    return MetricSample(t, kChanged) >= 1 && MetricSample(t, kUnchanged) >= 1;
  });
  EXPECT_EQ(MetricSample(text, kError), std::nullopt);
  const int excluded = PolicyRefusedTypes();
  ASSERT_GT(excluded, 0) << "kube-sim serves pods and events";
  EXPECT_EQ(MetricSample(text, kExcluded), excluded);
  EXPECT_EQ(MetricSample(text, kDegraded), 0);
  const double allowed = MetricSample(text, kAllowed).value_or(0);
  const double trusted = MetricSample(text, kTrusted).value_or(0);
  EXPECT_GT(allowed, 0);
  EXPECT_GT(trusted, 0);

  // A new CRD: one more allowed resource, one more trusted group/version, one pass that changed.
  const double changed = MetricSample(text, kChanged).value_or(0);
  json crd = {{"apiVersion", "apiextensions.k8s.io/v1"},
              {"kind", "CustomResourceDefinition"},
              {"metadata", {{"name", "widgets.example.com"}}},
              {"spec",
               {{"group", "example.com"},
                {"scope", "Namespaced"},
                {"names",
                 {{"plural", "widgets"},
                  {"singular", "widget"},
                  {"kind", "Widget"},
                  {"listKind", "WidgetList"}}},
                {"versions",
                 {{{"name", "v1"},
                   {"served", true},
                   {"storage", true},
                   {"schema", {{"openAPIV3Schema", {{"type", "object"}}}}}}}}}}};
  ASSERT_EQ(
      sim_->Call("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd.dump())
          .status,
      201);
  text =
      MetricsOnce([&](const std::string& t) { return MetricSample(t, kAllowed) == allowed + 1; });
  EXPECT_EQ(MetricSample(text, kTrusted), trusted + 1);
  EXPECT_EQ(MetricSample(text, kChanged), changed + 1) << text;

  // Discovery failing as a whole: counted as an error; the counts keep the last good pass.
  sim_->faults().Add({.action = kubesim::FaultRule::Action::kServiceUnavailable,
                      .verb = "get",
                      .path_prefix = "/api"});
  text = MetricsOnce([](const std::string& t) { return MetricSample(t, kError) >= 1; });
  EXPECT_EQ(MetricSample(text, kAllowed), allowed + 1);
  EXPECT_EQ(MetricSample(text, kExcluded), excluded);
  sim_->faults().Clear();
  const double unchanged = MetricSample(text, kUnchanged).value_or(0);
  MetricsOnce([&](const std::string& t) { return MetricSample(t, kUnchanged) > unchanged; });
}

TEST_F(CatalogMetricsBinaryTest, WatchedTypesPerGitTarget) {
  Apply("/apis/configbutler.ai/v1alpha3/namespaces/team-a/gitproviders",
        {{"kind", "GitProvider"},
         {"metadata", {{"namespace", "team-a"}, {"name", "repo"}}},
         {"spec",
          {{"url", absl::StrCat("file://", remote_.path())}, {"allowedBranches", {"main"}}}}});
  Apply("/apis/configbutler.ai/v1alpha3/namespaces/team-a/gittargets",
        {{"kind", "GitTarget"},
         {"metadata", {{"namespace", "team-a"}, {"name", "app"}}},
         {"spec", {{"providerRef", {{"name", "repo"}}}, {"branch", "main"}, {"path", "apps"}}}});
  auto rule = [](const std::string& name, const std::string& resource) {
    return json{{"kind", "WatchRule"},
                {"metadata", {{"namespace", "team-a"}, {"name", name}}},
                {"spec",
                 {{"targetRef", {{"name", "app"}}},
                  {"rules", {{{"apiGroups", {""}}, {"resources", {resource}}}}}}}};
  };
  const std::string rules = "/apis/configbutler.ai/v1alpha3/namespaces/team-a/watchrules";
  Apply(rules, rule("cm", "configmaps"));
  const std::string app = WatchedTypes("team-a", "app");
  MetricsOnce([&](const std::string& t) { return MetricSample(t, app) == 1; });
  Apply(rules, rule("svc", "services"));
  MetricsOnce([&](const std::string& t) { return MetricSample(t, app) == 2; });
  EXPECT_EQ(MetricSample(Metrics(), "reverser_catalog_claimed_types"), 2);
  // The GitTarget goes: its series drops to zero rather than lingering.
  ASSERT_EQ(sim_->Call("DELETE", "/apis/configbutler.ai/v1alpha3/namespaces/team-a/gittargets/app")
                .status,
            200);
  MetricsOnce([&](const std::string& t) { return MetricSample(t, app) == 0; });
}

}  // namespace
}  // namespace reverser::catalog
