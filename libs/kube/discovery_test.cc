#include "libs/kube/discovery.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "libs/kube/httplib_transport.h"
#include "libs/kube/scripted_server.h"
#include "tests/fixtures/runfiles.h"

namespace reverser::kube {
namespace {

using nlohmann::json;
using reverser::testing::ReadTestdata;
using ::testing::Contains;
using ::testing::ElementsAre;
using testing::ScriptedServer;

constexpr char kDir[] = "k8s/discovery/kube-apiserver-generated/";

json Load(const std::string& file) {
  std::string text = ReadTestdata(file);
  EXPECT_FALSE(text.empty()) << file;
  return json::parse(text);
}

TEST(DiscoveryParseTest, AggregatedDocumentFromARealServer) {
  DiscoveryResult result;
  ASSERT_TRUE(
      ParseAggregatedDiscovery(Load(absl::StrCat(kDir, "aggregated_v2.json")), result).ok());
  EXPECT_EQ(result.resources.size(), 71u);
  EXPECT_TRUE(result.failures.empty());
  const ApiResource* deployments = result.FindPreferred("apps", "deployments");
  ASSERT_NE(deployments, nullptr);
  EXPECT_EQ(deployments->gvk, (core::GroupVersionKind{"apps", "v1", "Deployment"}));
  EXPECT_EQ(deployments->scope, core::Scope::kNamespaced);
  EXPECT_TRUE(deployments->IsWatchable());
  EXPECT_THAT(deployments->short_names, ElementsAre("deploy"));
  EXPECT_THAT(deployments->categories, ElementsAre("all"));
  ASSERT_EQ(deployments->subresources.size(), 2u);
  EXPECT_EQ(deployments->subresources[0].name, "scale");
  EXPECT_EQ(deployments->subresources[0].gvk,
            (core::GroupVersionKind{"autoscaling", "v1", "Scale"}));
  // autoscaling lists v2 first: v2 is preferred, v1 is not.
  const ApiResource* hpa_v1 = result.Find({"autoscaling", "v1", "horizontalpodautoscalers"});
  ASSERT_NE(hpa_v1, nullptr);
  EXPECT_FALSE(hpa_v1->preferred_version);
  EXPECT_EQ(result.FindPreferred("autoscaling", "horizontalpodautoscalers")->gvr.version, "v2");
}

TEST(DiscoveryParseTest, AggregatedCoreGroupAndStaleVersions) {
  DiscoveryResult result;
  ASSERT_TRUE(
      ParseAggregatedDiscovery(Load("k8s/handmade/discovery/aggregated-api-core.json"), result)
          .ok());
  const ApiResource* cms = result.FindPreferred("", "configmaps");
  ASSERT_NE(cms, nullptr);
  EXPECT_EQ(cms->gvk.ApiVersion(), "v1");
  const ApiResource* namespaces = result.FindPreferred("", "namespaces");
  ASSERT_NE(namespaces, nullptr);
  EXPECT_EQ(namespaces->scope, core::Scope::kCluster);

  json stale = json::parse(R"({"kind":"APIGroupDiscoveryList","items":[
    {"metadata":{"name":"metrics.k8s.io"},"versions":[{"version":"v1beta1","freshness":"Stale",
      "resources":[{"resource":"pods","scope":"Namespaced","verbs":["get","list"]}]}]}]})");
  DiscoveryResult partial;
  ASSERT_TRUE(ParseAggregatedDiscovery(stale, partial).ok());
  EXPECT_TRUE(partial.resources.empty());
  ASSERT_EQ(partial.failures.size(), 1u);
  EXPECT_EQ(partial.failures[0].group_version, "metrics.k8s.io/v1beta1");

  EXPECT_FALSE(ParseAggregatedDiscovery(json::parse(R"({"kind":"APIGroupList"})"), partial).ok());
  EXPECT_FALSE(ParseAggregatedDiscovery(json::parse(R"([1])"), partial).ok());
}

TEST(DiscoveryParseTest, LegacyResourceListAttachesSubresources) {
  DiscoveryResult result;
  ASSERT_TRUE(
      ParseApiResourceList(Load(absl::StrCat(kDir, "apis__apps__v1.json")), "apps/v1", true, result)
          .ok());
  const ApiResource* deployments = result.Find({"apps", "v1", "deployments"});
  ASSERT_NE(deployments, nullptr);
  EXPECT_TRUE(deployments->preferred_version);
  ASSERT_EQ(deployments->subresources.size(), 2u);
  EXPECT_EQ(deployments->subresources[0].name, "scale");
  EXPECT_EQ(deployments->subresources[0].gvk.group, "autoscaling");
  for (const ApiResource& r : result.resources)
    EXPECT_EQ(r.gvr.resource.find('/'), std::string::npos);

  DiscoveryResult core;
  ASSERT_TRUE(
      ParseApiResourceList(Load(absl::StrCat(kDir, "api__v1.json")), "v1", true, core).ok());
  const ApiResource* pods = core.Find({"", "v1", "pods"});
  ASSERT_NE(pods, nullptr);
  EXPECT_EQ(pods->subresources.size(), 9u);  // attach binding ephemeralcontainers eviction ...
  const ApiResource* nodes = core.Find({"", "v1", "nodes"});
  ASSERT_NE(nodes, nullptr);
  EXPECT_EQ(nodes->scope, core::Scope::kCluster);
}

