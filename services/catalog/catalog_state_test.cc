// CatalogState driven directly with a FakeClock: priming, retain-on-error, isolation between
// GitTargets, status write de-duplication, bad input, probes, and a resolution benchmark.

#include "services/catalog/catalog_state.h"

#include <chrono>
#include <iostream>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "libs/rules/stream_readiness.h"
#include "libs/typeset/scan_builder.h"

namespace reverser::catalog {
namespace {

using nlohmann::json;
using typeset::testing::Res;
using typeset::testing::ScanBuilder;

json Meta(const std::string& ns, const std::string& name, int64_t generation = 1,
          const std::string& created = "2026-01-01T00:00:00Z") {
  json m = {{"name", name},
            {"uid", absl::StrCat(ns, "-", name, "-uid")},
            {"generation", generation},
            {"creationTimestamp", created}};
  if (!ns.empty()) m["namespace"] = ns;
  return m;
}

json Provider(const std::string& ns, const std::string& name, json spec = json::object()) {
  if (!spec.contains("url")) spec["url"] = "file:///tmp";
  if (!spec.contains("allowedBranches")) spec["allowedBranches"] = {"main"};
  return {{"metadata", Meta(ns, name)}, {"spec", spec}};
}

json Target(const std::string& ns, const std::string& name, const std::string& path,
            const std::string& created = "2026-01-01T00:00:00Z") {
  return {{"metadata", Meta(ns, name, 1, created)},
          {"spec", {{"providerRef", {{"name", "repo"}}}, {"branch", "main"}, {"path", path}}}};
}

json Rule(const std::string& ns, const std::string& name, const std::string& target, json rules,
          int64_t generation = 1) {
  return {{"apiVersion", "configbutler.ai/v1alpha3"},
          {"kind", "WatchRule"},
          {"metadata", Meta(ns, name, generation)},
          {"spec", {{"targetRef", {{"name", target}}}, {"rules", rules}}}};
}

typeset::DiscoveryScan Scan(bool widgets_failed = false, bool with_gadgets = false) {
  ScanBuilder b;
  b.Core({Res("configmaps", "ConfigMap"), Res("secrets", "Secret"), Res("pods", "Pod"),
          Res("namespaces", "Namespace", core::Scope::kCluster)})
      .Group("apps", "v1", {Res("deployments", "Deployment")});
  if (widgets_failed) {
    b.Failed("example.com", "v1", "503 service unavailable");
  } else {
    b.Group("example.com", "v1", {Res("widgets", "Widget")}).Crd("example.com/widgets");
  }
  if (with_gadgets) b.Group("gadgets.io", "v1", {Res("gadgets", "Gadget")}).Crd("gadgets.io/gadgets");
  return b.Build();
}

bool Claimed(const reverser::v1::ClaimSet& set, const std::string& resource,
             const std::string& ns) {
  for (const auto& c : set.claims()) {
    if (c.type().gvr().resource() == resource && c.scope().namespace_() == ns) return true;
  }
  return false;
}

class CatalogStateTest : public ::testing::Test {
 protected:
  CatalogStateTest() : state_(clock_, {{}, 100}) {}

  // Scan, settle, and list every kind (empty lists unless given).
  void Prime(std::vector<json> providers = {}, std::vector<json> targets = {},
             std::vector<json> rules = {}) {
    state_.ApplyScan(Scan());
    clock_.Advance(typeset::Registry::kSettleWindow);
    state_.Tick();
    state_.ReplaceObjects(ObjectKind::kGitProvider, providers);
    state_.ReplaceObjects(ObjectKind::kGitTarget, targets);
    state_.ReplaceObjects(ObjectKind::kWatchRule, rules);
    state_.ReplaceObjects(ObjectKind::kClusterWatchRule, {});
  }

  const nlohmann::json* StatusWriteFor(const CatalogChanges& changes, ObjectKind kind,
                                       const std::string& name) {
    for (const auto& w : changes.status_writes) {
      if (w.key.kind == kind && w.key.name == name) return &w.status;
    }
    return nullptr;
  }

  std::string Reason(const json& status, const std::string& type) {
    const json* c = FindCondition(NodeAt(status, {"conditions"}), type);
    return c == nullptr ? "" : c->value("reason", "");
  }

