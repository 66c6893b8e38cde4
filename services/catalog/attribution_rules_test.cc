#include "services/catalog/attribution_rules.h"

#include <gtest/gtest.h>

namespace reverser::catalog {
namespace {

using nlohmann::json;

json NamespacesDelete() {
  return {{"apiGroups", {""}},
          {"apiVersions", {"*"}},
          {"operations", {"DELETE"}},
          {"resources", {"namespaces"}},
          {"scope", "*"}};
}

void AddClaim(reverser::v1::ClaimSet& set, const std::string& group, const std::string& version,
              const std::string& resource, const std::string& ns) {
  auto* claim = set.add_claims();
  claim->mutable_type()->mutable_gvr()->set_group(group);
  claim->mutable_type()->mutable_gvr()->set_version(version);
  claim->mutable_type()->mutable_gvr()->set_resource(resource);
  if (ns.empty()) {
    claim->mutable_scope()->set_cluster(true);
  } else {
    claim->mutable_scope()->set_namespace_(ns);
  }
}

// The chart's configuration as the API server serves it: one webhook, no rules.
json Configuration() {
  return {{"apiVersion", "admissionregistration.k8s.io/v1"},
          {"kind", "ValidatingWebhookConfiguration"},
          {"metadata", {{"name", "reverser-attribution"}, {"resourceVersion", "42"}}},
          {"webhooks",
           {{{"name", "changes.reverser.configbutler.ai"},
             {"admissionReviewVersions", {"v1"}},
             {"sideEffects", "NoneOnDryRun"},
             {"failurePolicy", "Ignore"},
             {"timeoutSeconds", 1},
             {"clientConfig",
              {{"service",
                {{"namespace", "reverser"},
                 {"name", "reverser-admission"},
                 {"port", 9445},
                 {"path", "/validate-operator-types"}}},
               {"caBundle", "Q0E="}}}}}}};
}

TEST(AttributionRulesTest, NothingFollowedStillWatchesNamespaceDeletes) {
  EXPECT_EQ(AttributionRules({}), json::array({NamespacesDelete()}));
}

TEST(AttributionRulesTest, OneRulePerGroupInOrderWithScaleSubresources) {
  json rules = AttributionRules({{"apps", "statefulsets"},
                                 {"", "configmaps"},
                                 {"apps", "deployments"},
                                 {"example.com", "widgets"},
                                 {"", "services"}});
  json want = json::array();
  want.push_back({{"apiGroups", {""}},
                  {"apiVersions", {"*"}},
                  {"operations", {"CREATE", "UPDATE", "DELETE"}},
                  {"resources", {"configmaps", "configmaps/scale", "services", "services/scale"}},
                  {"scope", "*"}});
  want.push_back(
      {{"apiGroups", {"apps"}},
       {"apiVersions", {"*"}},
       {"operations", {"CREATE", "UPDATE", "DELETE"}},
       {"resources", {"deployments", "deployments/scale", "statefulsets", "statefulsets/scale"}},
       {"scope", "*"}});
  want.push_back({{"apiGroups", {"example.com"}},
                  {"apiVersions", {"*"}},
                  {"operations", {"CREATE", "UPDATE", "DELETE"}},
                  {"resources", {"widgets", "widgets/scale"}},
                  {"scope", "*"}});
  want.push_back(NamespacesDelete());
  EXPECT_EQ(rules, want) << rules.dump(2);
}

TEST(AttributionRulesTest, FollowedResourcesAreTheDistinctClaimedTypes) {
  reverser::v1::ClaimSet set;
  AddClaim(set, "", "v1", "configmaps", "team-a");
  AddClaim(set, "", "v1", "configmaps", "team-b");
  AddClaim(set, "apps", "v1", "deployments", "");
  AddClaim(set, "apps", "v1beta1", "deployments", "team-a");  // versions do not matter
  std::set<GroupResource> want{{"", "configmaps"}, {"apps", "deployments"}};
  EXPECT_EQ(FollowedResources(set), want);
  EXPECT_TRUE(FollowedResources(reverser::v1::ClaimSet()).empty());
}

TEST(AttributionRulesTest, RulesDifferUntilEveryWebhookHasThem) {
  const json rules = AttributionRules({{"", "configmaps"}});
  json config = Configuration();
  EXPECT_TRUE(RulesDiffer(config, rules));  // no rules key
  config["webhooks"][0]["rules"] = json::array();
  EXPECT_TRUE(RulesDiffer(config, rules));
  config["webhooks"][0]["rules"] = rules;
  EXPECT_FALSE(RulesDiffer(config, rules));
  // A second webhook without them.
  json second = config["webhooks"][0];
  second["name"] = "other.reverser.configbutler.ai";
  second.erase("rules");
  config["webhooks"].push_back(second);
  EXPECT_TRUE(RulesDiffer(config, rules));
  // Order matters (the catalog writes one order, so any other is a reset to undo).
  json reordered = rules;
  std::swap(reordered[0], reordered[1]);
  config["webhooks"][1]["rules"] = reordered;
  EXPECT_TRUE(RulesDiffer(config, rules));
  // Nothing to differ in a configuration without webhooks.
  json empty = Configuration();
  empty.erase("webhooks");
  EXPECT_FALSE(RulesDiffer(empty, rules));
  EXPECT_FALSE(RulesDiffer(json(), rules));
}

TEST(AttributionRulesTest, WithRulesReplacesOnlyRules) {
  const json rules = AttributionRules({{"apps", "deployments"}});
  json config = Configuration();
  config["webhooks"][0]["rules"] = {{{"apiGroups", {"*"}}, {"resources", {"*"}}}};
  auto updated = WithRules(config, rules);
  ASSERT_TRUE(updated.ok()) << updated.status();
  json want = config;
  want["webhooks"][0]["rules"] = rules;
  EXPECT_EQ(*updated, want);
  EXPECT_EQ((*updated)["metadata"]["resourceVersion"], "42");  // the PUT's precondition
  EXPECT_FALSE(RulesDiffer(*updated, rules));
}

TEST(AttributionRulesTest, MalformedConfigurationsAreRefusedNotThrown) {
  const json rules = AttributionRules({});
  json config = Configuration();
  config["webhooks"] = "nope";
  EXPECT_FALSE(WithRules(config, rules).ok());
  EXPECT_FALSE(RulesDiffer(config, rules));
  config["webhooks"] = json::array({1});
  EXPECT_TRUE(RulesDiffer(config, rules));
  EXPECT_FALSE(WithRules(config, rules).ok());
  EXPECT_FALSE(WithRules(json::array(), rules).ok());
  json none = Configuration();
  none.erase("webhooks");
  auto kept = WithRules(none, rules);
  ASSERT_TRUE(kept.ok());
  EXPECT_EQ(*kept, none);
}

}  // namespace
}  // namespace reverser::catalog
