#include "libs/typeset/registry.h"

#include "gtest/gtest.h"
#include "libs/typeset/scan_builder.h"

namespace reverser::typeset {
namespace {

using testing::Res;
using testing::ScanBuilder;

const core::GroupVersionResource kConfigMaps{"", "v1", "configmaps"};
const core::GroupVersionResource kWidgets{"example.com", "v1", "widgets"};
const core::GroupVersionResource kPods{"", "v1", "pods"};

ScanBuilder Cluster(bool with_widgets = true) {
  ScanBuilder b;
  b.Core({Res("configmaps", "ConfigMap"), Res("secrets", "Secret"), Res("pods", "Pod")});
  if (with_widgets) {
    b.Group("example.com", "v1", {Res("widgets", "Widget")}).Crd("example.com/widgets");
  } else {
    b.Group("example.com", "v1", {});
  }
  return b;
}

class RegistryTest : public ::testing::Test {
 protected:
  RegistryTest() : registry_(clock_) {
    registry_.Subscribe([this](const LifecycleEvent& e) { events_.push_back(e); });
  }

  void Scan(const DiscoveryScan& scan) { registry_.UpdateFromScan(catalog_.Update(scan)); }
  void Advance(absl::Duration d) {
    clock_.Advance(d);
    registry_.Tick();
  }
  Verdict VerdictOf(const core::GroupVersionResource& gvr) {
    auto r = registry_.ByGVR(gvr);
    return r ? r->verdict() : Verdict::kUnknown;
  }
  // "activated example.com/v1/widgets" strings of the events since the last call.
  std::vector<std::string> TakeEvents() {
    std::vector<std::string> out;
    for (const auto& e : events_) {
      out.push_back(std::string(LifecycleEventName(e.type)) + " " + e.gvr.ToString());
    }
    events_.clear();
    return out;
  }
  // Activates every followable type of the scan and forgets the events.
  void Settle(const DiscoveryScan& scan) {
    Scan(scan);
    Advance(Registry::kSettleWindow);
    events_.clear();
  }

