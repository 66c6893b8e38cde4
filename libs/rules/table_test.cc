#include "libs/rules/table.h"

#include "gtest/gtest.h"
#include "libs/rules/test_registry.h"

namespace reverser::rules {
namespace {

using nlohmann::json;
using testing::ClusterWatchRuleJson;
using testing::Must;
using testing::RuleJson;
using testing::Target;
using testing::TestRegistry;
using testing::WatchRuleJson;

class ResolveTest : public ::testing::Test {
 protected:
  WatchedTypeTable Resolve(const std::vector<WatchRuleObject>& rules,
                           const GitTargetInfo& target = Target("team-a", "t1")) {
    std::vector<const WatchRuleObject*> ptrs;
    for (const auto& r : rules) ptrs.push_back(&r);
    return ResolveTable(target, ptrs, registry_.Records(), registry_.registry().revision());
  }
  WatchedTypeTable ResolveWatchRule(std::vector<json> rules) {
    return Resolve({Must(ParseWatchRule(WatchRuleJson("team-a", "r1", "t1", std::move(rules))))});
  }
  WatchedTypeTable ResolveClusterRule(std::vector<json> rules) {
    return Resolve({Must(
        ParseClusterWatchRule(ClusterWatchRuleJson("c1", "team-a", "t1", std::move(rules))))});
  }
  static std::vector<std::string> Types(const WatchedTypeTable& t) {
    std::vector<std::string> out;
    for (const auto& [gvr, type] : t.types) {
      std::string line = gvr.ToString();
      for (const auto& [ns, ops] : type.namespaces) {
        line += " [" + (ns.empty() ? std::string("*") : ns) + "=" + ops.ToString() + "]";
      }
      out.push_back(line);
    }
    return out;
  }
  static std::vector<std::string> Unresolved(const WatchedTypeTable& t) {
    std::vector<std::string> out;
    for (const auto& u : t.unresolved) out.push_back(u.resource + ": " + u.message);
    return out;
  }

