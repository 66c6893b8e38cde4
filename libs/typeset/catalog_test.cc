#include "libs/typeset/catalog.h"

#include "gtest/gtest.h"
#include "libs/typeset/scan_builder.h"

namespace reverser::typeset {
namespace {

using testing::Res;
using testing::ScanBuilder;
using testing::Sub;

DiscoveryScan Basic() {
  return ScanBuilder()
      .Core({Res("configmaps", "ConfigMap"), Res("namespaces", "Namespace", core::Scope::kCluster),
             Res("pods", "Pod"), Sub("pods/status", "Pod"), Sub("pods/log", "Pod")})
      .Group("apps", "v1", {Res("deployments", "Deployment"), Sub("deployments/scale", "Scale")})
      .Group("example.com", "v1", {Res("widgets", "Widget")})
      .Crd("example.com/widgets")
      .Build();
}

const CatalogEntry* Find(const CatalogSnapshot& s, const std::string& group,
                         const std::string& resource) {
  for (const auto& e : s.entries) {
    if (e.gvr.group == group && e.gvr.resource == resource) return &e;
  }
  return nullptr;
}

TEST(CatalogTest, NormalizesEntriesSortedWithSubresourcesFolded) {
  CatalogSnapshot s = Normalize(Basic());
  ASSERT_EQ(s.entries.size(), 5u);
  for (size_t i = 1; i < s.entries.size(); ++i) EXPECT_LT(s.entries[i - 1].gvr, s.entries[i].gvr);
  const CatalogEntry* pods = Find(s, "", "pods");
  ASSERT_NE(pods, nullptr);
  EXPECT_EQ(pods->subresources, (std::vector<std::string>{"log", "status"}));
  EXPECT_EQ(pods->gvk.kind, "Pod");
  EXPECT_EQ(pods->scope, core::Scope::kNamespaced);
  EXPECT_EQ(Find(s, "apps", "deployments")->subresources, (std::vector<std::string>{"scale"}));
  EXPECT_EQ(Find(s, "", "namespaces")->scope, core::Scope::kCluster);
  EXPECT_EQ(s.scanned.size(), 3u);
  EXPECT_EQ(s.scanned[0].ToString(), "v1");
}

TEST(CatalogTest, InfersOriginFromGroupAndCrdEvidence) {
  DiscoveryScan scan = Basic();
  scan.group_versions.push_back({"metrics.example.io",
                                 "v1beta1",
                                 true,
                                 Origin::kAggregated,
                                 {Res("nodes", "NodeMetrics", core::Scope::kCluster)}});
  scan.group_versions.push_back(
      {"mystery.example.org", "v1", true, Origin::kUnknown, {Res("things", "Thing")}});
  scan.group_versions.push_back(
      {"gateway.networking.k8s.io", "v1", true, Origin::kUnknown, {Res("gateways", "Gateway")}});
  scan.crd_group_resources.push_back("gateway.networking.k8s.io/gateways");
  CatalogSnapshot s = Normalize(scan);
  EXPECT_EQ(Find(s, "", "configmaps")->origin, Origin::kBuiltin);
  EXPECT_EQ(Find(s, "apps", "deployments")->origin, Origin::kBuiltin);
  EXPECT_EQ(Find(s, "example.com", "widgets")->origin, Origin::kCrd);
  EXPECT_EQ(Find(s, "metrics.example.io", "nodes")->origin, Origin::kAggregated);
  EXPECT_EQ(Find(s, "mystery.example.org", "things")->origin, Origin::kUnknown);
  EXPECT_EQ(Find(s, "gateway.networking.k8s.io", "gateways")->origin, Origin::kCrd);
}

TEST(CatalogTest, FlagsSubresourceOnlyAndIdentityProblems) {
  DiscoveryScan scan = ScanBuilder()
                           .Group("odd.example.com", "v1",
                                  {Sub("ghosts/status", "Ghost"), Res("as", "Same"),
                                   Res("bs", "Same"), Res("dups", "Dup"), Res("dups", "Other")})
                           .Build();
  CatalogSnapshot s = Normalize(scan);
  EXPECT_TRUE(Find(s, "odd.example.com", "ghosts")->subresource_only);
  EXPECT_EQ(Find(s, "odd.example.com", "as")->kind_shared_with, (std::vector<std::string>{"bs"}));
  EXPECT_EQ(Find(s, "odd.example.com", "bs")->kind_shared_with, (std::vector<std::string>{"as"}));
  EXPECT_TRUE(Find(s, "odd.example.com", "dups")->conflicting_listings);
}

TEST(CatalogTest, IgnoresMalformedInputWithoutCrashing) {
  DiscoveryScan scan = ScanBuilder().Group("x.io", "", {Res("a", "A")}).Core({Res("", "")}).Build();
  CatalogSnapshot s = Normalize(scan);
  EXPECT_TRUE(s.entries.empty());
  EXPECT_EQ(s.scanned.size(), 1u);
}

TEST(CatalogTest, GenerationMovesOnlyWhenNormalizedFactsChange) {
  ApiResourceCatalog catalog;
  EXPECT_EQ(catalog.current().generation, 0u);
  EXPECT_EQ(catalog.Update(Basic()).generation, 1u);
  EXPECT_EQ(catalog.Update(Basic()).generation, 1u);

  // Same facts in another order, and different verb order: still the same.
  DiscoveryScan shuffled = Basic();
  std::reverse(shuffled.group_versions.begin(), shuffled.group_versions.end());
  std::reverse(shuffled.group_versions[0].resources.begin(),
               shuffled.group_versions[0].resources.end());
  std::reverse(shuffled.group_versions[2].resources[0].verbs.begin(),
               shuffled.group_versions[2].resources[0].verbs.end());
  EXPECT_EQ(catalog.Update(shuffled).generation, 1u);

  // A failed group/version is a fact; its error text is not.
  DiscoveryScan degraded = Basic();
  degraded.failed.push_back({"metrics.k8s.io", "v1beta1", "503"});
  EXPECT_EQ(catalog.Update(degraded).generation, 2u);
  degraded.failed[0].error = "timeout";
  EXPECT_EQ(catalog.Update(degraded).generation, 2u);
  EXPECT_EQ(catalog.current().degraded_errors, (std::vector<std::string>{"timeout"}));

  DiscoveryScan fewer_verbs = degraded;
  fewer_verbs.group_versions[0].resources[0].verbs = {"get", "list"};
  EXPECT_EQ(catalog.Update(fewer_verbs).generation, 3u);

  CatalogStats stats = catalog.stats();
  EXPECT_EQ(stats.scans, 6u);
  EXPECT_EQ(stats.generation, 3u);
  EXPECT_EQ(stats.group_versions, 3u);
  EXPECT_EQ(stats.entries, 5u);
  EXPECT_EQ(stats.subresources, 3u);
  EXPECT_EQ(stats.degraded_group_versions, 1u);
}

TEST(CatalogTest, FailedGroupVersionListedInTheSamePassIsNotDegraded) {
  DiscoveryScan scan = Basic();
  scan.failed.push_back({"apps", "v1", "flaky"});
  EXPECT_TRUE(Normalize(scan).degraded.empty());
}

}  // namespace
}  // namespace reverser::typeset
