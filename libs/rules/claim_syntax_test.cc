#include "libs/rules/claim_syntax.h"

#include "gtest/gtest.h"

namespace reverser::rules {
namespace {

TEST(ClaimSyntaxTest, ParsesAndRejects) {
  auto set = ParseStaticClaims("v1/configmaps, apps/v1/deployments@team");
  ASSERT_TRUE(set.ok()) << set.status();
  ASSERT_EQ(set->claims_size(), 2);
  EXPECT_TRUE(set->claims(0).scope().cluster());
  EXPECT_EQ(set->claims(1).type().gvr().group(), "apps");
  EXPECT_EQ(set->claims(1).scope().namespace_(), "team");
  EXPECT_FALSE(ParseStaticClaims("configmaps").ok());
  EXPECT_FALSE(ParseStaticClaims("v1/configmaps@Bad_NS").ok());
  EXPECT_FALSE(ParseStaticClaims("a/b/c/d").ok());
}

TEST(ClaimSyntaxTest, FormatIsTheInverseOfParse) {
  for (const char* text : {"v1/configmaps", "v1/configmaps@team", "apps/v1/deployments@team",
                           "configbutler.ai/v1alpha3/gittargets"}) {
    auto claim = ParseClaim(text);
    ASSERT_TRUE(claim.ok()) << text << ": " << claim.status();
    EXPECT_EQ(FormatClaim(*claim), text);
  }
}

}  // namespace
}  // namespace reverser::rules
