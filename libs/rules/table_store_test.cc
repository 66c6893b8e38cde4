#include "libs/rules/table_store.h"

#include "gtest/gtest.h"
#include "libs/rules/test_registry.h"

namespace reverser::rules {
namespace {

using testing::ClusterWatchRuleJson;
using testing::Must;
using testing::RuleJson;
using testing::Target;
using testing::TestRegistry;
using testing::WatchRuleJson;

WatchRuleObject ConfigMapRule(const std::string& ns, const std::string& name,
                              const std::string& target, const std::string& op = "*") {
  return Must(ParseWatchRule(WatchRuleJson(
      ns, name, target, {RuleJson({"configmaps"}, {{"apiGroups", {""}}, {"operations", {op}}})})));
}

// Counts how often the store asks for records, to prove untouched targets are not re-resolved.
class CountingSource final : public TypeSource {
 public:
  explicit CountingSource(const typeset::Registry& registry) : inner_(registry) {}
  std::vector<typeset::TypeRecord> Records() const override {
    ++fetches;
    return inner_.Records();
  }
  uint64_t Revision() const override { return inner_.Revision(); }
  bool Ready() const override { return inner_.Ready(); }
  mutable int fetches = 0;

 private:
  RegistrySource inner_;
};

class TableStoreTest : public ::testing::Test {
 protected:
  TableStoreTest() : source_(registry_.registry()) {
    store_.UpsertTarget(Target("team-a", "t1"));
    store_.UpsertTarget(Target("team-b", "t2"));
    store_.UpsertRule(ConfigMapRule("team-a", "r1", "t1"));
    store_.UpsertRule(ConfigMapRule("team-b", "r2", "t2"));
    RefreshResult first = store_.Refresh(source_);
    EXPECT_EQ(first.changed.size(), 2u);
    EXPECT_EQ(first.resolved, 2u);
  }