// A legacy-only server (no aggregated discovery) where one aggregated API is down.
TEST(DiscoveryTest, LegacyFallbackReportsFailedGroupVersionsWithoutFailing) {
  ScriptedServer server;
  auto serve = [](std::string body) {
    return [body](const httplib::Request&, httplib::Response& res) {
      res.set_content(body, "application/json");
    };
  };
  server.server().Get("/api", serve(ReadTestdata(absl::StrCat(kDir, "api.json"))));
  server.server().Get("/api/v1", serve(ReadTestdata(absl::StrCat(kDir, "api__v1.json"))));
  server.server().Get("/apis", serve(R"({"kind":"APIGroupList","apiVersion":"v1","groups":[
        {"name":"apps","versions":[{"groupVersion":"apps/v1","version":"v1"}],
         "preferredVersion":{"groupVersion":"apps/v1","version":"v1"}},
        {"name":"metrics.k8s.io","versions":[{"groupVersion":"metrics.k8s.io/v1beta1","version":"v1beta1"}],
         "preferredVersion":{"groupVersion":"metrics.k8s.io/v1beta1","version":"v1beta1"}}]})"));
  server.server().Get("/apis/apps/v1",
                      serve(ReadTestdata(absl::StrCat(kDir, "apis__apps__v1.json"))));
  server.server().Get("/apis/metrics.k8s.io/v1beta1",
                      [](const httplib::Request&, httplib::Response& res) {
                        res.status = 503;
                        res.set_content("service unavailable\n", "text/plain");
                      });
  server.Start();
  ClusterConfig config;
  config.server = server.url();
  auto transport = HttplibTransport::Create(config);
  ASSERT_TRUE(transport.ok());
  RestClient client(std::shared_ptr<HttpTransport>(std::move(*transport)), {.max_retries = 0});
  auto result = Discover(client);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_FALSE(result->aggregated);
  EXPECT_NE(result->FindPreferred("", "configmaps"), nullptr);
  EXPECT_NE(result->FindPreferred("apps", "deployments"), nullptr);
  ASSERT_EQ(result->failures.size(), 1u);
  EXPECT_EQ(result->failures[0].group_version, "metrics.k8s.io/v1beta1");
  EXPECT_EQ(result->failures[0].status.code(), absl::StatusCode::kUnavailable);
  std::vector<std::string> requests = server.requests();
  EXPECT_THAT(requests, ElementsAre("GET /api", "GET /api/v1", "GET /apis", "GET /apis/apps/v1",
                                    "GET /apis/metrics.k8s.io/v1beta1"));
}

TEST(DiscoveryTest, AggregatedServerNeedsTwoRequests) {
  ScriptedServer server;
  std::string accept_seen;
  std::mutex mu;
  auto serve = [&](std::string body) {
    return [&, body](const httplib::Request& req, httplib::Response& res) {
      {
        std::lock_guard lock(mu);
        accept_seen = req.get_header_value("Accept");
      }
      res.set_content(body, "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList");
    };
  };
  server.server().Get("/api",
                      serve(ReadTestdata("k8s/handmade/discovery/aggregated-api-core.json")));
  server.server().Get("/apis", serve(ReadTestdata(absl::StrCat(kDir, "aggregated_v2.json"))));
  server.Start();
  ClusterConfig config;
  config.server = server.url();
  auto transport = HttplibTransport::Create(config);
  ASSERT_TRUE(transport.ok());
  RestClient client(std::shared_ptr<HttpTransport>(std::move(*transport)));
  auto result = Discover(client);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_TRUE(result->aggregated);
  EXPECT_TRUE(result->failures.empty());
  EXPECT_NE(result->FindPreferred("", "configmaps"), nullptr);
  EXPECT_NE(result->FindPreferred("apps", "deployments"), nullptr);
  EXPECT_THAT(server.requests(), ElementsAre("GET /api", "GET /apis"));
  EXPECT_EQ(accept_seen, kAggregatedDiscoveryAccept);
}

}  // namespace
}  // namespace reverser::kube
