// The pure status rules: path normalization and overlap, branch globs, target validation,
// encryption, commit config, condition rendering.

#include "services/catalog/controllers.h"

#include "gtest/gtest.h"
#include "services/catalog/objects.h"

namespace reverser::catalog {
namespace {

using nlohmann::json;

json Target(const std::string& name, const std::string& path, const std::string& created,
            const std::string& branch = "main", const std::string& ns = "a") {
  return {{"metadata", {{"namespace", ns}, {"name", name}, {"creationTimestamp", created}}},
          {"spec", {{"providerRef", {{"name", "repo"}}}, {"branch", branch}, {"path", path}}}};
}

const json kProvider = {{"metadata", {{"namespace", "a"}, {"name", "repo"}}},
                        {"spec", {{"url", "file:///x"}, {"allowedBranches", {"main", "release-*"}}}}};

TEST(ControllersTest, TargetPathsAreNormalizedAndValidated) {
  EXPECT_EQ(*NormalizeTargetPath("."), ".");
  EXPECT_EQ(*NormalizeTargetPath("clusters/prod/"), "clusters/prod");
  EXPECT_FALSE(NormalizeTargetPath("").ok());
  EXPECT_FALSE(NormalizeTargetPath("/abs").ok());
  EXPECT_FALSE(NormalizeTargetPath("a/../b").ok());
  EXPECT_FALSE(NormalizeTargetPath("a//b").ok());
}

TEST(ControllersTest, OverlapIsEqualOrNestedOnSegmentBoundaries) {
  EXPECT_TRUE(PathsOverlap("a", "a"));
  EXPECT_TRUE(PathsOverlap("a", "a/b"));
  EXPECT_TRUE(PathsOverlap("a/b", "a"));
  EXPECT_TRUE(PathsOverlap(".", "x/y"));
  EXPECT_FALSE(PathsOverlap("a", "ab"));
  EXPECT_FALSE(PathsOverlap("a/b", "a/c"));
}

TEST(ControllersTest, BranchesMatchGoGlobs) {
  EXPECT_TRUE(BranchAllowed(kProvider, "main"));
  EXPECT_TRUE(BranchAllowed(kProvider, "release-1.2"));
  EXPECT_FALSE(BranchAllowed(kProvider, "release-1/x"));  // '*' stops at '/'
  EXPECT_FALSE(BranchAllowed(kProvider, "dev"));
}

TEST(ControllersTest, LaterCreatedOverlappingTargetLoses) {
  json early = Target("early", "clusters", "2026-01-01T00:00:00Z");
  json late = Target("late", "clusters/prod", "2026-01-02T00:00:00Z");
  json other_branch = Target("other", "clusters", "2025-01-01T00:00:00Z", "release-1");
  EXPECT_TRUE(ValidateTarget(early, &kProvider, {&late, &other_branch}).ok);
  TargetValidation v = ValidateTarget(late, &kProvider, {&early, &other_branch});
  EXPECT_FALSE(v.ok);
  EXPECT_EQ(v.reason, "TargetConflict");
  EXPECT_NE(v.message.find("a/early"), std::string::npos);
  // Same creation time: namespace/name breaks the tie.
  json twin_a = Target("a1", "p", "2026-01-01T00:00:00Z");
  json twin_b = Target("b1", "p", "2026-01-01T00:00:00Z");
  EXPECT_TRUE(ValidateTarget(twin_a, &kProvider, {&twin_b}).ok);
  EXPECT_FALSE(ValidateTarget(twin_b, &kProvider, {&twin_a}).ok);
}

TEST(ControllersTest, ValidationReasons) {
  json t = Target("t", "x", "2026-01-01T00:00:00Z");
  EXPECT_EQ(ValidateTarget(t, nullptr, {}).reason, "ProviderNotFound");
  EXPECT_EQ(ValidateTarget(Target("t", "x", "", "dev"), &kProvider, {}).reason, "BranchNotAllowed");
  EXPECT_EQ(ValidateTarget(Target("t", "/x", ""), &kProvider, {}).reason, "InvalidPath");
}

TEST(ControllersTest, EncryptionNeedsAgeRecipients) {
  json t = Target("t", "x", "");
  EXPECT_EQ(CheckEncryption(t).reason, "NotRequired");
  t["spec"]["encryption"] = {{"age", {{"enabled", true}}}};
  EXPECT_EQ(CheckEncryption(t).reason, "InvalidConfig");
  t["spec"]["encryption"]["age"]["recipients"] = {{"publicKeys", {"age1abc"}}};
  EncryptionCheck ok = CheckEncryption(t);
  EXPECT_TRUE(ok.ok);
  EXPECT_EQ(ok.recipients, std::vector<std::string>{"age1abc"});
  t["spec"]["encryption"]["age"]["recipients"]["publicKeys"] = {"ssh-ed25519 AAA"};
  EXPECT_FALSE(CheckEncryption(t).ok);
}

TEST(ControllersTest, CommitConfigIsChecked) {
  json p = kProvider;
  EXPECT_FALSE(CheckCommitConfig(p));
  p["spec"]["push"] = {{"commitWindow", "soon"}};
  ASSERT_TRUE(CheckCommitConfig(p));
  EXPECT_NE(CheckCommitConfig(p)->find("commitWindow"), std::string::npos);
  p["spec"]["push"]["commitWindow"] = "1m30s";
  EXPECT_FALSE(CheckCommitConfig(p));
  p["spec"]["commit"] = {{"message", {{"eventTemplate", "{{.Operation"}}}};
  ASSERT_TRUE(CheckCommitConfig(p));
  json status = ProviderStatus(p, nullptr, absl::UnixEpoch());
  EXPECT_EQ(FindCondition(status["conditions"], "Stalled")->value("reason", ""),
            "CommitConfigInvalid");
}

TEST(ControllersTest, SigningPublicKeyFollowsTheProbe) {
  json p = kProvider;
  // Pending: the field is left alone (not in the patch).
  EXPECT_FALSE(ProviderStatus(p, nullptr, absl::UnixEpoch()).contains("signingPublicKey"));
  ProviderProbe probe;
  probe.signing_public_key = "ssh-ed25519 AAAAC3Nza";
  EXPECT_EQ(ProviderStatus(p, &probe, absl::UnixEpoch())["signingPublicKey"],
            "ssh-ed25519 AAAAC3Nza");
  // Published even when a later check fails; cleared (null in the merge patch) without a key.
  probe.ok = false;
  probe.reason = "ConnectionFailed";
  EXPECT_EQ(ProviderStatus(p, &probe, absl::UnixEpoch())["signingPublicKey"],
            "ssh-ed25519 AAAAC3Nza");
  probe.signing_public_key.reset();
  json cleared = ProviderStatus(p, &probe, absl::UnixEpoch());
  ASSERT_TRUE(cleared.contains("signingPublicKey"));
  EXPECT_TRUE(cleared["signingPublicKey"].is_null());

  // Signing without a Secret name is a commit config error.
  p["spec"]["commit"] = {{"signing", {{"secretRef", json::object()}}}};
  ASSERT_TRUE(CheckCommitConfig(p));
  EXPECT_NE(CheckCommitConfig(p)->find("signing.secretRef.name"), std::string::npos);
  p["spec"]["commit"]["signing"]["secretRef"]["name"] = "signing";
  EXPECT_FALSE(CheckCommitConfig(p));
}

TEST(ControllersTest, TransitionTimeIsKeptWhileStatusIsUnchanged) {
  absl::Time t1 = absl::FromUnixSeconds(1'700'000'000);
  absl::Time t2 = t1 + absl::Hours(1);
  json first = RenderConditions(Trio(Outcome::kPending, "Checking", "m"), json(), 3, t1);
  json same = RenderConditions(Trio(Outcome::kPending, "Checking", "other message"), first, 3, t2);
  EXPECT_EQ(FindCondition(same, "Ready")->value("lastTransitionTime", ""), FormatKubeTime(t1));
  json flipped = RenderConditions(Trio(Outcome::kReady, "Ready", "m"), first, 4, t2);
  EXPECT_EQ(FindCondition(flipped, "Ready")->value("lastTransitionTime", ""), FormatKubeTime(t2));
  EXPECT_EQ(FindCondition(flipped, "Ready")->value("observedGeneration", 0), 4);
  EXPECT_EQ(FormatKubeTime(t1), "2023-11-14T22:13:20Z");
}

TEST(ControllersTest, StreamSummaryDrivesTargetReadiness) {
  json t = Target("t", "x", "");
  t["metadata"]["generation"] = 2;
  TargetValidation ok;
  reverser::v1::StreamSummary summary;
  summary.set_total(3);
  summary.set_ready(1);
  summary.set_replaying(2);
  summary.set_reason("Replaying");
  summary.add_pending_sample("apps/v1/deployments a");
  rules::WatchedTypeTable table;
  table.types[{"apps", "v1", "deployments"}] = {};
  json replaying = TargetStatus(t, ok, &table, &summary, absl::UnixEpoch());
  EXPECT_EQ(FindCondition(replaying["conditions"], "Reconciling")->value("status", ""), "True");
  EXPECT_EQ(replaying["streams"]["summary"], "1/3");
  summary.set_ready(3);
  summary.set_replaying(0);
  summary.set_reason("AllStreamsReady");
  json ready = TargetStatus(t, ok, &table, &summary, absl::UnixEpoch());
  EXPECT_EQ(FindCondition(ready["conditions"], "Ready")->value("status", ""), "True");
  EXPECT_EQ(ready["observedGeneration"], 2);
  summary.set_ready(2);
  summary.set_blocked(1);
  summary.set_reason("WatchNotPermitted");
  json blocked = TargetStatus(t, ok, &table, &summary, absl::UnixEpoch());
  EXPECT_EQ(FindCondition(blocked["conditions"], "Stalled")->value("reason", ""),
            "WatchNotPermitted");
}

}  // namespace
}  // namespace reverser::catalog
