#include "libs/redisstore/keys.h"

#include "gtest/gtest.h"

namespace reverser::redisstore {
namespace {

const core::GroupVersionResource kConfigMaps{"", "v1", "configmaps"};
const core::GroupVersionResource kDeployments{"apps", "v1", "deployments"};

KeyPrefix Prefix(absl::string_view raw) {
  auto prefix = KeyPrefix::Parse(raw);
  EXPECT_TRUE(prefix.ok()) << prefix.status();
  return prefix.ok() ? *prefix : KeyPrefix::Default();
}

TEST(KeyPrefixTest, TrimsTrailingColonsAndRejectsGlobAndPercent) {
  EXPECT_EQ(KeyPrefix::Default().value(), "reverser");
  EXPECT_EQ(Prefix("gitops-reverser").value(), "gitops-reverser");
  EXPECT_EQ(Prefix("team:a::").value(), "team:a");
  for (absl::string_view bad : {"a*", "a?", "a[b]", "x%y", "a\\b", "", ":::", "a b"}) {
    auto prefix = KeyPrefix::Parse(bad);
    EXPECT_EQ(prefix.status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

TEST(KeysTest, EscapesPercentThenColon) {
  EXPECT_EQ(EscapeKeySegment("a:b%c"), "a%3Ab%25c");
  EXPECT_EQ(EscapeKeySegment("%3A"), "%253A");  // one-way, never ambiguous
  EXPECT_EQ(EscapeGlob("a*b?[c]\\"), "a\\*b\\?\\[c\\]\\\\");
}

TEST(KeysTest, MaterializationKeyShapes) {
  auto core =
      MaterializationKeys::For(KeyPrefix::Default(), kConfigMaps, core::WatchScope::Cluster());
  EXPECT_EQ(core.stream, "reverser:mat:v1:configmaps:cluster:stream");
  EXPECT_EQ(core.checkpoint_items, "reverser:mat:v1:configmaps:cluster:ckpt:items");
  EXPECT_EQ(core.checkpoint_rv, "reverser:mat:v1:configmaps:cluster:ckpt:rv");
  EXPECT_EQ(core.checkpoint_meta, "reverser:mat:v1:configmaps:cluster:ckpt:meta");
  EXPECT_EQ(core.state, "reverser:mat:v1:configmaps:cluster:state");
  EXPECT_EQ(core.counts, "reverser:mat:v1:configmaps:cluster:counts");
  EXPECT_EQ(core.index_member, "configmaps:cluster");
  auto apps =
      MaterializationKeys::For(Prefix("p:"), kDeployments, core::WatchScope::Namespace("team-a"));
  EXPECT_EQ(apps.stream, "p:mat:v1:apps/deployments:ns:team-a:stream");
  EXPECT_EQ(apps.CheckpointStaging("g1"), "p:mat:v1:apps/deployments:ns:team-a:ckpt:items:next:g1");
  EXPECT_EQ(MaterializationIndexKey(Prefix("p")), "p:mat:v1:index");
}

TEST(KeysTest, IndexMemberRoundTrips) {
  auto member = ParseIndexMember("apps/deployments:ns:team-a");
  ASSERT_TRUE(member.ok()) << member.status();
  EXPECT_EQ(member->group_resource, "apps/deployments");
  EXPECT_EQ(member->scope, core::WatchScope::Namespace("team-a"));
  auto cluster = ParseIndexMember("configmaps:cluster");
  ASSERT_TRUE(cluster.ok());
  EXPECT_TRUE(cluster->scope.IsCluster());
  EXPECT_FALSE(ParseIndexMember("configmaps").ok());
  EXPECT_FALSE(ParseIndexMember(":cluster").ok());
  EXPECT_FALSE(ParseIndexMember("configmaps:galaxy").ok());
  EXPECT_FALSE(ParseIndexMember("configmaps:ns:Not_Valid").ok());
}

TEST(KeysTest, SpliceAckedKey) {
  EXPECT_EQ(SpliceAckedKey(KeyPrefix::Default(), "0b6f-uid", kDeployments,
                           core::WatchScope::Namespace("default")),
            "reverser:splice:v1:0b6f-uid:apps/deployments:ns:default:acked");
  EXPECT_EQ(SpliceAckedKey(KeyPrefix::Default(), "u:1", kConfigMaps, core::WatchScope::Cluster()),
            "reverser:splice:v1:u%3A1:configmaps:cluster:acked");
  EXPECT_EQ(SpliceAckedPattern(KeyPrefix::Default(), "u*1"), "reverser:splice:v1:u\\*1:*:acked");
}

TEST(KeysTest, AuthorKeysMatchTheReferenceExactly) {
  KeyPrefix p = Prefix("gitops-reverser");
  EXPECT_EQ(AuthorFactExactKey(p, "configmaps", "c0ffee", "12345"),
            "gitops-reverser:author:v1:audit:configmaps:object:c0ffee:12345");
  EXPECT_EQ(AuthorFactLastKey(p, "apps/deployments", "c0ffee"),
            "gitops-reverser:author:v1:audit:apps/deployments:object:c0ffee:last");
  EXPECT_EQ(AuthorFactRvKey(p, "configmaps", "9"),
            "gitops-reverser:author:v1:audit:configmaps:rv:9");
  EXPECT_EQ(AuthorFactExactKey(p, "configmaps", "a:b", "1%2"),
            "gitops-reverser:author:v1:audit:configmaps:object:a%3Ab:1%252");
  EXPECT_EQ(AuthorFactPattern(p), "gitops-reverser:author:v1:audit:*");
  EXPECT_EQ(CommandAuthorKey(p, "cr-uid"), "gitops-reverser:author:v1:command:cr-uid");
  EXPECT_EQ(GroupResourceSegment("", "configmaps"), "configmaps");
  EXPECT_EQ(GroupResourceSegment("apps", "deployments"), "apps/deployments");
}

TEST(KeysTest, WatchCursorKeyMatchesTheReference) {
  KeyPrefix p = Prefix("gitops-reverser");
  EXPECT_EQ(WatchCursorKey(p, "t-uid", kDeployments, core::WatchScope::Namespace("web")),
            "gitops-reverser:watch:v1:target:t-uid:apps/deployments:namespace:web:last-rv");
  EXPECT_EQ(WatchCursorKey(p, "t-uid", kConfigMaps, core::WatchScope::Cluster()),
            "gitops-reverser:watch:v1:target:t-uid:configmaps:cluster:last-rv");
}

}  // namespace
}  // namespace reverser::redisstore