  TestRegistry registry_;
  CountingSource source_;
  TableStore store_;
};

TEST_F(TableStoreTest, NothingChangedMeansNothingResolved) {
  uint64_t generation = store_.generation();
  RefreshResult r = store_.Refresh(source_);
  EXPECT_EQ(r.resolved, 0u);
  EXPECT_TRUE(r.changed.empty());
  EXPECT_EQ(store_.generation(), generation);
  // Re-applying an identical rule object (informer resync) is not a change either.
  store_.UpsertRule(ConfigMapRule("team-a", "r1", "t1"));
  store_.UpsertTarget(Target("team-a", "t1"));
  EXPECT_EQ(store_.Refresh(source_).resolved, 0u);
}

TEST_F(TableStoreTest, RuleChangeOnOneTargetNeverDisturbsAnother) {
  const WatchedTypeTable* t2_before = store_.Table({"team-b", "t2"});
  std::string t2_hash = t2_before->plan_hash;
  std::string t1_hash = store_.Table({"team-a", "t1"})->plan_hash;
  uint64_t generation = store_.generation();

  store_.UpsertRule(ConfigMapRule("team-a", "r1", "t1", "CREATE"));
  RefreshResult r = store_.Refresh(source_);
  EXPECT_EQ(r.resolved, 1u);
  EXPECT_EQ(r.changed, (std::vector<TargetKey>{{"team-a", "t1"}}));
  EXPECT_NE(store_.Table({"team-a", "t1"})->plan_hash, t1_hash);
  EXPECT_EQ(store_.Table({"team-b", "t2"}), t2_before);  // same object, untouched
  EXPECT_EQ(store_.Table({"team-b", "t2"})->plan_hash, t2_hash);
  EXPECT_EQ(store_.generation(), generation + 1);
  EXPECT_EQ(store_.resolutions_total(), 3u);
}

TEST_F(TableStoreTest, RegistryRevisionReResolvesAllButReportsOnlyRealChanges) {
  registry_.Advance(absl::Seconds(1));  // no decision changes: revision unchanged
  EXPECT_EQ(store_.Refresh(source_).resolved, 0u);

  registry_.Scan(testing::ClusterScan(/*with_widgets=*/false));  // revision moves
  RefreshResult r = store_.Refresh(source_);
  EXPECT_EQ(r.resolved, 2u);
  EXPECT_TRUE(r.changed.empty());  // configmaps-only plans are unaffected
  EXPECT_EQ(source_.fetches, 2);   // one fetch per refresh, not per table
  EXPECT_EQ(store_.Table({"team-a", "t1"})->registry_revision, registry_.registry().revision());
}

TEST(TableStoreReadyTest, NothingResolvesBeforeTheFirstScan) {
  core::FakeClock clock;
  typeset::Registry registry(clock);
  RegistrySource source(registry);
  TableStore store;
  store.UpsertTarget(Target("team-a", "t1"));
  store.UpsertRule(ConfigMapRule("team-a", "r1", "t1"));
  RefreshResult r = store.Refresh(source);
  EXPECT_EQ(r.resolved, 0u);
  EXPECT_EQ(store.Table({"team-a", "t1"}), nullptr);

  typeset::ApiResourceCatalog catalog;
  registry.UpdateFromScan(catalog.Update(testing::ClusterScan()));
  clock.Advance(typeset::Registry::kSettleWindow);
  registry.Tick();
  r = store.Refresh(source);
  EXPECT_EQ(r.changed, (std::vector<TargetKey>{{"team-a", "t1"}}));
  EXPECT_EQ(store.Table({"team-a", "t1"})->types.size(), 1u);
}

TEST_F(TableStoreTest, AWobbleKeepsThePlanAndFlagsRetention) {
  store_.UpsertRule(Must(ParseWatchRule(
      WatchRuleJson("team-a", "r1", "t1",
                    {RuleJson({"configmaps", "widgets"}, {{"apiGroups", {"", "example.com"}}})}))));
  store_.Refresh(source_);
  const std::string plan = store_.Table({"team-a", "t1"})->plan_hash;
  const core::GroupVersionResource widgets{"example.com", "v1", "widgets"};

  registry_.Scan(testing::ClusterScan(/*with_widgets=*/false), /*settle=*/false);
  RefreshResult r = store_.Refresh(source_);
  EXPECT_EQ(r.changed, (std::vector<TargetKey>{{"team-a", "t1"}}));  // retention is news
  EXPECT_EQ(store_.Table({"team-a", "t1"})->plan_hash, plan);
  EXPECT_TRUE(store_.Table({"team-a", "t1"})->types.at(widgets).retained);

  registry_.Scan(testing::ClusterScan(), /*settle=*/false);  // back before re-activation
  r = store_.Refresh(source_);
  EXPECT_EQ(store_.Table({"team-a", "t1"})->plan_hash, plan);
  EXPECT_FALSE(store_.Table({"team-a", "t1"})->HasRetained());
  registry_.Advance(typeset::Registry::kSettleWindow);  // re-activation changes no plan
  r = store_.Refresh(source_);
  EXPECT_TRUE(r.changed.empty());
}

TEST_F(TableStoreTest, RetargetingARuleDirtiesBothTargets) {
  store_.UpsertRule(ConfigMapRule("team-a", "r1", "t3"));
  RefreshResult r = store_.Refresh(source_);
  EXPECT_EQ(r.changed, (std::vector<TargetKey>{{"team-a", "t1"}}));
  EXPECT_TRUE(store_.Table({"team-a", "t1"})->types.empty());
  EXPECT_EQ(store_.Table({"team-a", "t3"}), nullptr);  // the target does not exist yet

  store_.UpsertTarget(Target("team-a", "t3"));
  r = store_.Refresh(source_);
  EXPECT_EQ(r.changed, (std::vector<TargetKey>{{"team-a", "t3"}}));
  EXPECT_EQ(store_.Table({"team-a", "t3"})->types.size(), 1u);
  EXPECT_EQ(store_.RulesFor({"team-a", "t3"}).size(), 1u);
}

TEST_F(TableStoreTest, RemovingRulesAndTargets) {
  store_.RemoveRule({false, "team-a", "r1"});
  RefreshResult r = store_.Refresh(source_);
  EXPECT_EQ(r.changed, (std::vector<TargetKey>{{"team-a", "t1"}}));
  EXPECT_TRUE(store_.Table({"team-a", "t1"})->types.empty());

  store_.RemoveTarget({"team-b", "t2"});
  r = store_.Refresh(source_);
  EXPECT_EQ(r.removed, (std::vector<TargetKey>{{"team-b", "t2"}}));
  EXPECT_EQ(store_.Table({"team-b", "t2"}), nullptr);
  EXPECT_EQ(store_.Tables().size(), 1u);
  // The rule still names t2; when the target returns its table comes back.
  store_.UpsertTarget(Target("team-b", "t2"));
  r = store_.Refresh(source_);
  EXPECT_EQ(r.changed, (std::vector<TargetKey>{{"team-b", "t2"}}));
  EXPECT_EQ(store_.Table({"team-b", "t2"})->types.size(), 1u);
}

TEST_F(TableStoreTest, ClusterRulesJoinTheirTargetsTable) {
  store_.UpsertRule(Must(ParseClusterWatchRule(ClusterWatchRuleJson(
      "c1", "team-b", "t2",
      {RuleJson({"namespaces"}, {{"apiGroups", {""}}, {"scope", "Cluster"}})}))));
  RefreshResult r = store_.Refresh(source_);
  EXPECT_EQ(r.changed, (std::vector<TargetKey>{{"team-b", "t2"}}));
  EXPECT_EQ(store_.Table({"team-b", "t2"})->types.size(), 2u);
  EXPECT_EQ(store_.RulesFor({"team-b", "t2"}).size(), 2u);
}

}  // namespace
}  // namespace reverser::rules
