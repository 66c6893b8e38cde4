// Finding a target and one of its streams by the names an operator types.

#include "tools/reverserctl/targets.h"

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace reverser::reverserctl {
namespace {

reverser::v1::Claim Claim(const std::string& group, const std::string& resource,
                          const std::string& ns) {
  reverser::v1::Claim claim;
  claim.mutable_type()->mutable_gvr()->set_group(group);
  claim.mutable_type()->mutable_gvr()->set_version("v1");
  claim.mutable_type()->mutable_gvr()->set_resource(resource);
  claim.mutable_type()->mutable_gvk()->set_kind("Kind");  // kept: the splicer's full claim
  if (ns.empty()) {
    claim.mutable_scope()->set_cluster(true);
  } else {
    claim.mutable_scope()->set_namespace_(ns);
  }
  return claim;
}

reverser::v1::ListStreamsResponse Streams() {
  reverser::v1::ListStreamsResponse streams;
  auto* s = streams.add_summaries();
  s->mutable_target()->set_namespace_("team");
  s->mutable_target()->set_name("mirror");
  s->mutable_target()->set_uid("uid-1");
  *s->add_streams()->mutable_claim() = Claim("", "configmaps", "a");
  *s->add_streams()->mutable_claim() = Claim("", "configmaps", "b");
  *s->add_streams()->mutable_claim() = Claim("apps", "deployments", "a");
  streams.add_summaries()->mutable_target()->set_namespace_("ops");
  streams.mutable_summaries(1)->mutable_target()->set_name("backup");
  return streams;
}

TEST(TargetsTest, TargetNames) {
  EXPECT_TRUE(IsTargetName("team/mirror"));
  for (const char* bad : {"mirror", "/mirror", "team/", "a/b/c", ""}) {
    EXPECT_FALSE(IsTargetName(bad)) << bad;
  }
}

TEST(TargetsTest, FindTargetByNameOrListTheKnownOnes) {
  auto streams = Streams();
  auto found = FindTarget(streams, "team/mirror");
  ASSERT_TRUE(found.ok());
  EXPECT_EQ((*found)->target().uid(), "uid-1");
  auto missing = FindTarget(streams, "team/other");
  EXPECT_TRUE(absl::IsNotFound(missing.status()));
  EXPECT_EQ(missing.status().message(),
            "follows no target team/other (targets: team/mirror, ops/backup)");
  EXPECT_EQ(FindTarget({}, "a/b").status().message(), "follows no target a/b (targets: none)");
}

TEST(TargetsTest, FindStreamByTypeAndNamespace) {
  const auto streams = Streams();
  const auto& summary = streams.summaries(0);
  auto deployments = FindStream(summary, "apps/v1/deployments");
  ASSERT_TRUE(deployments.ok()) << deployments.status();
  EXPECT_EQ(deployments->type().gvk().kind(), "Kind");  // the splicer's claim, not the text
  EXPECT_EQ(deployments->scope().namespace_(), "a");

  auto in_b = FindStream(summary, "v1/configmaps@b");
  ASSERT_TRUE(in_b.ok()) << in_b.status();
  EXPECT_EQ(in_b->scope().namespace_(), "b");

  auto ambiguous = FindStream(summary, "v1/configmaps");
  EXPECT_TRUE(absl::IsInvalidArgument(ambiguous.status()));
  EXPECT_TRUE(absl::StrContains(ambiguous.status().message(), "add @namespace"))
      << ambiguous.status();

  auto absent = FindStream(summary, "v1/secrets@a");
  EXPECT_TRUE(absl::IsNotFound(absent.status()));
  EXPECT_EQ(absent.status().message(),
            "team/mirror has no stream v1/secrets@a (its streams: v1/configmaps@a, "
            "v1/configmaps@b, apps/v1/deployments@a)");
  EXPECT_TRUE(absl::IsInvalidArgument(FindStream(summary, "secrets").status()));
}

TEST(TargetsTest, StreamsWithoutClaimsTakeTheClaimAsTyped) {
  reverser::v1::StreamSummary summary;
  summary.add_streams()->set_message("uid|/configmaps|ns:a");
  auto claim = FindStream(summary, "v1/configmaps@a");
  ASSERT_TRUE(claim.ok()) << claim.status();
  EXPECT_EQ(claim->type().gvr().resource(), "configmaps");
  EXPECT_EQ(claim->scope().namespace_(), "a");
}

}  // namespace
}  // namespace reverser::reverserctl