  core::FakeClock clock_;
  CatalogState state_;
};

TEST_F(CatalogStateTest, NothingIsPublishedBeforePrimed) {
  state_.ApplyScan(Scan());
  state_.ReplaceObjects(ObjectKind::kGitProvider, {Provider("a", "repo")});
  state_.ReplaceObjects(ObjectKind::kGitTarget, {Target("a", "t", "x")});
  state_.ReplaceObjects(ObjectKind::kWatchRule, {});
  CatalogChanges early = state_.Reconcile();
  EXPECT_FALSE(early.claims);
  EXPECT_FALSE(early.tables);
  EXPECT_TRUE(early.status_writes.empty());

  state_.ReplaceObjects(ObjectKind::kClusterWatchRule, {});
  // Every kind listed, but the startup settle window has not passed: version-less rules would
  // still resolve to nothing.
  EXPECT_FALSE(state_.Reconcile().claims);
  ASSERT_TRUE(state_.NextDeadline());
  clock_.Set(*state_.NextDeadline());
  state_.Tick();
  CatalogChanges first = state_.Reconcile();
  ASSERT_TRUE(first.claims);
  ASSERT_TRUE(first.tables);
  EXPECT_TRUE(first.tables->full());
  EXPECT_EQ(first.tables->upserted_size(), 1);
  EXPECT_EQ(first.claims->generation(), 100u);  // the epoch: an empty set is still a set
  EXPECT_FALSE(first.status_writes.empty());
}

TEST_F(CatalogStateTest, FailedGroupVersionKeepsItsTypesRetainedAndClaimed) {
  Prime({Provider("a", "repo")}, {Target("a", "t", "x")},
        {Rule("a", "r", "t", {{{"apiGroups", {"example.com"}}, {"resources", {"widgets"}}}})});
  CatalogChanges changes = state_.Reconcile();
  ASSERT_TRUE(changes.claims);
  EXPECT_TRUE(Claimed(*changes.claims, "widgets", "a"));

  // example.com/v1 discovery fails; meanwhile a new group appears and is judged normally.
  state_.ApplyScan(Scan(/*widgets_failed=*/true, /*with_gadgets=*/true));
  clock_.Advance(absl::Hours(2));  // far beyond the removal grace: no time limit on errors
  state_.Tick();
  state_.Reconcile();
  EXPECT_TRUE(Claimed(state_.Claims(), "widgets", "a"));
  auto widgets = state_.Type({"example.com", "v1", "widgets"});
  ASSERT_TRUE(widgets);
  EXPECT_EQ(widgets->verdict(), reverser::v1::FOLLOW_VERDICT_RETAINED);
  auto gadgets = state_.Type({"gadgets.io", "v1", "gadgets"});
  ASSERT_TRUE(gadgets);
  EXPECT_EQ(gadgets->verdict(), reverser::v1::FOLLOW_VERDICT_FOLLOWABLE);

  // Discovery recovers: followable again, still claimed, no claim churn.
  uint64_t generation = state_.Claims().generation();
  state_.ApplyScan(Scan());
  CatalogChanges recovered = state_.Reconcile();
  EXPECT_FALSE(recovered.claims);
  EXPECT_EQ(state_.Claims().generation(), generation);
  EXPECT_EQ(state_.Type({"example.com", "v1", "widgets"})->verdict(),
            reverser::v1::FOLLOW_VERDICT_FOLLOWABLE);
}

TEST_F(CatalogStateTest, RuleChangeOnOneTargetNeverTouchesAnother) {
  Prime({Provider("a", "repo")}, {Target("a", "t1", "one"), Target("a", "t2", "two")},
        {Rule("a", "r1", "t1", {{{"resources", {"configmaps"}}}}),
         Rule("a", "r2", "t2", {{{"resources", {"deployments"}}}})});
  CatalogChanges first = state_.Reconcile();
  ASSERT_TRUE(first.tables);
  ASSERT_EQ(first.tables->upserted_size(), 2);

  state_.UpsertObject(ObjectKind::kWatchRule,
                      Rule("a", "r1", "t1", {{{"resources", {"configmaps", "secrets"}}}}, 2));
  CatalogChanges changes = state_.Reconcile();
  ASSERT_TRUE(changes.tables);
  EXPECT_FALSE(changes.tables->full());
  ASSERT_EQ(changes.tables->upserted_size(), 1);
  EXPECT_EQ(changes.tables->upserted(0).target().name(), "t1");
  EXPECT_EQ(changes.tables->generation(), first.tables->generation() + 1);
  EXPECT_EQ(changes.tables_resolved, 1u);
  EXPECT_TRUE(Claimed(*changes.claims, "secrets", "a"));
}

TEST_F(CatalogStateTest, ProviderSettingsChangeTheConfigButNotThePlan) {
  Prime({Provider("a", "repo")}, {Target("a", "t", "x")},
        {Rule("a", "r", "t", {{{"resources", {"configmaps"}}}})});
  CatalogChanges first = state_.Reconcile();
  std::string plan = first.tables->upserted(0).plan_hash();
  json provider = Provider("a", "repo", {{"commit", {{"committer", {{"name", "Bot"}}}}},
                                         {"push", {{"commitWindow", "0s"}}}});
  state_.UpsertObject(ObjectKind::kGitProvider, provider);
  CatalogChanges changes = state_.Reconcile();
  ASSERT_TRUE(changes.tables);
  ASSERT_EQ(changes.tables->upserted_size(), 1);
  EXPECT_EQ(changes.tables->upserted(0).plan_hash(), plan);
  EXPECT_EQ(changes.tables->upserted(0).config().committer_name(), "Bot");
  EXPECT_EQ(changes.tables->upserted(0).config().commit_window_ms(), 0);
  EXPECT_EQ(changes.tables->upserted(0).config().signing_secret(), "");
  EXPECT_FALSE(changes.claims);

  // Signing names the Secret (in the provider's namespace), never the key.
  provider["spec"]["commit"]["signing"] = {{"secretRef", {{"name", "signer"}}}};
  state_.UpsertObject(ObjectKind::kGitProvider, provider);
  CatalogChanges signing = state_.Reconcile();
  ASSERT_TRUE(signing.tables);
  ASSERT_EQ(signing.tables->upserted_size(), 1);
  EXPECT_EQ(signing.tables->upserted(0).config().signing_secret(), "a/signer");
  EXPECT_EQ(signing.tables->upserted(0).plan_hash(), plan);
}

// A splicer's report of refusals reaches the GitTarget's status through CatalogState, and a
// report without them makes it Ready again.
TEST_F(CatalogStateTest, ReportedRefusalsAreRenderedOnTheTargetStatus) {
  Prime({Provider("a", "repo")}, {Target("a", "t", "x")},
        {Rule("a", "r", "t",
              {{{"operations", {"*"}}, {"apiGroups", {""}}, {"resources", {"secrets"}}}})});
  state_.Reconcile();
  reverser::v1::StreamSummary summary;
  summary.mutable_target()->set_namespace_("a");
  summary.mutable_target()->set_name("t");
  summary.mutable_target()->set_uid("a-t-uid");
  summary.set_total(1);
  summary.set_ready(1);
  summary.set_reason("AllStreamsReady");
  summary.set_refused_objects(1);
  auto* refusal = summary.add_refusals();
  refusal->set_kind("Secret");
  refusal->mutable_object()->set_namespace_("a");
  refusal->mutable_object()->set_name("db");
  refusal->set_reason(reverser::v1::REFUSAL_REASON_ENCRYPTION_UNAVAILABLE);
  refusal->set_message("no age recipients configured");
  state_.ApplySummary(summary);
  CatalogChanges refused = state_.Reconcile();
  const json* status = StatusWriteFor(refused, ObjectKind::kGitTarget, "t");
  ASSERT_NE(status, nullptr);
  EXPECT_EQ(Reason(*status, "Ready"), "ObjectRefused");
  const json* stalled = FindCondition(NodeAt(*status, {"conditions"}), "Stalled");
  ASSERT_NE(stalled, nullptr);
  EXPECT_EQ(stalled->value("status", ""), "True");
  EXPECT_EQ(
      stalled->value("message", ""),
      "1 object(s) refused: Secret a/db: EncryptionUnavailable: no age recipients configured");

  summary.clear_refusals();
  summary.set_refused_objects(0);
  state_.ApplySummary(summary);
  CatalogChanges cleared = state_.Reconcile();
  status = StatusWriteFor(cleared, ObjectKind::kGitTarget, "t");
  ASSERT_NE(status, nullptr);
  EXPECT_EQ(Reason(*status, "Ready"), "Ready");
  EXPECT_EQ(Reason(*status, "GitPathAccepted"), "GitPathAccepted");
}

TEST_F(CatalogStateTest, StatusIsWrittenOnceAndNotAgainWhenSteady) {
  Prime({Provider("a", "repo")}, {Target("a", "t", "x")}, {});
  CatalogChanges first = state_.Reconcile();
  const json* status = StatusWriteFor(first, ObjectKind::kGitTarget, "t");
  ASSERT_NE(status, nullptr);
  EXPECT_EQ(Reason(*status, "StreamsRunning"), "NoResolvedTypes");
  json written = *status;

  // Nothing new while the write is in flight, nor once the object comes back with it.
  EXPECT_EQ(StatusWriteFor(state_.Reconcile(), ObjectKind::kGitTarget, "t"), nullptr);
  json target = Target("a", "t", "x");
  target["status"] = written;
  state_.UpsertObject(ObjectKind::kGitTarget, target);
  clock_.Advance(absl::Minutes(1));
  EXPECT_EQ(StatusWriteFor(state_.Reconcile(), ObjectKind::kGitTarget, "t"), nullptr);

  // A failed write is repeated by the next reconcile.
  state_.ForgetEmittedStatus({ObjectKind::kGitProvider, "a", "repo"});
  EXPECT_NE(StatusWriteFor(state_.Reconcile(), ObjectKind::kGitProvider, "repo"), nullptr);
}

TEST_F(CatalogStateTest, InvalidRulesGetAClearConditionAndSelectNothing) {
  std::vector<json> bad = {
      Rule("a", "sub", "t", {{{"resources", {"deployments/status"}}}}),
      Rule("a", "ops", "t", {{{"resources", {"configmaps"}}, {"operations", {"PATCH"}}}}),
      Rule("a", "empty", "t", json::array()),
      {{"metadata", Meta("a", "nospec")}},
      {{"metadata", Meta("a", "typed")}, {"spec", {{"targetRef", 7}, {"rules", "x"}}}},
  };
  Prime({Provider("a", "repo")}, {Target("a", "t", "x")}, bad);
  CatalogChanges changes = state_.Reconcile();
  ASSERT_TRUE(changes.claims);
  EXPECT_EQ(changes.claims->claims_size(), 0);
  for (const char* name : {"sub", "ops", "empty", "nospec", "typed"}) {
    const json* status = StatusWriteFor(changes, ObjectKind::kWatchRule, name);
    ASSERT_NE(status, nullptr) << name;
    EXPECT_EQ(Reason(*status, "Stalled"), "InvalidRule") << name;
    const json* ready = FindCondition((*status)["conditions"], "Ready");
    ASSERT_NE(ready, nullptr);
    EXPECT_FALSE(ready->value("message", "").empty()) << name;
  }
}

TEST_F(CatalogStateTest, ProvidersAreProbedOnceAndAgainAfterTheInterval) {
  Prime({Provider("a", "repo")}, {}, {});
  CatalogChanges first = state_.Reconcile();
  ASSERT_EQ(first.probes.size(), 1u);
  const json* pending = StatusWriteFor(first, ObjectKind::kGitProvider, "repo");
  ASSERT_NE(pending, nullptr);
  EXPECT_EQ(Reason(*pending, "Reconciling"), "Checking");
  EXPECT_TRUE(state_.Reconcile().probes.empty());

  ProviderProbe probe;
  probe.uid = "a-repo-uid";
  probe.generation = 1;
  probe.ok = false;
  probe.reason = reason::kConnectionFailed;
  probe.message = "local repository path /tmp/x does not exist";
  state_.ApplyProbe({ObjectKind::kGitProvider, "a", "repo"}, probe);
  CatalogChanges probed = state_.Reconcile();
  const json* status = StatusWriteFor(probed, ObjectKind::kGitProvider, "repo");
  ASSERT_NE(status, nullptr);
  EXPECT_EQ(Reason(*status, "Stalled"), "ConnectionFailed");

  clock_.Advance(absl::Minutes(5));
  EXPECT_EQ(state_.Reconcile().probes.size(), 1u);
}

json EncryptedTarget(const std::string& ns, const std::string& name, const std::string& path) {
  json t = Target(ns, name, path);
  t["spec"]["encryption"] = {
      {"provider", "sops"},
      {"secretRef", {{"name", "sops-age-key"}}},
      {"age",
       {{"enabled", true},
        {"recipients", {{"extractFromSecret", true}, {"generateWhenMissing", true}}}}}};
  return t;
}

TEST_F(CatalogStateTest, WaitingForNamesEachStepOfPriming) {
  EXPECT_EQ(state_.WaitingFor(), "the first discovery pass");
  state_.ApplyScan(Scan());
  EXPECT_EQ(state_.WaitingFor(), "the settle window after the first discovery pass");
  clock_.Advance(typeset::Registry::kSettleWindow);
  state_.Tick();
  EXPECT_TRUE(absl::StartsWith(state_.WaitingFor(), "the first listing of ")) << state_.WaitingFor();
  for (ObjectKind kind : kAllObjectKinds) state_.ReplaceObjects(kind, {});
  state_.Reconcile();
  EXPECT_TRUE(state_.primed());
  EXPECT_EQ(state_.WaitingFor(), "");
}

TEST_F(CatalogStateTest, EncryptedTargetsArePublishedOnceTheirSecretIsRead) {
  Prime({Provider("a", "repo")}, {EncryptedTarget("a", "sealed", "x"), Target("a", "plain", "y")},
        {Rule("a", "r1", "sealed", {{{"resources", {"secrets"}}}}),
         Rule("a", "r2", "plain", {{{"resources", {"configmaps"}}}})});
  // Primed inputs, but the Secret of `sealed` is unread: nothing is published yet, so a
  // restarting catalog never sends tables and claims without the encrypted target.
  CatalogChanges first = state_.Reconcile();
  EXPECT_FALSE(first.tables);
  EXPECT_FALSE(first.claims);
  EXPECT_FALSE(state_.primed());
  EXPECT_EQ(state_.WaitingFor(), "the encryption Secrets");
  ASSERT_EQ(first.encryption_reads.size(), 1u);
  const EncryptionSecretRequest& read = first.encryption_reads[0];
  EXPECT_EQ(read.key.name, "sealed");
  EXPECT_EQ(read.uid, "a-sealed-uid");
  EXPECT_EQ(read.secret.namespace_, "a");
  EXPECT_EQ(read.secret.name, "sops-age-key");
  EXPECT_TRUE(read.secret.generate_when_missing);
  EXPECT_TRUE(state_.Reconcile().encryption_reads.empty());  // in flight: not asked again

  EncryptionSecretResult result;
  result.uid = read.uid;
  result.spec = read.spec;
  result.recipients = {"age1recipientfromsecret"};
  state_.ApplyEncryptionSecret(read.key, result);
  CatalogChanges published = state_.Reconcile();
  EXPECT_TRUE(state_.primed());
  EXPECT_EQ(state_.WaitingFor(), "");
  ASSERT_TRUE(published.tables);
  ASSERT_EQ(published.tables->upserted_size(), 2);
  for (const auto& table : published.tables->upserted()) {
    if (table.target().name() == "sealed") {
      EXPECT_EQ(std::vector<std::string>(table.config().age_recipients().begin(),
                                         table.config().age_recipients().end()),
                std::vector<std::string>{"age1recipientfromsecret"});
    } else {
      EXPECT_EQ(table.config().age_recipients_size(), 0);
    }
  }
  ASSERT_TRUE(published.claims);
  EXPECT_TRUE(Claimed(*published.claims, "secrets", "a"));
  const json* status = StatusWriteFor(published, ObjectKind::kGitTarget, "sealed");
  ASSERT_NE(status, nullptr);
  EXPECT_EQ(Reason(*status, "EncryptionConfigured"), "OK");

  // Read again after the interval; a failed read stalls the target and removes its table.
  clock_.Advance(absl::Minutes(5));
  CatalogChanges again = state_.Reconcile();
  ASSERT_EQ(again.encryption_reads.size(), 1u);
  result.ok = false;
  result.reason = reason::kMissingSecret;
  result.message = "failed to fetch encryption secret a/sops-age-key: not found";
  result.recipients.clear();
  state_.ApplyEncryptionSecret(read.key, result);
  CatalogChanges failed = state_.Reconcile();
  ASSERT_TRUE(failed.tables);
  ASSERT_EQ(failed.tables->removed_size(), 1);
  EXPECT_EQ(failed.tables->removed(0).name(), "sealed");
  ASSERT_TRUE(failed.claims);
  EXPECT_FALSE(Claimed(*failed.claims, "secrets", "a"));
  status = StatusWriteFor(failed, ObjectKind::kGitTarget, "sealed");
  ASSERT_NE(status, nullptr);
  EXPECT_EQ(Reason(*status, "EncryptionConfigured"), "MissingSecret");
  EXPECT_EQ(Reason(*status, "Ready"), "EncryptionNotConfigured");

  // An encryption spec change asks again at once, and a result for the old spec is ignored.
  json changed = EncryptedTarget("a", "sealed", "x");
  changed["spec"]["encryption"]["secretRef"]["name"] = "other-key";
  state_.UpsertObject(ObjectKind::kGitTarget, changed);
  CatalogChanges respec = state_.Reconcile();
  ASSERT_EQ(respec.encryption_reads.size(), 1u);
  EXPECT_EQ(respec.encryption_reads[0].secret.name, "other-key");
  status = StatusWriteFor(respec, ObjectKind::kGitTarget, "sealed");
  ASSERT_NE(status, nullptr);
  EXPECT_EQ(Reason(*status, "EncryptionConfigured"), "NotChecked");
  result.ok = true;
  result.recipients = {"age1stale"};
  state_.ApplyEncryptionSecret(read.key, result);  // still the old spec
  CatalogChanges stale = state_.Reconcile();
  EXPECT_FALSE(stale.tables);
  ASSERT_NE(state_.Encryption(read.key), nullptr);
  EXPECT_TRUE(state_.Encryption(read.key)->pending);
}

TEST_F(CatalogStateTest, DeletedTargetOrProviderRemovesTablesAndClaims) {
  Prime({Provider("a", "repo")}, {Target("a", "t1", "one"), Target("a", "t2", "two")},
        {Rule("a", "r1", "t1", {{{"resources", {"configmaps"}}}}),
         Rule("a", "r2", "t2", {{{"resources", {"deployments"}}}})});
  state_.Reconcile();
  state_.DeleteObject(ObjectKind::kGitTarget, Target("a", "t1", "one"));
  CatalogChanges changes = state_.Reconcile();
  ASSERT_TRUE(changes.tables);
  ASSERT_EQ(changes.tables->removed_size(), 1);
  EXPECT_EQ(changes.tables->removed(0).name(), "t1");
  EXPECT_EQ(changes.tables->removed(0).uid(), "a-t1-uid");
  ASSERT_TRUE(changes.claims);
  EXPECT_FALSE(Claimed(*changes.claims, "configmaps", "a"));
  EXPECT_TRUE(Claimed(*changes.claims, "deployments", "a"));
  // The rule now names a missing target.
  const json* rule = StatusWriteFor(changes, ObjectKind::kWatchRule, "r1");
  ASSERT_NE(rule, nullptr);
  EXPECT_EQ(Reason(*rule, "GitTargetReady"), "GitTargetNotFound");

  // Without its provider the other target is invalid: no table, no claims.
  state_.DeleteObject(ObjectKind::kGitProvider, Provider("a", "repo"));
  CatalogChanges gone = state_.Reconcile();
  ASSERT_TRUE(gone.tables);
  EXPECT_EQ(gone.tables->removed_size(), 1);
  EXPECT_EQ(state_.claim_count(), 0u);
  const json* target = StatusWriteFor(gone, ObjectKind::kGitTarget, "t2");
  ASSERT_NE(target, nullptr);
  EXPECT_EQ(Reason(*target, "Validated"), "ProviderNotFound");
}

json ClusterRule(const std::string& name, const std::string& target_ns, const std::string& target,
                 json rules) {
  return {
      {"apiVersion", "configbutler.ai/v1alpha3"},
      {"kind", "ClusterWatchRule"},
      {"metadata", Meta("", name)},
      {"spec", {{"targetRef", {{"name", target}, {"namespace", target_ns}}}, {"rules", rules}}}};
}

reverser::v1::StreamReadiness Readiness(const std::string& resource, const std::string& ns,
                                        reverser::v1::StreamState state,
                                        const std::string& reason) {
  reverser::v1::StreamReadiness r;
  r.mutable_claim()->mutable_type()->mutable_gvr()->set_version("v1");
  r.mutable_claim()->mutable_type()->mutable_gvr()->set_resource(resource);
  if (ns.empty()) {
    r.mutable_claim()->mutable_scope()->set_cluster(true);
  } else {
    r.mutable_claim()->mutable_scope()->set_namespace_(ns);
  }
  r.set_state(state);
  r.set_reason(reason);
  return r;
}

reverser::v1::StreamSummary SummaryOf(const std::string& ns, const std::string& name,
                                      std::vector<reverser::v1::StreamReadiness> streams) {
  reverser::v1::StreamSummary summary;
  summary.mutable_target()->set_namespace_(ns);
  summary.mutable_target()->set_name(name);
  summary.mutable_target()->set_uid(absl::StrCat(ns, "-", name, "-uid"));
  for (auto& s : streams) *summary.add_streams() = std::move(s);
  rules::FillSummary(rules::RollUpStreams({summary.streams().begin(), summary.streams().end()}),
                     &summary);
  summary.mutable_observed_time()->set_seconds(1'700'000'000);
  return summary;
}

// Behaviour 1: one target's namespaced WatchRule keeps its namespaced materialization while
// another target follows the type cluster-wide; when the cluster-wide list/watch is forbidden,
// only the ClusterWatchRule's target (and the rule) report WatchNotPermitted.
TEST_F(CatalogStateTest, ANamespacedRuleKeepsItsOwnWatchBesideAForbiddenClusterWatch) {
  Prime({Provider("a", "repo")}, {Target("a", "ns-target", "one"), Target("a", "wide", "two")},
        {Rule("a", "local", "ns-target", {{{"apiGroups", {""}}, {"resources", {"configmaps"}}}})});
  state_.ReplaceObjects(
      ObjectKind::kClusterWatchRule,
      {ClusterRule(
          "everywhere", "a", "wide",
          {{{"apiGroups", {""}}, {"resources", {"configmaps"}}, {"scope", "Namespaced"}}})});
  CatalogChanges first = state_.Reconcile();
  ASSERT_TRUE(first.claims);
  EXPECT_TRUE(Claimed(*first.claims, "configmaps", "a"));
  EXPECT_TRUE(Claimed(*first.claims, "configmaps", ""));  // "" = the cluster-wide claim
  EXPECT_EQ(first.claims->claims_size(), 2);
  // Before any report, each rule waits for its own stream.
  const json* waiting = StatusWriteFor(first, ObjectKind::kWatchRule, "local");
  ASSERT_NE(waiting, nullptr);
  EXPECT_EQ(Reason(*waiting, "StreamsRunning"), "Replaying");
  EXPECT_EQ((*waiting)["streams"]["summary"], "0/1");

  state_.ApplySummary(SummaryOf(
      "a", "ns-target",
      {Readiness("configmaps", "a", reverser::v1::STREAM_STATE_STREAMING, "AllStreamsReady")}));
  state_.ApplySummary(SummaryOf(
      "a", "wide",
      {Readiness("configmaps", "", reverser::v1::STREAM_STATE_BLOCKED, "WatchNotPermitted")}));
  CatalogChanges reported = state_.Reconcile();
  const json* ns_target = StatusWriteFor(reported, ObjectKind::kGitTarget, "ns-target");
  ASSERT_NE(ns_target, nullptr);
  EXPECT_EQ(Reason(*ns_target, "Ready"), "Ready");
  const json* local = StatusWriteFor(reported, ObjectKind::kWatchRule, "local");
  ASSERT_NE(local, nullptr);
  EXPECT_EQ(Reason(*local, "Ready"), "Ready");
  EXPECT_EQ(Reason(*local, "GitTargetReady"), "OK");
  EXPECT_EQ(Reason(*local, "StreamsRunning"), "AllStreamsReady");
  EXPECT_EQ((*local)["streams"]["summary"], "1/1");
  EXPECT_EQ((*local)["streams"]["observedTime"], "2023-11-14T22:13:20Z");

  const json* wide = StatusWriteFor(reported, ObjectKind::kGitTarget, "wide");
  ASSERT_NE(wide, nullptr);
  EXPECT_EQ(Reason(*wide, "StreamsRunning"), "WatchNotPermitted");
  EXPECT_EQ(Reason(*wide, "Stalled"), "WatchNotPermitted");
  const json* stalled = FindCondition((*wide)["conditions"], "Stalled");
  EXPECT_EQ(stalled->value("status", ""), "True");
  EXPECT_EQ(stalled->value("message", ""), "0/1 streams running; 1 blocked (configmaps)");
  const json* everywhere = StatusWriteFor(reported, ObjectKind::kClusterWatchRule, "everywhere");
  ASSERT_NE(everywhere, nullptr);
  EXPECT_EQ(Reason(*everywhere, "StreamsRunning"), "WatchNotPermitted");
  EXPECT_EQ(Reason(*everywhere, "Stalled"), "WatchNotPermitted");
  EXPECT_EQ(Reason(*everywhere, "GitTargetReady"), "WatchNotPermitted");
  EXPECT_EQ((*everywhere)["streams"]["blocked"], 1);
  EXPECT_EQ((*everywhere)["streams"]["pendingSample"], json({"configmaps"}));
}

// A WatchRule of a target that also follows the type cluster-wide is served by that target's
// cluster-wide stream.
TEST_F(CatalogStateTest, ARulesStreamIsTheOneItsTargetReadsTheTypeFrom) {
  Prime(
      {Provider("a", "repo")}, {Target("a", "t", "x")},
      {Rule("a", "local", "t", {{{"apiGroups", {""}}, {"resources", {"configmaps", "secrets"}}}})});
  state_.ReplaceObjects(
      ObjectKind::kClusterWatchRule,
      {ClusterRule(
          "wide", "a", "t",
          {{{"apiGroups", {""}}, {"resources", {"configmaps"}}, {"scope", "Namespaced"}}})});
  CatalogChanges first = state_.Reconcile();
  EXPECT_FALSE(Claimed(*first.claims, "configmaps", "a"));
  EXPECT_TRUE(Claimed(*first.claims, "configmaps", ""));
  EXPECT_TRUE(Claimed(*first.claims, "secrets", "a"));
  state_.ApplySummary(SummaryOf(
      "a", "t",
      {Readiness("configmaps", "", reverser::v1::STREAM_STATE_STREAMING, "AllStreamsReady"),
       Readiness("secrets", "a", reverser::v1::STREAM_STATE_REPLAYING, "InitialReplay")}));
  CatalogChanges reported = state_.Reconcile();
  const json* local = StatusWriteFor(reported, ObjectKind::kWatchRule, "local");
  ASSERT_NE(local, nullptr);
  EXPECT_EQ((*local)["streams"]["summary"], "1/2");
  EXPECT_EQ((*local)["streams"]["pendingSample"], json({"secrets"}));
  const json* ready = FindCondition((*local)["conditions"], "StreamsRunning");
  EXPECT_EQ(ready->value("message", ""), "1/2 streams running; 1 replaying (secrets)");
  const json* wide = StatusWriteFor(reported, ObjectKind::kClusterWatchRule, "wide");
  ASSERT_NE(wide, nullptr);
  EXPECT_EQ((*wide)["streams"]["summary"], "1/1");
  EXPECT_EQ(Reason(*wide, "StreamsRunning"), "AllStreamsReady");
}

// lastReconcileTime is stamped on every write and refreshed once it is older than the refresh
// period (the reference's steady requeue), with a deadline for it; lastPushTime comes from the
// splicer's report.
TEST_F(CatalogStateTest, ReconcileAndPushTimesAreWrittenOnTheTarget) {
  Prime({Provider("a", "repo")}, {Target("a", "t", "x")},
        {Rule("a", "r", "t", {{{"apiGroups", {""}}, {"resources", {"configmaps"}}}})});
  const absl::Time start = clock_.Now();
  CatalogChanges first = state_.Reconcile();
  const json* written = StatusWriteFor(first, ObjectKind::kGitTarget, "t");
  ASSERT_NE(written, nullptr);
  EXPECT_EQ((*written)["lastReconcileTime"], FormatKubeTime(start));
  EXPECT_FALSE(written->contains("lastPushTime"));
  json target = Target("a", "t", "x");
  target["status"] = *written;
  state_.UpsertObject(ObjectKind::kGitTarget, target);
  clock_.Advance(absl::Minutes(4));
  EXPECT_EQ(StatusWriteFor(state_.Reconcile(), ObjectKind::kGitTarget, "t"), nullptr);
  ASSERT_TRUE(state_.NextDeadline());
  EXPECT_EQ(*state_.NextDeadline(), start + absl::Minutes(5));

  clock_.Advance(absl::Minutes(1));
  CatalogChanges refreshed = state_.Reconcile();
  written = StatusWriteFor(refreshed, ObjectKind::kGitTarget, "t");
  ASSERT_NE(written, nullptr);
  EXPECT_EQ((*written)["lastReconcileTime"], FormatKubeTime(start + absl::Minutes(5)));
  target["status"] = *written;
  state_.UpsertObject(ObjectKind::kGitTarget, target);
  EXPECT_EQ(StatusWriteFor(state_.Reconcile(), ObjectKind::kGitTarget, "t"), nullptr);

  reverser::v1::StreamSummary summary = SummaryOf(
      "a", "t",
      {Readiness("configmaps", "a", reverser::v1::STREAM_STATE_STREAMING, "AllStreamsReady")});
  summary.mutable_last_push_time()->set_seconds(absl::ToUnixSeconds(start + absl::Minutes(6)));
  state_.ApplySummary(summary);
  clock_.Advance(absl::Minutes(2));
  CatalogChanges pushed = state_.Reconcile();
  written = StatusWriteFor(pushed, ObjectKind::kGitTarget, "t");
  ASSERT_NE(written, nullptr);
  EXPECT_EQ((*written)["lastPushTime"], FormatKubeTime(start + absl::Minutes(6)));
  EXPECT_EQ((*written)["lastReconcileTime"], FormatKubeTime(start + absl::Minutes(7)));
  EXPECT_EQ(Reason(*written, "Ready"), "Ready");
}

// Reference bench: 500 types, 1,000 rules over 100 GitTargets; the time to recompute every
// table after a registry change (printed, not asserted).
TEST_F(CatalogStateTest, BenchRecomputeAllTables) {
  auto scan_with = [](int generation_marker) {
    ScanBuilder b;
    std::vector<typeset::ServedResource> resources;
    for (int g = 0; g < 50; ++g) {
      std::vector<typeset::ServedResource> group;
      for (int r = 0; r < 10; ++r) {
        group.push_back(Res(absl::StrCat("kind", r, "s"), absl::StrCat("Kind", r)));
      }
      std::string name = absl::StrCat("g", g, ".example.com");
      b.Group(name, "v1", group).Crd(absl::StrCat(name, "/kind0s"));
      for (int r = 1; r < 10; ++r) b.Crd(absl::StrCat(name, "/kind", r, "s"));
    }
    if (generation_marker > 0) b.Group("extra.example.com", "v1", {Res("extras", "Extra")});
    return b.Build();
  };
  state_.ApplyScan(scan_with(0));
  clock_.Advance(typeset::Registry::kSettleWindow);
  state_.Tick();
  std::vector<json> providers = {Provider("ns", "repo")};
  std::vector<json> targets;
  std::vector<json> rules;
  for (int t = 0; t < 100; ++t) {
    targets.push_back(Target("ns", absl::StrCat("t", t), absl::StrCat("p", t)));
    for (int r = 0; r < 10; ++r) {
      int g = (t + r) % 50;
      rules.push_back(Rule("ns", absl::StrCat("r", t, "-", r), absl::StrCat("t", t),
                           {{{"apiGroups", {absl::StrCat("g", g, ".example.com")}},
                             {"resources", {"*"}},
                             {"operations", {"CREATE"}}}}));
    }
  }
  state_.ReplaceObjects(ObjectKind::kGitProvider, providers);
  state_.ReplaceObjects(ObjectKind::kGitTarget, targets);
  state_.ReplaceObjects(ObjectKind::kWatchRule, rules);
  state_.ReplaceObjects(ObjectKind::kClusterWatchRule, {});
  auto t0 = std::chrono::steady_clock::now();
  CatalogChanges first = state_.Reconcile();
  auto t1 = std::chrono::steady_clock::now();
  ASSERT_EQ(first.tables->upserted_size(), 100);
  EXPECT_EQ(first.tables->upserted(0).types_size(), 100);

  // A discovery change moves the registry revision: every table is re-resolved.
  state_.ApplyScan(scan_with(1));
  auto t2 = std::chrono::steady_clock::now();
  CatalogChanges again = state_.Reconcile();
  auto t3 = std::chrono::steady_clock::now();
  EXPECT_EQ(again.tables_resolved, 100u);
  // One live rule edit: one table re-resolved, every status re-rendered.
  state_.UpsertObject(ObjectKind::kWatchRule,
                      Rule("ns", "r0-0", "t0", {{{"resources", {"configmaps"}}}}, 2));
  auto t4 = std::chrono::steady_clock::now();
  CatalogChanges edit = state_.Reconcile();
  auto t5 = std::chrono::steady_clock::now();
  EXPECT_EQ(edit.tables_resolved, 1u);
  auto ms = [](auto d) { return std::chrono::duration<double, std::milli>(d).count(); };
  std::cout << "bench: 500 types, 1000 rules, 100 GitTargets: first reconcile " << ms(t1 - t0)
            << " ms; recompute all tables after a discovery change " << ms(t3 - t2) << " ms ("
            << again.tables_resolved << " tables, " << state_.claim_count() << " claims); "
            << "one rule edit " << ms(t5 - t4) << " ms" << std::endl;
}

}  // namespace
}  // namespace reverser::catalog
