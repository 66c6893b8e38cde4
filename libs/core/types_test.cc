#include "libs/core/types.h"

#include "gtest/gtest.h"

namespace reverser::core {
namespace {

TEST(TypesTest, ApiVersionsAndGroupResources) {
  GroupVersionResource core{"", "v1", "configmaps"};
  GroupVersionResource apps{"apps", "v1", "deployments"};
  EXPECT_EQ(core.ApiVersion(), "v1");
  EXPECT_EQ(apps.ApiVersion(), "apps/v1");
  EXPECT_EQ(core.GroupResource(), "configmaps");
  EXPECT_EQ(apps.GroupResource(), "apps/deployments");
  EXPECT_EQ(apps.ToString(), "apps/v1/deployments");
  EXPECT_EQ((GroupVersionKind{"apps", "v1", "Deployment"}.ToString()), "apps/v1, Kind=Deployment");
}

TEST(TypesTest, ParsesApiVersion) {
  EXPECT_EQ(*ParseApiVersion("v1"), (std::pair<std::string, std::string>{"", "v1"}));
  EXPECT_EQ(*ParseApiVersion("configbutler.ai/v1alpha3"),
            (std::pair<std::string, std::string>{"configbutler.ai", "v1alpha3"}));
  EXPECT_FALSE(ParseApiVersion("").ok());
  EXPECT_FALSE(ParseApiVersion("a/b/c").ok());
  EXPECT_FALSE(ParseApiVersion("/v1").ok());
}

TEST(TypesTest, WatchScopeKeySegments) {
  EXPECT_EQ(WatchScope::Cluster().KeySegment(), "cluster");
  EXPECT_EQ(WatchScope::Namespace("team-a").KeySegment(), "ns:team-a");
  EXPECT_EQ(*WatchScope::ParseKeySegment("ns:team-a"), WatchScope::Namespace("team-a"));
  EXPECT_TRUE(WatchScope::ParseKeySegment("cluster")->IsCluster());
  EXPECT_FALSE(WatchScope::ParseKeySegment("ns:").ok());
  EXPECT_FALSE(WatchScope::ParseKeySegment("ns:Bad_NS").ok());
  EXPECT_FALSE(WatchScope::ParseKeySegment("global").ok());
}

TEST(TypesTest, ValidatesNames) {
  EXPECT_TRUE(ValidateObjectName("web").ok());
  EXPECT_TRUE(ValidateObjectName("system.admin-1").ok());
  for (const char* bad : {"", "..", "../etc", "a/b", "UPPER", "-x", "x-", "a..b", "a b", "_cluster"}) {
    EXPECT_FALSE(ValidateObjectName(bad).ok()) << bad;
  }
  EXPECT_FALSE(ValidateObjectName(std::string(254, 'a')).ok());
  EXPECT_TRUE(ValidateNamespaceName("kube-system").ok());
  EXPECT_FALSE(ValidateNamespaceName("a.b").ok());
  EXPECT_FALSE(ValidateNamespaceName(std::string(64, 'a')).ok());
}

}  // namespace
}  // namespace reverser::core
