// Feeds real kube-apiserver discovery documents (tests/testdata/k8s/discovery) through the
// kube parsers, the catalog and the registry, and checks the verdicts on real built-in types.

#include "libs/typeset/kube_scan.h"

#include "gtest/gtest.h"
#include "libs/typeset/catalog.h"
#include "libs/typeset/registry.h"
#include "nlohmann/json.hpp"
#include "tests/fixtures/runfiles.h"
#include "tests/fixtures/temp_dir.h"

namespace reverser::typeset {
namespace {

nlohmann::json LoadJson(const std::string& relative) {
  auto dir = reverser::testing::TestdataDir();
  EXPECT_TRUE(dir.ok()) << dir.status();
  if (!dir.ok()) return nullptr;
  auto text = reverser::testing::ReadFile(*dir + "/k8s/" + relative);
  EXPECT_TRUE(text.ok()) << text.status();
  if (!text.ok()) return nullptr;
  return nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
}

kube::DiscoveryResult RealDiscovery() {
  kube::DiscoveryResult result;
  nlohmann::json core = LoadJson("discovery/kube-apiserver-generated/api__v1.json");
  EXPECT_TRUE(kube::ParseApiResourceList(core, "v1", /*preferred=*/true, result).ok());
  nlohmann::json groups = LoadJson("discovery/kube-apiserver-generated/aggregated_v2.json");
  EXPECT_TRUE(kube::ParseAggregatedDiscovery(groups, result).ok());
  return result;
}

class RealDiscoveryTest : public ::testing::Test {
 protected:
  RealDiscoveryTest() : registry_(clock_) {}
  void Scan(const DiscoveryScan& scan) { registry_.UpdateFromScan(catalog_.Update(scan)); }
  TypeRecord Get(const core::GroupVersionResource& gvr) {
    auto r = registry_.ByGVR(gvr);
    EXPECT_TRUE(r.has_value()) << gvr.ToString();
    return r.value_or(TypeRecord{});
  }

  core::FakeClock clock_;
  ApiResourceCatalog catalog_;
  Registry registry_;
};

TEST_F(RealDiscoveryTest, BuiltinVerdictsFromARealServer) {
  DiscoveryScan scan = ScanFromDiscovery(RealDiscovery());
  EXPECT_TRUE(scan.complete);
  Scan(scan);

  TypeRecord cm = Get({"", "v1", "configmaps"});
  EXPECT_EQ(cm.verdict(), Verdict::kFollowable);
  EXPECT_EQ(cm.origin, Origin::kBuiltin);
  EXPECT_EQ(cm.gvk.kind, "ConfigMap");

  TypeRecord secrets = Get({"", "v1", "secrets"});
  EXPECT_EQ(secrets.verdict(), Verdict::kFollowable);
  EXPECT_TRUE(secrets.sensitive);

  TypeRecord pods = Get({"", "v1", "pods"});
  EXPECT_EQ(pods.verdict(), Verdict::kRefused);
  EXPECT_EQ(pods.followability.FirstFailure()->reason, "denied-by-policy");
  EXPECT_FALSE(pods.subresources.empty());

  // bindings are create-only; componentstatuses get/list only.
  EXPECT_EQ(Get({"", "v1", "bindings"}).followability.summary,
            "not followable — missing required verb: get, list, watch, patch");
  EXPECT_EQ(Get({"", "v1", "componentstatuses"}).followability.summary,
            "not followable — missing required verb: watch, patch");

  TypeRecord deployments = Get({"apps", "v1", "deployments"});
  EXPECT_EQ(deployments.verdict(), Verdict::kFollowable);
  EXPECT_TRUE(deployments.preferred);
  EXPECT_EQ(deployments.subresources, (std::vector<std::string>{"scale", "status"}));
  EXPECT_EQ(Get({"apps", "v1", "controllerrevisions"}).verdict(), Verdict::kRefused);
  EXPECT_EQ(Get({"events.k8s.io", "v1", "events"}).verdict(), Verdict::kRefused);
  EXPECT_EQ(Get({"batch", "v1", "jobs"}).verdict(), Verdict::kRefused);
  EXPECT_EQ(
      Get({"authentication.k8s.io", "v1", "tokenreviews"}).followability.FirstFailure()->reason,
      "missing-verb");

  // autoscaling serves v2 (preferred) and v1.
  auto hpas = registry_.ByGroupResource("autoscaling", "horizontalpodautoscalers");
  ASSERT_EQ(hpas.size(), 2u);
  for (const TypeRecord& r : hpas) EXPECT_EQ(r.preferred, r.gvr.version == "v2") << r.gvr.version;

  // A rescan of the same documents changes nothing.
  uint64_t generation = catalog_.current().generation;
  uint64_t revision = registry_.revision();
  Scan(ScanFromDiscovery(RealDiscovery()));
  EXPECT_EQ(catalog_.current().generation, generation);
  EXPECT_EQ(registry_.revision(), revision);
  EXPECT_GT(catalog_.stats().entries, 50u);
}

TEST_F(RealDiscoveryTest, FailuresBecomeDegradedOrIncompleteScans) {
  kube::DiscoveryResult result = RealDiscovery();
  Scan(ScanFromDiscovery(result));
  clock_.Advance(Registry::kSettleWindow);
  registry_.Tick();

  // apps/v1 now fails: deployments are retained with their last-known facts.
  kube::DiscoveryResult failing;
  for (const auto& r : result.resources) {
    if (r.gvr.group != "apps") failing.resources.push_back(r);
  }
  failing.failures.push_back({"apps/v1", absl::UnavailableError("503")});
  DiscoveryScan scan = ScanFromDiscovery(failing);
  ASSERT_EQ(scan.failed.size(), 1u);
  EXPECT_FALSE(scan.complete);
  EXPECT_EQ(scan.failed[0].group, "apps");
  EXPECT_EQ(scan.failed[0].error, "503");
  Scan(scan);
  TypeRecord d = Get({"apps", "v1", "deployments"});
  EXPECT_EQ(d.verdict(), Verdict::kRetained);
  EXPECT_EQ(d.followability.FirstFailure()->reason, "discovery-degraded");
  EXPECT_EQ(catalog_.current().degraded.size(), 1u);

  kube::DiscoveryResult no_groups;
  no_groups.failures.push_back({"", absl::UnavailableError("/apis failed")});
  EXPECT_FALSE(ScanFromDiscovery(no_groups).complete);
}

TEST(CrdGroupResourcesTest, ListsAndSingleObjects) {
  nlohmann::json list = {
      {"kind", "CustomResourceDefinitionList"},
      {"items",
       {{{"spec", {{"group", "example.com"}, {"names", {{"plural", "widgets"}}}}}},
        {{"spec", {{"group", "configbutler.ai"}, {"names", {{"plural", "gittargets"}}}}}},
        {{"spec", {{"group", 5}}}},
        "junk"}}};
  EXPECT_EQ(CrdGroupResources(list),
            (std::vector<std::string>{"example.com/widgets", "configbutler.ai/gittargets"}));
  EXPECT_EQ(CrdGroupResources(list["items"][0]), (std::vector<std::string>{"example.com/widgets"}));
  EXPECT_TRUE(CrdGroupResources(nullptr).empty());
  EXPECT_TRUE(CrdGroupResources(nlohmann::json::array()).empty());
}

}  // namespace
}  // namespace reverser::typeset
