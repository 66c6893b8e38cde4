#include "libs/rules/proto_convert.h"

#include "gtest/gtest.h"
#include "libs/rules/test_registry.h"

namespace reverser::rules {
namespace {

using testing::Must;
using testing::RuleJson;
using testing::Target;
using testing::TestRegistry;
using testing::WatchRuleJson;

TEST(RulesProtoTest, TableAndClaimsInWireForm) {
  TestRegistry registry;
  auto rule = Must(ParseWatchRule(WatchRuleJson(
      "team-a", "r1", "t1",
      {RuleJson({"configmaps"}, {{"apiGroups", {""}}, {"operations", {"CREATE", "DELETE"}}})})));
  WatchedTypeTable table = ResolveTable(Target("team-a", "t1"), {&rule}, registry.Records(),
                                        registry.registry().revision());
  reverser::v1::WatchedTypeTable p = ToProto(table);
  EXPECT_EQ(p.target().namespace_(), "team-a");
  EXPECT_EQ(p.target().name(), "t1");
  EXPECT_EQ(p.target().uid(), "t1-uid");
  EXPECT_EQ(p.destination().provider_name(), "provider");
  EXPECT_EQ(p.destination().branch(), "main");
  EXPECT_EQ(p.plan_hash(), table.plan_hash);
  EXPECT_EQ(p.registry_generation(), registry.registry().revision());
  ASSERT_EQ(p.types_size(), 1);
  EXPECT_EQ(p.types(0).type().gvk().kind(), "ConfigMap");
  EXPECT_EQ(p.types(0).type().scope(), reverser::v1::RESOURCE_SCOPE_NAMESPACED);
  const auto& ops = p.types(0).namespaces().at("team-a");
  EXPECT_FALSE(ops.all());
  ASSERT_EQ(ops.operations_size(), 2);
  EXPECT_EQ(ops.operations(0), reverser::v1::OPERATION_CREATE);
  EXPECT_EQ(ops.operations(1), reverser::v1::OPERATION_DELETE);

  reverser::v1::ClaimSet claims = ToProto(ComputeClaims({&table}), 4);
  EXPECT_EQ(claims.generation(), 4u);
  ASSERT_EQ(claims.claims_size(), 1);
  EXPECT_EQ(claims.claims(0).type().gvr().resource(), "configmaps");
  EXPECT_EQ(claims.claims(0).scope().namespace_(), "team-a");
  EXPECT_TRUE(ToProto(OperationSet::All()).all());

  // Round trips.
  WatchedTypeTable back = FromProto(p);
  EXPECT_EQ(back.target, table.target);
  EXPECT_EQ(back.types, table.types);
  EXPECT_EQ(back.plan_hash, table.plan_hash);
  EXPECT_EQ(PlanHash(back), table.plan_hash);  // the receiver can recompute the digest
  std::vector<Claim> claims_back = FromProto(claims);
  ASSERT_EQ(claims_back.size(), 1u);
  EXPECT_EQ(claims_back[0], ComputeClaims({&table})[0]);
  EXPECT_EQ(claims_back[0].gvk.kind, "ConfigMap");
  EXPECT_EQ(FromProto(ToProto(*OperationSet::Parse({"UPDATE"}))).ToString(), "UPDATE");
}

TEST(RulesProtoTest, SensitivityTravelsWithEachType) {
  WatchedType secrets;
  secrets.gvk = {"", "v1", "Secret"};
  secrets.gvr = {"", "v1", "secrets"};
  secrets.sensitive = true;
  secrets.namespaces[""] = OperationSet::All();
  reverser::v1::WatchedType wire = ToProto(secrets);
  EXPECT_TRUE(wire.sensitive());
  EXPECT_EQ(FromProto(wire), secrets);
  secrets.sensitive = false;
  EXPECT_FALSE(ToProto(secrets).sensitive());
}

}  // namespace
}  // namespace reverser::rules
