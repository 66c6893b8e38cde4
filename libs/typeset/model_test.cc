#include "libs/typeset/model.h"

#include <functional>

#include "gtest/gtest.h"

namespace reverser::typeset {
namespace {

CatalogEntry Good() {
  CatalogEntry e;
  e.gvk = {"", "v1", "ConfigMap"};
  e.gvr = {"", "v1", "configmaps"};
  e.scope = core::Scope::kNamespaced;
  e.verbs = {"create", "delete", "get", "list", "patch", "update", "watch"};
  e.origin = Origin::kBuiltin;
  e.preferred = true;
  return e;
}

std::vector<std::string> Requirements(const Followability& f) {
  std::vector<std::string> out;
  for (const auto& c : f.checks) out.push_back(c.requirement);
  return out;
}

TEST(FunnelTest, AllChecksPassInFunnelOrder) {
  CatalogEntry e = Good();
  Followability f = Evaluate({.facts = &e});
  EXPECT_EQ(f.verdict, Verdict::kFollowable);
  EXPECT_EQ(f.summary, "followable");
  EXPECT_EQ(Requirements(f),
            (std::vector<std::string>{"served", "trusted", "stable", "identity", "scope", "verbs",
                                      "origin", "policy", "sensitivity", "scale"}));
  EXPECT_EQ(f.FirstFailure(), nullptr);
}

TEST(FunnelTest, MissingVerbsNamesThemInRequiredOrder) {
  CatalogEntry e = Good();
  e.verbs = {"get", "list"};
  Followability f = Evaluate({.facts = &e});
  EXPECT_EQ(f.verdict, Verdict::kRefused);
  EXPECT_EQ(f.summary, "not followable — missing required verb: watch, patch");
  EXPECT_EQ(f.FirstFailure()->reason, "missing-verb");
}

TEST(FunnelTest, AbsenceAndDegradedDiscoveryRetain) {
  CatalogEntry e = Good();
  Followability absent = Evaluate({.facts = &e, .present = false});
  EXPECT_EQ(absent.verdict, Verdict::kRetained);
  EXPECT_EQ(absent.summary, "retained — not served");
  EXPECT_EQ(absent.FirstFailure()->reason, "not-served");

  Followability degraded = Evaluate({.facts = &e, .trusted = false});
  EXPECT_EQ(degraded.verdict, Verdict::kRetained);
  EXPECT_EQ(degraded.FirstFailure()->reason, "discovery-degraded");
  EXPECT_EQ(degraded.FirstFailure()->detail, "v1");
  EXPECT_EQ(degraded.summary, "retained — discovery degraded for its group/version");

  Followability expired = Evaluate({.facts = &e, .present = false, .absence_expired = true});
  EXPECT_EQ(expired.verdict, Verdict::kRefused);
  EXPECT_EQ(expired.summary, "not followable — no longer served (removal grace elapsed)");
}

TEST(FunnelTest, PermanentFailuresRefuseWithTheirReasonCodes) {
  struct Case {
    std::function<void(CatalogEntry&, FunnelInput&)> mutate;
    std::string reason;
  };
  std::vector<Case> cases = {
      {[](CatalogEntry& e, FunnelInput&) { e.subresource_only = true; }, "subresource-only"},
      {[](CatalogEntry& e, FunnelInput&) { e.kind_shared_with = {"others"}; }, "gvk-not-unique"},
      {[](CatalogEntry& e, FunnelInput&) { e.conflicting_listings = true; }, "gvr-not-unique"},
      {[](CatalogEntry& e, FunnelInput&) { e.scope.reset(); }, "scope-unknown"},
      {[](CatalogEntry& e, FunnelInput&) { e.origin = Origin::kUnknown; }, "origin-unknown"},
      {[](CatalogEntry&, FunnelInput& in) { in.excluded_by_policy = true; }, "denied-by-policy"},
      {[](CatalogEntry&, FunnelInput& in) {
         in.sensitive = true;
         in.sensitive_supported = false;
       },
       "sensitive-unsupported"},
  };
  for (const Case& c : cases) {
    CatalogEntry e = Good();
    FunnelInput in{.facts = &e};
    c.mutate(e, in);
    Followability f = Evaluate(in);
    EXPECT_EQ(f.verdict, Verdict::kRefused) << c.reason;
    EXPECT_EQ(f.FirstFailure()->reason, c.reason);
  }
  CatalogEntry e = Good();
  Followability policy = Evaluate({.facts = &e, .excluded_by_policy = true});
  EXPECT_EQ(policy.summary, "not followable — excluded by GitOps Reverser default watch policy");
  // Sensitive but supported is followable.
  EXPECT_EQ(Evaluate({.facts = &e, .sensitive = true}).verdict, Verdict::kFollowable);
}

TEST(FunnelTest, RefusalSummaryNamesThePermanentFailureEvenWhenAbsent) {
  CatalogEntry e = Good();
  e.verbs = {"get"};
  Followability f = Evaluate({.facts = &e, .present = false});
  EXPECT_EQ(f.verdict, Verdict::kRefused);
  EXPECT_EQ(f.summary, "not followable — missing required verb: list, watch, patch");
}

TEST(FunnelTest, IdentityFailuresNameTheirConflicts) {
  CatalogEntry e = Good();
  e.kind_shared_with = {"configmapz"};
  Followability f = Evaluate({.facts = &e});
  EXPECT_EQ(f.summary,
            "not followable — GVK served by more than one resource: configmaps, configmapz");
  e = Good();
  e.conflicting_listings = true;
  EXPECT_EQ(Evaluate({.facts = &e}).summary,
            "not followable — resource resolves to more than one kind: listed with conflicting "
            "facts");
  e = Good();
  e.subresource_only = true;
  e.subresources = {"status"};
  f = Evaluate({.facts = &e});
  EXPECT_EQ(f.summary, "not followable — served only as a subresource");
  EXPECT_EQ(f.FirstFailure()->detail, "status");
}

TEST(FunnelTest, NoFactsMeansCatalogUnavailable) {
  Followability f = Evaluate({});
  EXPECT_EQ(f.verdict, Verdict::kUnknown);
  EXPECT_EQ(f.summary, "not followable — API catalog unavailable");
  EXPECT_EQ(f.FirstFailure()->reason, "catalog-unavailable");
  EXPECT_EQ(VerdictName(f.verdict), "unknown");
}

}  // namespace
}  // namespace reverser::typeset
