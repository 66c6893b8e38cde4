#include "libs/redisstore/keys.h"

#include <string>
#include <vector>

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
  EXPECT_EQ(core.stream, "reverser:mat:v1:{configmaps:cluster}:stream");
  EXPECT_EQ(core.checkpoint_items, "reverser:mat:v1:{configmaps:cluster}:ckpt:items");
  EXPECT_EQ(core.checkpoint_rv, "reverser:mat:v1:{configmaps:cluster}:ckpt:rv");
  EXPECT_EQ(core.checkpoint_meta, "reverser:mat:v1:{configmaps:cluster}:ckpt:meta");
  EXPECT_EQ(core.state, "reverser:mat:v1:{configmaps:cluster}:state");
  EXPECT_EQ(core.counts, "reverser:mat:v1:{configmaps:cluster}:counts");
  EXPECT_EQ(core.index_member, "configmaps:cluster");
  auto apps =
      MaterializationKeys::For(Prefix("p:"), kDeployments, core::WatchScope::Namespace("team-a"));
  EXPECT_EQ(apps.stream, "p:mat:v1:{apps/deployments:ns:team-a}:stream");
  // One hash tag for every key of the materialization: one Redis Cluster slot.
  for (const std::string& key :
       {apps.stream, apps.checkpoint_items, apps.checkpoint_rv, apps.checkpoint_meta, apps.state,
        apps.counts, apps.CheckpointStaging("g1")}) {
    EXPECT_NE(key.find("{apps/deployments:ns:team-a}"), std::string::npos) << key;
    EXPECT_EQ(key.find('{'), key.rfind('{')) << key;
  }
  EXPECT_FALSE(KeyPrefix::Parse("team{a}").ok());
  EXPECT_EQ(apps.CheckpointStaging("g1"),
            "p:mat:v1:{apps/deployments:ns:team-a}:ckpt:items:next:g1");
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