  core::FakeClock clock_;
  ApiResourceCatalog catalog_;
  Registry registry_;
  std::vector<LifecycleEvent> events_;
};

TEST_F(RegistryTest, UnknownBeforeTheFirstScan) {
  EXPECT_FALSE(registry_.Ready());
  auto r = registry_.ByGVR(kConfigMaps);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->verdict(), Verdict::kUnknown);
  EXPECT_EQ(r->followability.summary, "not followable — API catalog unavailable");
  Scan(Cluster().Build());
  EXPECT_TRUE(registry_.Ready());
  EXPECT_FALSE(registry_.ByGVR({"", "v1", "nothere"}).has_value());
}

TEST_F(RegistryTest, ActivatesOnlyAfterTheSettleWindow) {
  Scan(Cluster().Build());
  EXPECT_EQ(VerdictOf(kConfigMaps), Verdict::kFollowable);
  EXPECT_FALSE(registry_.ByGVR(kConfigMaps)->activated);
  // pods are refused by the default policy right away; a never-live type is silent.
  EXPECT_TRUE(TakeEvents().empty());
  EXPECT_EQ(registry_.ByGVR(kPods)->followability.summary,
            "not followable — excluded by GitOps Reverser default watch policy");
  EXPECT_EQ(registry_.NextDeadline(), clock_.Now() + Registry::kSettleWindow);

  Advance(Registry::kSettleWindow - absl::Milliseconds(1));
  EXPECT_TRUE(TakeEvents().empty());
  Advance(absl::Milliseconds(1));
  EXPECT_EQ(TakeEvents(),
            (std::vector<std::string>{"activated v1/configmaps", "activated v1/secrets",
                                      "activated example.com/v1/widgets"}));
  EXPECT_TRUE(registry_.ByGVR(kConfigMaps)->activated);
  EXPECT_TRUE(registry_.ByGVR(kConfigMaps)->settled);
  EXPECT_FALSE(registry_.ByGVR(kPods)->settled);
  EXPECT_TRUE(registry_.ByGVR({"", "v1", "secrets"})->sensitive);
  EXPECT_FALSE(registry_.NextDeadline().has_value());
}

TEST_F(RegistryTest, FlapsInsideTheSettleWindowCoalesce) {
  Scan(Cluster().Build());
  events_.clear();
  Advance(absl::Seconds(2));
  Scan(Cluster(/*with_widgets=*/false).Build());  // widgets vanish before activation
  EXPECT_EQ(VerdictOf(kWidgets), Verdict::kRetained);
  EXPECT_FALSE(registry_.ByGVR(kWidgets)->settled);
  Advance(absl::Seconds(1));
  Scan(Cluster().Build());  // back: a fresh window starts now
  EXPECT_EQ(TakeEvents(), (std::vector<std::string>{"wobbling example.com/v1/widgets",
                                                    "recovered example.com/v1/widgets"}));
  Advance(absl::Seconds(2));
  EXPECT_EQ(TakeEvents(),
            (std::vector<std::string>{"activated v1/configmaps", "activated v1/secrets"}));
  Advance(absl::Seconds(3));
  EXPECT_EQ(TakeEvents(), (std::vector<std::string>{"activated example.com/v1/widgets"}));
}

TEST_F(RegistryTest, RemovalGraceRetainsThenRemoves) {
  Settle(Cluster().Build());
  Scan(Cluster(false).Build());
  EXPECT_EQ(TakeEvents(), (std::vector<std::string>{"wobbling example.com/v1/widgets"}));
  auto r = registry_.ByGVR(kWidgets);
  EXPECT_EQ(r->verdict(), Verdict::kRetained);
  EXPECT_TRUE(r->Followable());
  EXPECT_FALSE(r->activated);
  EXPECT_TRUE(r->settled);
  EXPECT_EQ(r->followability.FirstFailure()->reason, "not-served");
  EXPECT_EQ(registry_.NextDeadline(), clock_.Now() + Registry::kRemovalGrace);

  Advance(Registry::kRemovalGrace - absl::Seconds(1));
  Scan(Cluster(false).Build());  // still missing: the grace keeps counting from first absence
  EXPECT_EQ(VerdictOf(kWidgets), Verdict::kRetained);
  EXPECT_TRUE(TakeEvents().empty());
  Advance(absl::Seconds(1));
  EXPECT_EQ(TakeEvents(), (std::vector<std::string>{"removed example.com/v1/widgets"}));
  EXPECT_EQ(events_.size(), 0u);
  EXPECT_FALSE(registry_.ByGVR(kWidgets).has_value());  // the record is dropped
  EXPECT_FALSE(registry_.NextDeadline().has_value());

  // It comes back: a new type, activated after a new settle window.
  Scan(Cluster().Build());
  EXPECT_EQ(VerdictOf(kWidgets), Verdict::kFollowable);
  Advance(Registry::kSettleWindow);
  EXPECT_EQ(TakeEvents(), (std::vector<std::string>{"activated example.com/v1/widgets"}));
}

TEST_F(RegistryTest, ReturnInsideTheGraceRecovers) {
  Settle(Cluster().Build());
  Scan(Cluster(false).Build());
  Advance(absl::Seconds(30));
  Scan(Cluster().Build());
  EXPECT_EQ(TakeEvents(), (std::vector<std::string>{"wobbling example.com/v1/widgets",
                                                    "recovered example.com/v1/widgets"}));
  // The recovery starts a new streak: settled all along, activated again after the window.
  EXPECT_FALSE(registry_.ByGVR(kWidgets)->activated);
  EXPECT_TRUE(registry_.ByGVR(kWidgets)->settled);
  EXPECT_FALSE(registry_.ByGVR(kWidgets)->absent_since.has_value());
  Advance(Registry::kSettleWindow);
  EXPECT_EQ(TakeEvents(), (std::vector<std::string>{"activated example.com/v1/widgets"}));
}

TEST_F(RegistryTest, NeverLiveTypesAreSilent) {
  Scan(Cluster().Build());
  Scan(ScanBuilder()
           .Core({Res("configmaps", "ConfigMap"), Res("secrets", "Secret")})
           .Group("example.com", "v1", {Res("widgets", "Widget")})
           .Crd("example.com/widgets")
           .Build());
  EXPECT_FALSE(registry_.ByGVR(kPods).has_value());  // refused and gone: dropped, silently
  Advance(Registry::kRemovalGrace);
  EXPECT_EQ(TakeEvents(),
            (std::vector<std::string>{"activated v1/configmaps", "activated v1/secrets",
                                      "activated example.com/v1/widgets"}));
}

TEST_F(RegistryTest, FailedDiscoveryRetainsWithoutTimeLimit) {
  Settle(Cluster().Build());
  DiscoveryScan failing =
      ScanBuilder()
          .Core({Res("configmaps", "ConfigMap"), Res("secrets", "Secret"), Res("pods", "Pod")})
          .Failed("example.com", "v1", "the server is currently unable")
          .Build();
  Scan(failing);
  EXPECT_EQ(TakeEvents(), (std::vector<std::string>{"wobbling example.com/v1/widgets"}));
  for (int i = 0; i < 60; ++i) {
    Advance(absl::Minutes(1));
    Scan(failing);
  }
  auto r = registry_.ByGVR(kWidgets);
  EXPECT_EQ(r->verdict(), Verdict::kRetained);
  EXPECT_FALSE(r->trusted);
  EXPECT_EQ(r->gvk.kind, "Widget");  // last-known facts kept
  EXPECT_EQ(r->followability.FirstFailure()->reason, "discovery-degraded");
  EXPECT_TRUE(TakeEvents().empty());
  EXPECT_FALSE(registry_.NextDeadline().has_value());

  Scan(Cluster().Build());
  EXPECT_EQ(TakeEvents(), (std::vector<std::string>{"recovered example.com/v1/widgets"}));
}

TEST_F(RegistryTest, IncompleteScanCarriesUnscannedGroupsForward) {
  Settle(Cluster().Build());
  DiscoveryScan partial =
      ScanBuilder()
          .Core({Res("configmaps", "ConfigMap"), Res("secrets", "Secret"), Res("pods", "Pod")})
          .Incomplete()
          .Build();
  Scan(partial);
  EXPECT_EQ(VerdictOf(kWidgets), Verdict::kFollowable);
  EXPECT_TRUE(TakeEvents().empty());

  // A complete scan without widgets starts the grace; an incomplete one must not resurrect it.
  Scan(Cluster(false).Build());
  events_.clear();
  Advance(absl::Seconds(10));
  Scan(partial);
  EXPECT_EQ(VerdictOf(kWidgets), Verdict::kRetained);
  Advance(Registry::kRemovalGrace - absl::Seconds(10));
  EXPECT_FALSE(registry_.ByGVR(kWidgets).has_value());
  EXPECT_EQ(TakeEvents(), (std::vector<std::string>{"removed example.com/v1/widgets"}));
}

TEST_F(RegistryTest, CompleteScanWithoutTheGroupStartsTheGrace) {
  Settle(Cluster().Build());
  Scan(ScanBuilder()
           .Core({Res("configmaps", "ConfigMap"), Res("secrets", "Secret"), Res("pods", "Pod")})
           .Build());
  EXPECT_EQ(VerdictOf(kWidgets), Verdict::kRetained);
}

TEST_F(RegistryTest, FollowableTypeTurningRefusedEmitsRefused) {
  Settle(Cluster().Build());
  Scan(ScanBuilder()
           .Core({Res("configmaps", "ConfigMap", core::Scope::kNamespaced, {"get", "list"}),
                  Res("secrets", "Secret"), Res("pods", "Pod")})
           .Group("example.com", "v1", {Res("widgets", "Widget")})
           .Crd("example.com/widgets")
           .Build());
  EXPECT_EQ(TakeEvents(), (std::vector<std::string>{"refused v1/configmaps"}));
  EXPECT_EQ(events_.size(), 0u);
  EXPECT_EQ(registry_.ByGVR(kConfigMaps)->followability.summary,
            "not followable — missing required verb: watch, patch");
}

TEST_F(RegistryTest, RevisionMovesOnlyWhenADecisionChanges) {
  Scan(Cluster().Build());
  uint64_t after_scan = registry_.revision();
  EXPECT_EQ(registry_.generation(), 1u);
  Scan(Cluster().Build());
  Advance(absl::Seconds(1));
  EXPECT_EQ(registry_.revision(), after_scan);
  Advance(Registry::kSettleWindow);  // activation is a decision
  EXPECT_EQ(registry_.revision(), after_scan + 1);
  EXPECT_EQ(registry_.ByGVR(kConfigMaps)->generation, after_scan + 1);
  EXPECT_EQ(registry_.ByGVR(kPods)->generation, after_scan);
  Scan(Cluster().Build());
  EXPECT_EQ(registry_.revision(), after_scan + 1);
}

TEST_F(RegistryTest, LookupsByKindAndGroupResource) {
  Scan(Cluster()
           .Group("example.com", "v2", {Res("widgets", "Widget")}, /*preferred=*/false)
           .Build());
  auto by_kind = registry_.ByGVK({"example.com", "v1", "Widget"});
  ASSERT_TRUE(by_kind.has_value());
  EXPECT_EQ(by_kind->gvr, kWidgets);
  EXPECT_TRUE(by_kind->preferred);
  auto versions = registry_.ByGroupResource("example.com", "widgets");
  ASSERT_EQ(versions.size(), 2u);
  EXPECT_EQ(versions[1].gvr.version, "v2");
  EXPECT_FALSE(versions[1].preferred);
  EXPECT_EQ(registry_.Followable().size(), 4u);  // configmaps, secrets, widgets v1+v2
  EXPECT_EQ(registry_.All().size(), 5u);
}

TEST_F(RegistryTest, EventsCarryTransitionFacts) {
  Scan(Cluster().Build());
  events_.clear();
  Advance(Registry::kSettleWindow);
  ASSERT_FALSE(events_.empty());
  const LifecycleEvent& e = events_.front();
  EXPECT_EQ(e.type, LifecycleEventType::kActivated);
  EXPECT_EQ(e.gvk.kind, "ConfigMap");
  EXPECT_EQ(e.from, Verdict::kUnknown);
  EXPECT_EQ(e.to, Verdict::kFollowable);
  EXPECT_EQ(e.generation, registry_.revision());
  EXPECT_EQ(e.at, clock_.Now());
}

TEST_F(RegistryTest, UnsubscribedObserversHearNothing) {
  int calls = 0;
  int id = registry_.Subscribe([&calls](const LifecycleEvent&) { ++calls; });
  Scan(Cluster().Build());
  Advance(Registry::kSettleWindow);
  EXPECT_EQ(calls, 3);  // configmaps, secrets, widgets activated
  registry_.Unsubscribe(id);
  Scan(Cluster(false).Build());
  EXPECT_EQ(calls, 3);
  EXPECT_EQ(events_.size(), 4u);  // the fixture's observer still hears the wobble
}

TEST(RegistryOptionsTest, SensitiveUnsupportedRefusesSecrets) {
  core::FakeClock clock;
  RegistryOptions options;
  options.sensitive_supported = false;
  Registry registry(clock, options);
  ApiResourceCatalog catalog;
  registry.UpdateFromScan(catalog.Update(Cluster().Build()));
  auto secrets = registry.ByGVR({"", "v1", "secrets"});
  EXPECT_EQ(secrets->verdict(), Verdict::kRefused);
  EXPECT_EQ(secrets->followability.FirstFailure()->reason, "sensitive-unsupported");
}

}  // namespace
}  // namespace reverser::typeset
