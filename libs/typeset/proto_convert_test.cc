#include "libs/typeset/proto_convert.h"

#include "gtest/gtest.h"
#include "libs/typeset/registry.h"
#include "libs/typeset/scan_builder.h"

namespace reverser::typeset {
namespace {

TEST(TypesetProtoTest, RecordCarriesIdentityVerdictAndChecks) {
  core::FakeClock clock;
  Registry registry(clock);
  ApiResourceCatalog catalog;
  registry.UpdateFromScan(
      catalog.Update(testing::ScanBuilder()
                         .Group("apps", "v1",
                                {testing::Res("deployments", "Deployment"),
                                 testing::Res("controllerrevisions", "ControllerRevision")})
                         .Build()));
  reverser::v1::TypeRecord d = ToProto(*registry.ByGVR({"apps", "v1", "deployments"}));
  EXPECT_EQ(d.identity().gvk().kind(), "Deployment");
  EXPECT_EQ(d.identity().gvr().resource(), "deployments");
  EXPECT_EQ(d.identity().scope(), reverser::v1::RESOURCE_SCOPE_NAMESPACED);
  EXPECT_EQ(d.origin(), "builtin");
  EXPECT_TRUE(d.preferred_version());
  EXPECT_EQ(d.verdict(), reverser::v1::FOLLOW_VERDICT_FOLLOWABLE);
  EXPECT_EQ(d.checks_size(), 10);
  EXPECT_EQ(d.generation(), registry.revision());

  reverser::v1::TypeRecord c = ToProto(*registry.ByGVR({"apps", "v1", "controllerrevisions"}));
  EXPECT_EQ(c.verdict(), reverser::v1::FOLLOW_VERDICT_REFUSED);
  EXPECT_EQ(c.checks(7).requirement(), "policy");
  EXPECT_EQ(c.checks(7).reason(), "denied-by-policy");
  EXPECT_FALSE(c.checks(7).passed());

  // Round trip through the wire form.
  TypeRecord back = FromProto(d);
  TypeRecord original = *registry.ByGVR({"apps", "v1", "deployments"});
  EXPECT_EQ(back.gvk, original.gvk);
  EXPECT_EQ(back.gvr, original.gvr);
  EXPECT_EQ(back.scope, original.scope);
  EXPECT_EQ(back.origin, Origin::kBuiltin);
  EXPECT_EQ(back.verbs, original.verbs);
  EXPECT_EQ(back.followability, original.followability);
  EXPECT_EQ(back.generation, original.generation);
  EXPECT_EQ(FromProto(c).followability.FirstFailure()->reason, "denied-by-policy");
  EXPECT_EQ(FromProto(reverser::v1::TypeRecord()).verdict(), Verdict::kUnknown);
}

}  // namespace
}  // namespace reverser::typeset
