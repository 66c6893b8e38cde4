#include "libs/rules/claims.h"

#include "gtest/gtest.h"
#include "libs/rules/proto_convert.h"
#include "libs/rules/table_store.h"
#include "libs/rules/test_registry.h"

namespace reverser::rules {
namespace {

using testing::ClusterWatchRuleJson;
using testing::Must;
using testing::RuleJson;
using testing::Target;
using testing::TestRegistry;
using testing::WatchRuleJson;

std::vector<std::string> Names(const std::vector<Claim>& claims) {
  std::vector<std::string> out;
  for (const Claim& c : claims) out.push_back(c.gvr.ToString() + " " + c.scope.KeySegment());
  return out;
}

class ClaimsTest : public ::testing::Test {
 protected:
  ClaimsTest() : source_(registry_.registry()) {
    for (const char* ns : {"team-a", "team-b"}) store_.UpsertTarget(Target(ns, "t"));
    store_.UpsertTarget(Target("ops", "all"));
  }
  void Rule(const std::string& ns, const std::string& name, std::vector<std::string> resources) {
    store_.UpsertRule(Must(ParseWatchRule(WatchRuleJson(
        ns, name, "t", {RuleJson(std::move(resources), {{"apiGroups", {"", "apps"}}})}))));
  }
  bool Update() {
    store_.Refresh(source_);
    return tracker_.Update(store_.Tables());
  }

  TestRegistry registry_;
  RegistrySource source_{registry_.registry()};
  TableStore store_;
  ClaimTracker tracker_;
};

TEST_F(ClaimsTest, UnionOverTablesWithGenerationOnChangeOnly) {
  EXPECT_FALSE(Update());
  EXPECT_EQ(tracker_.generation(), 0u);
  Rule("team-a", "r1", {"configmaps", "deployments"});
  Rule("team-b", "r1", {"configmaps"});
  EXPECT_TRUE(Update());
  EXPECT_EQ(tracker_.generation(), 1u);
  EXPECT_EQ(Names(tracker_.claims()),
            (std::vector<std::string>{"v1/configmaps ns:team-a", "v1/configmaps ns:team-b",
                                      "apps/v1/deployments ns:team-a"}));
  EXPECT_EQ(tracker_.claims()[0].gvk.kind, "ConfigMap");

  // Another rule needing an already-claimed (type, scope) changes nothing.
  Rule("team-a", "r2", {"configmaps"});
  EXPECT_FALSE(Update());
  EXPECT_EQ(tracker_.generation(), 1u);
}

TEST_F(ClaimsTest, AClaimCarriesItsTypesSensitivityToTheWire) {
  Rule("team-a", "r1", {"configmaps", "secrets"});
  EXPECT_TRUE(Update());
  ASSERT_EQ(Names(tracker_.claims()),
            (std::vector<std::string>{"v1/configmaps ns:team-a", "v1/secrets ns:team-a"}));
  EXPECT_FALSE(tracker_.claims()[0].sensitive);
  EXPECT_TRUE(tracker_.claims()[1].sensitive);
  reverser::v1::ClaimSet wire = ToProto(tracker_.claims(), tracker_.generation());
  EXPECT_FALSE(wire.claims(0).sensitive());
  EXPECT_TRUE(wire.claims(1).sensitive());
  EXPECT_TRUE(FromProto(wire)[1].sensitive);
}

// Another target's ClusterWatchRule never widens a namespaced rule's watch: the namespace
// claims stay beside the cluster-wide one (RBAC may allow only those namespaces).
TEST_F(ClaimsTest, AnotherTargetsClusterRuleNeverWidensANamespacedRule) {
  Rule("team-a", "r1", {"configmaps"});
  Rule("team-b", "r1", {"configmaps", "services"});
  Update();
  store_.UpsertRule(Must(ParseClusterWatchRule(ClusterWatchRuleJson(
      "everything", "ops", "all",
      {RuleJson({"configmaps"}, {{"apiGroups", {""}}, {"scope", "Namespaced"}}),
       RuleJson({"namespaces"}, {{"apiGroups", {""}}, {"scope", "Cluster"}})}))));
  EXPECT_TRUE(Update());
  EXPECT_EQ(Names(tracker_.claims()),
            (std::vector<std::string>{"v1/configmaps cluster", "v1/configmaps ns:team-a",
                                      "v1/configmaps ns:team-b", "v1/namespaces cluster",
                                      "v1/services ns:team-b"}));
  EXPECT_EQ(tracker_.claims()[3].type_scope, core::Scope::kCluster);

  store_.RemoveRule({true, "", "everything"});
  EXPECT_TRUE(Update());
  EXPECT_EQ(Names(tracker_.claims()),
            (std::vector<std::string>{"v1/configmaps ns:team-a", "v1/configmaps ns:team-b",
                                      "v1/services ns:team-b"}));
  EXPECT_EQ(tracker_.generation(), 3u);
}

// Within one target, its own cluster-wide selection of a type serves its namespaced rules of
// that type too (as the reference's per-target watch set collapses them).
TEST_F(ClaimsTest, ATargetsOwnClusterRuleServesItsNamespacedRules) {
  store_.UpsertTarget(Target("team-a", "both"));
  store_.UpsertRule(Must(ParseWatchRule(WatchRuleJson(
      "team-a", "ns-rule", "both", {RuleJson({"configmaps"}, {{"apiGroups", {""}}})}))));
  store_.UpsertRule(Must(ParseClusterWatchRule(ClusterWatchRuleJson(
      "wide", "team-a", "both",
      {RuleJson({"configmaps"}, {{"apiGroups", {""}}, {"scope", "Namespaced"}})}))));
  Update();
  EXPECT_EQ(Names(tracker_.claims()), (std::vector<std::string>{"v1/configmaps cluster"}));
  const WatchedTypeTable* table = store_.Table({"team-a", "both"});
  ASSERT_NE(table, nullptr);
  const WatchedType& type = table->types.at({"", "v1", "configmaps"});
  EXPECT_TRUE(ReadsClusterWide(type));
  EXPECT_EQ(ServingScope(type, "team-a"), core::WatchScope::Cluster());
  // Each rule's own selection is kept for its status.
  EXPECT_EQ(table->selections.at({false, "team-a", "ns-rule"}).count({type.gvr, "team-a"}), 1u);
  EXPECT_EQ(table->selections.at({true, "", "wide"}).count({type.gvr, ""}), 1u);
}

TEST(ServingScopeTest, NamespacedTypesAreServedPerNamespaceClusterScopedOnesClusterWide) {
  WatchedType namespaced;
  namespaced.scope = core::Scope::kNamespaced;
  namespaced.namespaces["a"] = OperationSet::All();
  namespaced.namespaces["b"] = OperationSet::All();
  EXPECT_FALSE(ReadsClusterWide(namespaced));
  EXPECT_EQ(ServingScopes(namespaced),
            (std::vector<core::WatchScope>{core::WatchScope::Namespace("a"),
                                           core::WatchScope::Namespace("b")}));
  EXPECT_EQ(ServingScope(namespaced, "b"), core::WatchScope::Namespace("b"));
  WatchedType cluster_scoped;
  cluster_scoped.scope = core::Scope::kCluster;
  cluster_scoped.namespaces[""] = OperationSet::All();
  EXPECT_TRUE(ReadsClusterWide(cluster_scoped));
  EXPECT_EQ(ServingScopes(cluster_scoped),
            (std::vector<core::WatchScope>{core::WatchScope::Cluster()}));
}

}  // namespace
}  // namespace reverser::rules