  TestRegistry registry_;
};

TEST_F(ResolveTest, WatchRuleWatchesItsOwnNamespaceWithItsOperations) {
  auto t = ResolveWatchRule(
      {RuleJson({"configmaps"}, {{"apiGroups", {""}}, {"operations", {"CREATE"}}}),
       RuleJson({"configmaps", "services"}, {{"apiGroups", {""}}, {"operations", {"DELETE"}}})});
  EXPECT_EQ(Types(t), (std::vector<std::string>{"v1/configmaps [team-a=CREATE,DELETE]",
                                                "v1/services [team-a=DELETE]"}));
  EXPECT_TRUE(t.unresolved.empty());
  EXPECT_EQ(t.types.begin()->second.gvk.kind, "ConfigMap");
  EXPECT_EQ(t.registry_revision, registry_.registry().revision());
}

TEST_F(ResolveTest, EmptyVersionsPickThePreferredVersion) {
  auto t =
      ResolveWatchRule({RuleJson({"horizontalpodautoscalers"}, {{"apiGroups", {"autoscaling"}}}),
                        RuleJson({"widgets"}, {{"apiGroups", {"example.com"}}})});
  EXPECT_EQ(Types(t),
            (std::vector<std::string>{"autoscaling/v2/horizontalpodautoscalers [team-a=*]",
                                      "example.com/v1/widgets [team-a=*]"}));
}

TEST_F(ResolveTest, VersionWildcardAndExplicitVersions) {
  auto all = ResolveWatchRule(
      {RuleJson({"widgets"}, {{"apiGroups", {"example.com"}}, {"apiVersions", {"*"}}})});
  EXPECT_EQ(Types(all), (std::vector<std::string>{"example.com/v1/widgets [team-a=*]",
                                                  "example.com/v1beta1/widgets [team-a=*]"}));
  auto beta = ResolveWatchRule(
      {RuleJson({"widgets", "gadgets"},
                {{"apiGroups", {"example.com", "a.example.com"}}, {"apiVersions", {"v1beta1"}}})});
  EXPECT_EQ(Types(beta), (std::vector<std::string>{"example.com/v1beta1/widgets [team-a=*]"}));
  EXPECT_EQ(Unresolved(beta),
            (std::vector<std::string>{"gadgets: \"gadgets\" is not served by a followable type"}));
}

TEST_F(ResolveTest, OmittedGroupsMustResolveToExactlyOneGroup) {
  auto t = ResolveWatchRule({RuleJson({"widgets", "gadgets", "nosuchthings"})});
  EXPECT_EQ(Types(t), (std::vector<std::string>{"example.com/v1/widgets [team-a=*]"}));
  EXPECT_EQ(Unresolved(t),
            (std::vector<std::string>{
                "gadgets: \"gadgets\" is served by several groups (a.example.com, b.example.com); "
                "set apiGroups",
                "nosuchthings: \"nosuchthings\" is not served by a followable type"}));
  // "*" with no groups is every group (ambiguity applies to named resources only).
  auto star = ResolveWatchRule({RuleJson({"*"})});
  EXPECT_TRUE(star.unresolved.empty());
  EXPECT_EQ(star.types.size(), 9u);
}

TEST_F(ResolveTest, WildcardsExpandOverFollowableNamespacedTypesOnly) {
  auto t = ResolveWatchRule({RuleJson({"*"}, {{"apiGroups", {"*"}}})});
  EXPECT_EQ(Types(t),
            (std::vector<std::string>{
                "v1/configmaps [team-a=*]", "v1/secrets [team-a=*]", "v1/services [team-a=*]",
                "a.example.com/v1/gadgets [team-a=*]", "apps/v1/deployments [team-a=*]",
                "autoscaling/v2/horizontalpodautoscalers [team-a=*]",
                "b.example.com/v1/gadgets [team-a=*]", "example.com/v1/widgets [team-a=*]",
                "rbac.authorization.k8s.io/v1/roles [team-a=*]"}));
  EXPECT_TRUE(t.unresolved.empty());
}

TEST_F(ResolveTest, ExplicitRefusedOrMisscopedResourcesAreReported) {
  auto t = ResolveWatchRule({RuleJson({"pods", "namespaces"}, {{"apiGroups", {""}}}),
                             RuleJson({"readonlys"}, {{"apiGroups", {"readonly.example.com"}}})});
  EXPECT_TRUE(t.types.empty());
  EXPECT_EQ(Unresolved(t),
            (std::vector<std::string>{
                "pods: v1/pods: not followable — excluded by GitOps Reverser default watch policy",
                "namespaces: v1/namespaces is cluster-scoped; a WatchRule selects namespaced "
                "resources",
                "readonlys: readonly.example.com/v1/readonlys: not followable — missing required "
                "verb: watch, patch"}));
}

TEST_F(ResolveTest, ResolutionOfARule) {
  auto t = ResolveWatchRule(
      {RuleJson({"configmaps"}, {{"apiGroups", {""}}}), RuleJson({"pods"}, {{"apiGroups", {""}}})});
  RuleResolution bad = ResolutionOf(t, {false, "team-a", "r1"});
  EXPECT_FALSE(bad.resolved);
  EXPECT_EQ(bad.reason, "UnresolvedResources");
  EXPECT_EQ(bad.message,
            "1 unresolved: rules[1] pods: v1/pods: not followable — excluded by GitOps Reverser "
            "default watch policy");
  RuleResolution other = ResolutionOf(t, {false, "team-a", "r2"});
  EXPECT_TRUE(other.resolved);
  EXPECT_EQ(other.reason, "Resolved");
}

TEST_F(ResolveTest, ClusterWatchRuleScopes) {
  auto t = ResolveClusterRule(
      {RuleJson({"namespaces"}, {{"apiGroups", {""}}, {"scope", "Cluster"}}),
       RuleJson({"configmaps"},
                {{"apiGroups", {""}}, {"scope", "Namespaced"}, {"operations", {"UPDATE"}}}),
       RuleJson({"*"}, {{"apiGroups", {"rbac.authorization.k8s.io"}}, {"scope", "Cluster"}}),
       RuleJson({"configmaps"}, {{"apiGroups", {""}}, {"scope", "Cluster"}})});
  EXPECT_EQ(Types(t),
            (std::vector<std::string>{"v1/configmaps [*=UPDATE]", "v1/namespaces [*=*]",
                                      "rbac.authorization.k8s.io/v1/clusterroles [*=*]"}));
  EXPECT_EQ(Unresolved(t), (std::vector<std::string>{
                               "configmaps: v1/configmaps is namespaced; a scope: Cluster rule "
                               "selects cluster-scoped resources"}));
  EXPECT_EQ(t.types.at({"", "v1", "namespaces"}).scope, core::Scope::kCluster);
}

TEST_F(ResolveTest, OperationsForUnitesNamespaceAndClusterEntries) {
  auto ns_rule = Must(ParseWatchRule(WatchRuleJson(
      "team-a", "r1", "t1",
      {RuleJson({"configmaps"}, {{"apiGroups", {""}}, {"operations", {"CREATE"}}})})));
  auto cluster_rule = Must(ParseClusterWatchRule(ClusterWatchRuleJson(
      "c1", "team-a", "t1",
      {RuleJson({"configmaps"},
                {{"apiGroups", {""}}, {"scope", "Namespaced"}, {"operations", {"DELETE"}}})})));
  auto t = Resolve({ns_rule, cluster_rule});
  core::GroupVersionResource cm{"", "v1", "configmaps"};
  EXPECT_EQ(t.OperationsFor(cm, "team-a").ToString(), "CREATE,DELETE");
  EXPECT_EQ(t.OperationsFor(cm, "team-b").ToString(), "DELETE");
  EXPECT_EQ(t.OperationsFor({"", "v1", "secrets"}, "team-a").ToString(), "");
}

TEST_F(ResolveTest, RulesForOtherTargetsAreIgnored) {
  auto other = Must(ParseWatchRule(
      WatchRuleJson("team-a", "r2", "t2", {RuleJson({"configmaps"}, {{"apiGroups", {""}}})})));
  EXPECT_TRUE(Resolve({other}).types.empty());
}

TEST_F(ResolveTest, NewTypesWaitForTheSettleWindowUnlessFullySpecified) {
  TestRegistry fresh;
  fresh.Scan(testing::ClusterScan(/*with_widgets=*/false));
  fresh.Advance(typeset::Registry::kRemovalGrace);       // widgets removed
  fresh.Scan(testing::ClusterScan(), /*settle=*/false);  // widgets are back, not yet settled
  auto rule =
      Must(ParseWatchRule(WatchRuleJson("team-a", "r1", "t1",
                                        {RuleJson({"widgets"}, {{"apiGroups", {"example.com"}}}),
                                         RuleJson({"widgets"}, {{"apiGroups", {"example.com"}},
                                                                {"apiVersions", {"v1beta1"}},
                                                                {"operations", {"DELETE"}}})})));
  auto t = ResolveTable(Target("team-a", "t1"), {&rule}, fresh.Records(), 0);
  EXPECT_EQ(Types(t), (std::vector<std::string>{"example.com/v1beta1/widgets [team-a=DELETE]"}));
  fresh.Advance(typeset::Registry::kSettleWindow);
  t = ResolveTable(Target("team-a", "t1"), {&rule}, fresh.Records(), 0);
  EXPECT_EQ(Types(t), (std::vector<std::string>{"example.com/v1/widgets [team-a=*]",
                                                "example.com/v1beta1/widgets [team-a=DELETE]"}));
}

TEST_F(ResolveTest, RetainedTypesStayInTheTableMarkedRetained) {
  registry_.Scan(testing::ClusterScan(/*with_widgets=*/false), /*settle=*/false);
  auto t =
      ResolveWatchRule({RuleJson({"widgets", "configmaps"}, {{"apiGroups", {"example.com", ""}}})});
  EXPECT_EQ(Types(t), (std::vector<std::string>{"v1/configmaps [team-a=*]",
                                                "example.com/v1/widgets [team-a=*]"}));
  EXPECT_TRUE(t.types.at({"example.com", "v1", "widgets"}).retained);
  EXPECT_TRUE(t.HasRetained());
  registry_.Advance(typeset::Registry::kRemovalGrace);
  t = ResolveWatchRule({RuleJson({"widgets", "configmaps"}, {{"apiGroups", {"example.com", ""}}})});
  EXPECT_EQ(Types(t), (std::vector<std::string>{"v1/configmaps [team-a=*]"}));
  EXPECT_FALSE(t.HasRetained());
}

TEST_F(ResolveTest, PlanHashTracksThePlanOnly) {
  auto a = ResolveWatchRule({RuleJson({"configmaps", "services"}, {{"apiGroups", {""}}})});
  auto b = ResolveWatchRule({RuleJson({"services"}, {{"apiGroups", {""}}}),
                             RuleJson({"configmaps"}, {{"apiGroups", {""}}})});
  EXPECT_EQ(a.plan_hash.size(), 16u);
  EXPECT_EQ(a.plan_hash, b.plan_hash);
  EXPECT_EQ(a.plan_hash, PlanHash(a));
  auto c = ResolveWatchRule(
      {RuleJson({"configmaps", "services"}, {{"apiGroups", {""}}, {"operations", {"CREATE"}}})});
  EXPECT_NE(a.plan_hash, c.plan_hash);
  auto other_dest = Resolve(
      {Must(ParseWatchRule(WatchRuleJson(
          "team-a", "r1", "t1", {RuleJson({"configmaps", "services"}, {{"apiGroups", {""}}})})))},
      GitTargetInfo{{"team-a", "t1"}, "uid", {"team-a", "provider", "other", "t1"}});
  EXPECT_NE(a.plan_hash, other_dest.plan_hash);
}

TEST_F(ResolveTest, EachTypeCarriesTheRegistrysSensitivityIntoThePlan) {
  auto t = ResolveWatchRule({RuleJson({"configmaps", "secrets"}, {{"apiGroups", {""}}})});
  EXPECT_TRUE(t.types.at({"", "v1", "secrets"}).sensitive);
  EXPECT_FALSE(t.types.at({"", "v1", "configmaps"}).sensitive);
  // A type the operator made sensitive (the catalog's --additional_sensitive_resources) travels
  // as sensitive, and the plan changes with it: the splicer re-splices it encrypted.
  std::vector<typeset::TypeRecord> records = registry_.Records();
  for (auto& r : records) r.sensitive |= r.gvr.resource == "configmaps";
  const WatchRuleObject rule = Must(ParseWatchRule(WatchRuleJson(
      "team-a", "r1", "t1", {RuleJson({"configmaps", "secrets"}, {{"apiGroups", {""}}})})));
  auto marked = ResolveTable(Target("team-a", "t1"), {&rule}, records, 0);
  EXPECT_TRUE(marked.types.at({"", "v1", "configmaps"}).sensitive);
  EXPECT_NE(marked.plan_hash, t.plan_hash);
}

TEST(VersionPreferredTest, KubernetesVersionPriority) {
  std::vector<std::string> versions = {"v1alpha1", "foo", "v1beta1",  "v2", "v1",
                                       "v1beta2",  "v10", "v2alpha3", "bar"};
  std::sort(versions.begin(), versions.end(),
            [](const std::string& a, const std::string& b) { return VersionPreferred(a, b); });
  EXPECT_EQ(versions, (std::vector<std::string>{"v10", "v2", "v1", "v1beta2", "v1beta1", "v2alpha3",
                                                "v1alpha1", "bar", "foo"}));
}

}  // namespace
}  // namespace reverser::rules