TEST(KeysTest, OwnershipKeys) {
  OwnershipKeys keys = OwnershipKeys::For(KeyPrefix::Default(), "apps/deployments:ns:default");
  EXPECT_EQ(keys.epoch, "reverser:own:v1:apps/deployments:ns:default:epoch");
  EXPECT_EQ(keys.owner, "reverser:own:v1:apps/deployments:ns:default:owner");
  // A unit that looks like another's key stays apart: the suffixes are fixed.
  EXPECT_NE(OwnershipKeys::For(KeyPrefix::Default(), "u:epoch").owner,
            OwnershipKeys::For(KeyPrefix::Default(), "u").epoch);
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

TEST(KeyPrefixTest, AReferencePrefixMovesOnlyTheSharedFamilies) {
  auto prefix = KeyPrefix::Parse("reverser", "gitops-reverser:");
  ASSERT_TRUE(prefix.ok()) << prefix.status();
  EXPECT_EQ(prefix->value(), "reverser");
  EXPECT_EQ(prefix->reference(), "gitops-reverser");
  // Shared with the reference: author facts, command authors, watch cursors.
  EXPECT_EQ(AuthorFactExactKey(*prefix, "configmaps", "u1", "5"),
            "gitops-reverser:author:v1:audit:configmaps:object:u1:5");
  EXPECT_EQ(AuthorFactPattern(*prefix), "gitops-reverser:author:v1:audit:*");
  EXPECT_EQ(CommandAuthorKey(*prefix, "cr"), "gitops-reverser:author:v1:command:cr");
  EXPECT_EQ(WatchCursorKey(*prefix, "t", kConfigMaps, core::WatchScope::Cluster()),
            "gitops-reverser:watch:v1:target:t:configmaps:cluster:last-rv");
  EXPECT_EQ(WatchCursorPattern(*prefix, "t*"), "gitops-reverser:watch:v1:target:t\\*:*:last-rv");
  // reverser's own keys stay under --redis_key_prefix.
  EXPECT_EQ(AuthorFactSignalKey(*prefix, "configmaps"), "reverser:author:v1:recorded:configmaps");
  EXPECT_EQ(SpliceAckedKey(*prefix, "t", kConfigMaps, core::WatchScope::Cluster()),
            "reverser:splice:v1:t:configmaps:cluster:acked");
  EXPECT_EQ(MaterializationIndexKey(*prefix), "reverser:mat:v1:index");
  EXPECT_EQ(AdmissionFactKey(*prefix, "apps/deployments", AdmissionChange::kUpdate, "u:1", "7"),
            "reverser:author:v1:admission:apps/deployments:update:u%3A1:7");
  EXPECT_EQ(AdmissionFactKey(*prefix, "configmaps", AdmissionChange::kCreate, "u1"),
            "reverser:author:v1:admission:configmaps:create:u1");
  EXPECT_EQ(AdmissionFactKey(*prefix, "configmaps", AdmissionChange::kDelete, "u1"),
            "reverser:author:v1:admission:configmaps:delete:u1");
  EXPECT_EQ(NamespaceDeletionKey(*prefix, "web"), "reverser:author:v1:namespace-deletion:web");

  // By default (and with an empty reference prefix) both are one.
  auto same = KeyPrefix::Parse("team/a", "");
  ASSERT_TRUE(same.ok()) << same.status();
  EXPECT_EQ(same->reference(), "team/a");
  EXPECT_EQ(KeyPrefix::Default().reference(), "reverser");
  EXPECT_FALSE(*same == *KeyPrefix::Parse("team/a", "gitops-reverser"));

  // A reference prefix is one the reference accepts: [A-Za-z0-9._:-], at most 128 characters.
  EXPECT_TRUE(KeyPrefix::Parse("reverser", "cell-a:tenant_7.x").ok());
  EXPECT_TRUE(KeyPrefix::Parse("reverser", std::string(128, 'a')).ok());
  for (const std::string& bad : {std::string("team/a"), std::string("a*"), std::string("x%y"),
                                 std::string("ünï"), std::string(129, 'a'), std::string(":")}) {
    EXPECT_EQ(KeyPrefix::Parse("reverser", bad).status().code(), absl::StatusCode::kInvalidArgument)
        << bad;
  }
}

// The reference's key schema (v0.36.0), written down from its documented formats: prefix
// `gitops-reverser`, `GR` = `resource` (core) or `group/resource`, uid/rv/namespace escaped
// `%` -> `%25` then `:` -> `%3A`, GitTarget uid escaped the same way, GR never escaped.
TEST(KeysTest, ReferencePrefixGivesTheReferencesKeysByteForByte) {
  auto prefix = KeyPrefix::Parse(KeyPrefix::kDefault, KeyPrefix::kReferenceDefault);
  ASSERT_TRUE(prefix.ok()) << prefix.status();
  struct Case {
    std::string ours;
    std::string reference;
  };
  const std::vector<Case> cases = {
      {AuthorFactExactKey(*prefix, "configmaps", "3f1e2c4d-0000-4000-8000-00000000beef", "48213"),
       "gitops-reverser:author:v1:audit:configmaps:object:3f1e2c4d-0000-4000-8000-00000000beef:"
       "48213"},
      {AuthorFactExactKey(*prefix, "apps/deployments", "u:1%", "7:%9"),
       "gitops-reverser:author:v1:audit:apps/deployments:object:u%3A1%25:7%3A%259"},
      {AuthorFactLastKey(*prefix, "configbutler.ai/gittargets", "uid%3A"),
       "gitops-reverser:author:v1:audit:configbutler.ai/gittargets:object:uid%253A:last"},
      {AuthorFactRvKey(*prefix, "secrets", "100"),
       "gitops-reverser:author:v1:audit:secrets:rv:100"},
      {AuthorFactRvKey(*prefix, "secrets", "1:2"),
       "gitops-reverser:author:v1:audit:secrets:rv:1%3A2"},
      {AuthorFactPattern(*prefix), "gitops-reverser:author:v1:audit:*"},
      {CommandAuthorKey(*prefix, "cr-uid"), "gitops-reverser:author:v1:command:cr-uid"},
      {WatchCursorKey(*prefix, "tg:1", kDeployments, core::WatchScope::Namespace("team-a")),
       "gitops-reverser:watch:v1:target:tg%3A1:apps/deployments:namespace:team-a:last-rv"},
      {WatchCursorKey(*prefix, "tg", kConfigMaps, core::WatchScope::Namespace("odd:ns%")),
       "gitops-reverser:watch:v1:target:tg:configmaps:namespace:odd%3Ans%25:last-rv"},
      {WatchCursorKey(*prefix, "tg", kConfigMaps, core::WatchScope::Cluster()),
       "gitops-reverser:watch:v1:target:tg:configmaps:cluster:last-rv"},
  };
  for (const Case& c : cases) EXPECT_EQ(c.ours, c.reference);
}

}  // namespace
}  // namespace reverser::redisstore
