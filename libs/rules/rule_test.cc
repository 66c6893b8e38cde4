#include "libs/rules/rule.h"

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "libs/rules/test_registry.h"

namespace reverser::rules {
namespace {

using nlohmann::json;
using testing::ClusterWatchRuleJson;
using testing::RuleJson;
using testing::WatchRuleJson;

TEST(OperationSetTest, ParsesSentinelEmptyAndExplicitLists) {
  EXPECT_EQ(*OperationSet::Parse({}), OperationSet::All());
  EXPECT_EQ(*OperationSet::Parse({"*"}), OperationSet::All());
  EXPECT_EQ(*OperationSet::Parse({"CREATE", "*"}), OperationSet::All());
  EXPECT_EQ(*OperationSet::Parse({"CREATE", "UPDATE", "DELETE"}), OperationSet::All());
  auto some = *OperationSet::Parse({"DELETE", "CREATE", "CREATE"});
  EXPECT_FALSE(some.all);
  EXPECT_TRUE(some.Contains(Operation::kCreate));
  EXPECT_FALSE(some.Contains(Operation::kUpdate));
  EXPECT_EQ(some.ToString(), "CREATE,DELETE");
  EXPECT_EQ(OperationSet::All().ToString(), "*");
  auto bad = OperationSet::Parse({"create"});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(OperationSetTest, MergeIsAUnionThatCollapsesToAll) {
  OperationSet a = *OperationSet::Parse({"CREATE"});
  a.Merge(*OperationSet::Parse({"UPDATE"}));
  EXPECT_EQ(a.ToString(), "CREATE,UPDATE");
  a.Merge(*OperationSet::Parse({"DELETE"}));
  EXPECT_EQ(a, OperationSet::All());
  OperationSet b = *OperationSet::Parse({"CREATE"});
  b.Merge(OperationSet::All());
  EXPECT_TRUE(b.all);
}

TEST(ParseWatchRuleTest, ParsesAFullObject) {
  json object = WatchRuleJson(
      "team-a", "r1", "t1",
      {RuleJson({"configmaps"}, {{"apiGroups", {""}}, {"operations", {"CREATE", "UPDATE"}}}),
       RuleJson({"deployments"}, {{"apiGroups", {"apps"}}, {"apiVersions", {"v1"}}})});
  object["metadata"]["generation"] = 7;
  auto rule = ParseRuleObject(object.dump());
  ASSERT_TRUE(rule.ok()) << rule.status();
  EXPECT_FALSE(rule->key.cluster);
  EXPECT_EQ(rule->key.ToString(), "WatchRule team-a/r1");
  EXPECT_EQ(rule->uid, "r1-uid");
  EXPECT_EQ(rule->generation, 7);
  EXPECT_EQ(rule->target.ToString(), "team-a/t1");
  ASSERT_EQ(rule->rules.size(), 2u);
  EXPECT_EQ(rule->rules[0].operations.ToString(), "CREATE,UPDATE");
  EXPECT_EQ(rule->rules[0].api_groups, std::vector<std::string>{""});
  EXPECT_TRUE(rule->rules[0].api_versions.empty());
  EXPECT_TRUE(rule->rules[1].operations.all);
  EXPECT_EQ(rule->rules[1].api_versions, std::vector<std::string>{"v1"});
  EXPECT_FALSE(rule->rules[1].scope.has_value());
}

TEST(ParseWatchRuleTest, ResourceNamesAreCaseInsensitive) {
  auto rule = ParseWatchRule(WatchRuleJson("ns", "r", "t", {RuleJson({"ConfigMaps", "*"})}));
  ASSERT_TRUE(rule.ok());
  EXPECT_EQ(rule->rules[0].resources, (std::vector<std::string>{"configmaps", "*"}));
}

TEST(ParseWatchRuleTest, OmittedAndEmptyApiGroupsAreTheSame) {
  auto omitted = ParseWatchRule(WatchRuleJson("ns", "r", "t", {RuleJson({"widgets"})}));
  auto empty = ParseWatchRule(
      WatchRuleJson("ns", "r", "t", {RuleJson({"widgets"}, {{"apiGroups", json::array()}})}));
  ASSERT_TRUE(omitted.ok());
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(omitted->rules[0].api_groups.empty());
  EXPECT_EQ(omitted->rules, empty->rules);
}

TEST(ParseWatchRuleTest, RejectsInvalidRulesWithTheFieldPath) {
  struct Case {
    json object;
    std::string message;
  };
  json no_ns = WatchRuleJson("ns", "r", "t", {RuleJson({"configmaps"})});
  no_ns["metadata"].erase("namespace");
  json other_ns = WatchRuleJson("ns", "r", "t", {RuleJson({"configmaps"})});
  other_ns["spec"]["targetRef"]["namespace"] = "elsewhere";
  json wrong_kind = WatchRuleJson("ns", "r", "t", {RuleJson({"configmaps"})});
  wrong_kind["spec"]["targetRef"]["kind"] = "GitProvider";
  json no_target = WatchRuleJson("ns", "r", "t", {RuleJson({"configmaps"})});
  no_target["spec"].erase("targetRef");
  json not_list = WatchRuleJson("ns", "r", "t", {RuleJson({"configmaps"})});
  not_list["spec"]["rules"][0]["resources"] = "configmaps";
  std::vector<Case> cases = {
      {WatchRuleJson("ns", "r", "t", {}), "spec.rules: must list at least one rule"},
      {WatchRuleJson("ns", "r", "t", {RuleJson({})}),
       "spec.rules[0].resources: must list at least one resource"},
      {WatchRuleJson("ns", "r", "t", {RuleJson({"configmaps"}), RuleJson({"deployments/status"})}),
       "spec.rules[1].resources[0]: \"deployments/status\" names a subresource"},
      {WatchRuleJson("ns", "r", "t", {RuleJson({"config*"})}),
       "spec.rules[0].resources[0]: \"config*\": only an exact plural or \"*\""},
      {WatchRuleJson("ns", "r", "t", {RuleJson({"configmaps"}, {{"operations", {"PATCH"}}})}),
       "spec.rules[0].operations: \"PATCH\" is not one of CREATE, UPDATE, DELETE, *"},
      {no_ns, "metadata.namespace: is required"},
      {other_ns, "spec.targetRef.namespace: a WatchRule can only target a GitTarget in its own"},
      {wrong_kind, "spec.targetRef.kind: must be GitTarget"},
      {no_target, "spec.targetRef: is required"},
      {not_list, "spec.rules[0].resources: must be a list of strings"},
  };
  for (const Case& c : cases) {
    auto rule = ParseWatchRule(c.object);
    ASSERT_FALSE(rule.ok()) << c.message;
    EXPECT_EQ(rule.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_TRUE(absl::StartsWith(rule.status().message(), c.message)) << rule.status();
  }
}

TEST(ParseClusterWatchRuleTest, NeedsScopeAndTargetNamespace) {
  auto ok = ParseClusterWatchRule(ClusterWatchRuleJson(
      "c1", "team-a", "t1",
      {RuleJson({"clusterroles"},
                {{"scope", "Cluster"}, {"apiGroups", {"rbac.authorization.k8s.io"}}}),
       RuleJson({"configmaps"}, {{"scope", "Namespaced"}})}));
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_TRUE(ok->key.cluster);
  EXPECT_EQ(ok->key.ToString(), "ClusterWatchRule c1");
  EXPECT_EQ(ok->target.ToString(), "team-a/t1");
  EXPECT_EQ(ok->rules[0].scope, ClusterRuleScope::kCluster);
  EXPECT_EQ(ok->rules[1].scope, ClusterRuleScope::kNamespaced);

  auto no_scope =
      ParseClusterWatchRule(ClusterWatchRuleJson("c1", "team-a", "t1", {RuleJson({"x"})}));
  EXPECT_EQ(no_scope.status().message(),
            "spec.rules[0].scope: is required (Cluster or Namespaced)");
  auto bad_scope = ParseClusterWatchRule(
      ClusterWatchRuleJson("c1", "team-a", "t1", {RuleJson({"x"}, {{"scope", "Everywhere"}})}));
  EXPECT_FALSE(bad_scope.ok());
  json no_ns =
      ClusterWatchRuleJson("c1", "team-a", "t1", {RuleJson({"x"}, {{"scope", "Cluster"}})});
  no_ns["spec"]["targetRef"].erase("namespace");
  EXPECT_EQ(ParseClusterWatchRule(no_ns).status().message(),
            "spec.targetRef.namespace: is required");
}

TEST(ParseRuleObjectTest, BadJsonAndUnknownKindsAreErrorsNotCrashes) {
  for (const char* text : {"", "{", "[]", "42", "{\"kind\":\"Pod\"}", "{\"kind\":1}",
                           "{\"kind\":\"WatchRule\"}", "{\"kind\":\"WatchRule\",\"metadata\":[]}",
                           "{\"kind\":\"WatchRule\",\"metadata\":{\"name\":5}}"}) {
    auto rule = ParseRuleObject(text);
    EXPECT_FALSE(rule.ok()) << text;
    EXPECT_EQ(rule.status().code(), absl::StatusCode::kInvalidArgument) << text;
  }
}

// Every field of valid objects replaced, in turn, by every JSON type: a clear error or a
// successful parse, never a crash or an exception.
void Mutations(const json& node, const json::json_pointer& at,
               std::vector<json::json_pointer>& out) {
  out.push_back(at);
  if (node.is_object()) {
    for (const auto& [key, child] : node.items()) Mutations(child, at / key, out);
  } else if (node.is_array()) {
    for (size_t i = 0; i < node.size(); ++i) Mutations(node[i], at / i, out);
  }
}

TEST(ParseRuleObjectTest, SurvivesEveryFieldReplacedByEveryType) {
  const std::vector<json> originals = {
      WatchRuleJson(
          "ns", "r", "t",
          {RuleJson({"configmaps"},
                    {{"apiGroups", {""}}, {"apiVersions", {"v1"}}, {"operations", {"CREATE"}}})}),
      ClusterWatchRuleJson("c", "ns", "t", {RuleJson({"*"}, {{"scope", "Cluster"}})})};
  const std::vector<json> replacements = {
      nullptr, 1, -1.5, true, "x", "", json::array(), json::object(), json::array({1, 2})};
  int parsed = 0, rejected = 0;
  for (const json& original : originals) {
    std::vector<json::json_pointer> paths;
    Mutations(original, json::json_pointer(), paths);
    for (const auto& path : paths) {
      for (const json& value : replacements) {
        json mutated = original;
        mutated[path] = value;
        auto rule = ParseRuleObject(mutated.dump());
        if (rule.ok()) {
          ++parsed;
        } else {
          ++rejected;
          EXPECT_EQ(rule.status().code(), absl::StatusCode::kInvalidArgument);
        }
      }
    }
  }
  EXPECT_GT(parsed, 0);
  EXPECT_GT(rejected, 100);
}

}  // namespace
}  // namespace reverser::rules
