// The pure status rules: path normalization and overlap, branch globs, target validation,
// encryption, commit config, condition rendering.

#include "services/catalog/controllers.h"

#include "gtest/gtest.h"
#include "libs/sops/age.h"
#include "libs/sops/crypto.h"
#include "services/catalog/objects.h"

namespace reverser::catalog {
namespace {

using nlohmann::json;

json Target(const std::string& name, const std::string& path, const std::string& created,
            const std::string& branch = "main", const std::string& ns = "a") {
  return {{"metadata", {{"namespace", ns}, {"name", name}, {"creationTimestamp", created}}},
          {"spec", {{"providerRef", {{"name", "repo"}}}, {"branch", branch}, {"path", path}}}};
}

const json kProvider = {
    {"metadata", {{"namespace", "a"}, {"name", "repo"}}},
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

std::string NewRecipient() {
  auto identity = sops::age::X25519Identity::Generate(sops::crypto::SystemRandom());
  EXPECT_TRUE(identity.ok());
  return identity.ok() ? identity->Recipient().String() : "";
}

TEST(ControllersTest, EncryptionNeedsAgeRecipients) {
  json t = Target("t", "x", "");
  EXPECT_EQ(CheckEncryption(t).reason, "NotRequired");
  EXPECT_TRUE(CheckEncryption(t).ok);
  t["spec"]["encryption"] = {{"age", {{"enabled", true}}}};
  EXPECT_EQ(CheckEncryption(t).reason, "InvalidConfig");
  EXPECT_NE(CheckEncryption(t).message.find("at least one resolved recipient"), std::string::npos);
  const std::string a = NewRecipient(), b = NewRecipient();
  t["spec"]["encryption"]["age"]["recipients"] = {{"publicKeys", {" " + b, a, b}}};
  EncryptionCheck ok = CheckEncryption(t);
  EXPECT_TRUE(ok.ok);
  EXPECT_EQ(ok.reason, "OK");
  EXPECT_EQ(ok.recipients,
            (a < b ? std::vector<std::string>{a, b} : std::vector<std::string>{b, a}));
  EXPECT_FALSE(ok.secret);
  t["spec"]["encryption"]["age"]["recipients"]["publicKeys"] = {a, "age1abc"};
  EncryptionCheck bad = CheckEncryption(t);
  EXPECT_EQ(bad.reason, "InvalidConfig");
  EXPECT_NE(bad.message.find("age.recipients.publicKeys[1]"), std::string::npos) << bad.message;
  t["spec"]["encryption"]["age"]["enabled"] = false;
  EXPECT_EQ(CheckEncryption(t).reason, "NotRequired");
}

TEST(ControllersTest, RecipientsFromTheSecretJoinThePublicKeys) {
  json t = Target("t", "x", "");
  const std::string a = NewRecipient(), b = NewRecipient();
  t["spec"]["encryption"] = {
      {"provider", "sops"},
      {"secretRef", {{"name", "sops-age-key"}}},
      {"age",
       {{"enabled", true}, {"recipients", {{"publicKeys", {a}}, {"extractFromSecret", true}}}}}};
  // Not read yet: pending, naming the Secret to read.
  EncryptionCheck pending = CheckEncryption(t);
  EXPECT_FALSE(pending.ok);
  EXPECT_TRUE(pending.pending);
  EXPECT_EQ(pending.reason, "NotChecked");
  ASSERT_TRUE(pending.secret);
  EXPECT_EQ(pending.secret->namespace_, "a");
  EXPECT_EQ(pending.secret->name, "sops-age-key");
  EXPECT_FALSE(pending.secret->generate_when_missing);

  EncryptionSecretResult read;
  read.recipients = {b, a};
  EncryptionCheck ok = CheckEncryption(t, &read);
  EXPECT_TRUE(ok.ok);
  EXPECT_EQ(ok.recipients,
            (a < b ? std::vector<std::string>{a, b} : std::vector<std::string>{b, a}));

  EncryptionSecretResult missing;
  missing.ok = false;
  missing.reason = "MissingSecret";
  missing.message = "failed to fetch encryption secret team-a/sops-age-key: not found";
  EncryptionCheck failed = CheckEncryption(t, &missing);
  EXPECT_FALSE(failed.ok);
  EXPECT_FALSE(failed.pending);
  EXPECT_EQ(failed.reason, "MissingSecret");
  EXPECT_EQ(failed.message, missing.message);

  // generateWhenMissing needs extractFromSecret and a Secret name; secretRef.kind is Secret.
  json g = t;
  g["spec"]["encryption"]["age"]["recipients"] = {{"generateWhenMissing", true}};
  EXPECT_EQ(CheckEncryption(g).reason, "InvalidConfig");
  EXPECT_NE(CheckEncryption(g).message.find("requires extractFromSecret=true"), std::string::npos);
  g["spec"]["encryption"]["age"]["recipients"]["extractFromSecret"] = true;
  ASSERT_TRUE(CheckEncryption(g).secret);
  EXPECT_TRUE(CheckEncryption(g).secret->generate_when_missing);
  g["spec"]["encryption"].erase("secretRef");
  EXPECT_EQ(CheckEncryption(g).reason, "InvalidConfig");
  json k = t;
  k["spec"]["encryption"]["secretRef"]["kind"] = "ConfigMap";
  EXPECT_EQ(CheckEncryption(k).reason, "InvalidConfig");
  // A spec change makes an earlier read meaningless (its key changes).
  EXPECT_NE(EncryptionSpecKey(t), EncryptionSpecKey(k));
}

TEST(ControllersTest, EncryptionGatesTheTargetStatus) {
  json t = Target("t", "x", "");
  TargetValidation ok;
  EncryptionCheck pending;
  pending.ok = false;
  pending.pending = true;
  pending.reason = "NotChecked";
  pending.message = "reading encryption secret team-a/k";
  json waiting = TargetStatus(t, ok, pending, nullptr, nullptr, absl::UnixEpoch());
  EXPECT_EQ(FindCondition(waiting["conditions"], "EncryptionConfigured")->value("status", ""),
            "Unknown");
  EXPECT_EQ(FindCondition(waiting["conditions"], "Reconciling")->value("status", ""), "True");
  EXPECT_EQ(FindCondition(waiting["conditions"], "Stalled")->value("status", ""), "False");

  EncryptionCheck missing;
  missing.ok = false;
  missing.reason = "MissingSecret";
  missing.message = "failed to fetch encryption secret team-a/k";
  json stalled = TargetStatus(t, ok, missing, nullptr, nullptr, absl::UnixEpoch());
  const json* enc = FindCondition(stalled["conditions"], "EncryptionConfigured");
  EXPECT_EQ(enc->value("status", ""), "False");
  EXPECT_EQ(enc->value("reason", ""), "MissingSecret");
  const json* ready = FindCondition(stalled["conditions"], "Ready");
  EXPECT_EQ(ready->value("status", ""), "False");
  EXPECT_EQ(ready->value("reason", ""), "EncryptionNotConfigured");
  EXPECT_EQ(FindCondition(stalled["conditions"], "Stalled")->value("status", ""), "True");
  EXPECT_EQ(FindCondition(stalled["conditions"], "StreamsRunning")->value("reason", ""), "Blocked");
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
  json replaying = TargetStatus(t, ok, EncryptionCheck{}, &table, &summary, absl::UnixEpoch());
  EXPECT_EQ(FindCondition(replaying["conditions"], "Reconciling")->value("status", ""), "True");
  EXPECT_EQ(replaying["streams"]["summary"], "1/3");
  summary.set_ready(3);
  summary.set_replaying(0);
  summary.set_reason("AllStreamsReady");
  json ready = TargetStatus(t, ok, EncryptionCheck{}, &table, &summary, absl::UnixEpoch());
  EXPECT_EQ(FindCondition(ready["conditions"], "Ready")->value("status", ""), "True");
  EXPECT_EQ(ready["observedGeneration"], 2);
  summary.set_ready(2);
  summary.set_blocked(1);
  summary.set_reason("WatchNotPermitted");
  json blocked = TargetStatus(t, ok, EncryptionCheck{}, &table, &summary, absl::UnixEpoch());
  EXPECT_EQ(FindCondition(blocked["conditions"], "Stalled")->value("reason", ""),
            "WatchNotPermitted");
}

reverser::v1::Refusal ObjectRefusal(const std::string& kind, const std::string& ns,
                                    const std::string& name, const std::string& message) {
  reverser::v1::Refusal refusal;
  refusal.set_kind(kind);
  refusal.mutable_object()->set_namespace_(ns);
  refusal.mutable_object()->set_name(name);
  refusal.set_reason(reverser::v1::REFUSAL_REASON_ENCRYPTION_UNAVAILABLE);
  refusal.set_message(message);
  return refusal;
}

reverser::v1::StreamSummary AllReady() {
  reverser::v1::StreamSummary summary;
  summary.set_total(1);
  summary.set_ready(1);
  summary.set_reason("AllStreamsReady");
  return summary;
}

std::string ConditionField(const json& status, const std::string& type, const std::string& field) {
  const json* condition = FindCondition(status["conditions"], type);
  return condition == nullptr ? "<none>" : condition->value(field, "");
}

TEST(ControllersTest, AFullyMirroredTargetAcceptsItsGitPath) {
  rules::WatchedTypeTable table;
  table.types[{"", "v1", "configmaps"}] = {};
  reverser::v1::StreamSummary summary = AllReady();
  json status = TargetStatus(Target("t", "x", ""), TargetValidation(), EncryptionCheck{}, &table,
                             &summary, absl::UnixEpoch());
  EXPECT_EQ(ConditionField(status, "GitPathAccepted", "status"), "True");
  EXPECT_EQ(ConditionField(status, "GitPathAccepted", "reason"), "GitPathAccepted");
  EXPECT_EQ(ConditionField(status, "Ready", "status"), "True");
  EXPECT_EQ(ConditionField(status, "Stalled", "status"), "False");
  // Before any report, acceptance is unknown (and validation failures block it).
  json early = TargetStatus(Target("t", "x", ""), TargetValidation(), EncryptionCheck{}, &table,
                            nullptr, absl::UnixEpoch());
  EXPECT_EQ(ConditionField(early, "GitPathAccepted", "status"), "Unknown");
  TargetValidation invalid{false, reason::kProviderNotFound, "GitProvider a/repo not found"};
  json blocked = TargetStatus(Target("t", "x", ""), invalid, EncryptionCheck{}, nullptr, nullptr,
                              absl::UnixEpoch());
  EXPECT_EQ(ConditionField(blocked, "GitPathAccepted", "status"), "Unknown");
  EXPECT_EQ(ConditionField(blocked, "GitPathAccepted", "reason"), "Blocked");
}

TEST(ControllersTest, RefusedObjectsStallTheTargetNamingEachObject) {
  rules::WatchedTypeTable table;
  table.types[{"", "v1", "secrets"}] = {};
  reverser::v1::StreamSummary summary = AllReady();
  summary.set_refused_objects(7);
  *summary.add_refusals() = ObjectRefusal("Secret", "demo", "db", "no age recipients configured");
  *summary.add_refusals() = ObjectRefusal("ClusterRole", "", "evil\\role", "x");
  json status = TargetStatus(Target("t", "x", ""), TargetValidation(), EncryptionCheck{}, &table,
                             &summary, absl::UnixEpoch());
  EXPECT_EQ(ConditionField(status, "Ready", "status"), "False");
  EXPECT_EQ(ConditionField(status, "Stalled", "status"), "True");
  EXPECT_EQ(ConditionField(status, "Reconciling", "status"), "False");
  EXPECT_EQ(ConditionField(status, "Ready", "reason"), "ObjectRefused");
  EXPECT_EQ(ConditionField(status, "Ready", "message"),
            "7 object(s) refused: Secret demo/db: EncryptionUnavailable: no age recipients "
            "configured; ClusterRole evil\\\\role: EncryptionUnavailable: x (and 5 more)");
  // Objects do not make the path unacceptable; streams still run.
  EXPECT_EQ(ConditionField(status, "GitPathAccepted", "status"), "True");
  EXPECT_EQ(ConditionField(status, "StreamsRunning", "status"), "True");
  // Once the refusals clear, the target is Ready again.
  summary.clear_refusals();
  summary.set_refused_objects(0);
  json cleared = TargetStatus(Target("t", "x", ""), TargetValidation(), EncryptionCheck{}, &table,
                              &summary, absl::UnixEpoch());
  EXPECT_EQ(ConditionField(cleared, "Ready", "status"), "True");
}

TEST(ControllersTest, RefusedFilesRefuseTheGitPathAsUnsupportedContent) {
  rules::WatchedTypeTable table;
  table.types[{"", "v1", "configmaps"}] = {};
  reverser::v1::StreamSummary summary = AllReady();
  summary.set_refused_files(3);
  summary.set_refused_objects(1);
  *summary.add_refusals() = ObjectRefusal("ConfigMap", "demo", "x", "its file is refused");
  reverser::v1::Refusal file;
  file.set_file("x/demo/configmaps/big.yaml");
  file.set_reason(reverser::v1::REFUSAL_REASON_UNSUPPORTED_CONTENT);
  file.set_message(std::string(5000, 'm'));
  *summary.add_refusals() = file;
  json status = TargetStatus(Target("t", "x", ""), TargetValidation(), EncryptionCheck{}, &table,
                             &summary, absl::UnixEpoch());
  EXPECT_EQ(ConditionField(status, "GitPathAccepted", "status"), "False");
  EXPECT_EQ(ConditionField(status, "GitPathAccepted", "reason"), "UnsupportedContent");
  const std::string message = ConditionField(status, "GitPathAccepted", "message");
  EXPECT_EQ(message.rfind("Git path refused at x/demo/configmaps/big.yaml: mmm", 0), 0u) << message;
  EXPECT_NE(message.find("... (and 2 more issue(s))"), std::string::npos) << message;
  EXPECT_LT(message.size(), 500u) << "causes are cut";
  // Refused files take precedence over refused objects in the trio.
  EXPECT_EQ(ConditionField(status, "Stalled", "status"), "True");
  EXPECT_EQ(ConditionField(status, "Ready", "reason"), "UnsupportedContent");
  EXPECT_EQ(ConditionField(status, "Ready", "message"), message);
}

TEST(ControllersTest, APathRefusedByTheAcceptanceGateStallsTheTargetWithItsReason) {
  rules::WatchedTypeTable table;
  table.types[{"", "v1", "configmaps"}] = {};
  reverser::v1::StreamSummary summary = AllReady();
  summary.set_refused_files(1);
  reverser::v1::Refusal file;
  file.set_file("x/big.yaml");
  file.set_message("too big");
  *summary.add_refusals() = file;
  auto* refusal = summary.mutable_path_refusal();
  refusal->set_path("x");
  refusal->set_reason("IgnoreShadowsManagedPath");
  refusal->set_issue_count(3);
  auto* issue = refusal->add_issues();
  issue->set_kind("ignore-shadows-managed");
  issue->set_text(
      "ignore-shadows-managed: x/.gittargetignore hides x/demo/configmaps/a.yaml, which "
      "reverser writes");
  json status = TargetStatus(Target("t", "x", ""), TargetValidation(), EncryptionCheck{}, &table,
                             &summary, absl::UnixEpoch());
  const std::string message =
      "Git path refused at x: ignore-shadows-managed: x/.gittargetignore hides "
      "x/demo/configmaps/a.yaml, which reverser writes (and 2 more issue(s))";
  EXPECT_EQ(ConditionField(status, "GitPathAccepted", "status"), "False");
  EXPECT_EQ(ConditionField(status, "GitPathAccepted", "reason"), "IgnoreShadowsManagedPath");
  EXPECT_EQ(ConditionField(status, "GitPathAccepted", "message"), message);
  EXPECT_EQ(ConditionField(status, "Stalled", "status"), "True");
  EXPECT_EQ(ConditionField(status, "Stalled", "reason"), "IgnoreShadowsManagedPath");
  EXPECT_EQ(ConditionField(status, "Ready", "status"), "False");
  EXPECT_EQ(ConditionField(status, "Ready", "message"), message);
  EXPECT_EQ(ConditionField(status, "Reconciling", "status"), "False");
  // An unknown reason is rendered as UnsupportedContent.
  refusal->set_reason("SomethingNew");
  json other = TargetStatus(Target("t", "x", ""), TargetValidation(), EncryptionCheck{}, &table,
                            &summary, absl::UnixEpoch());
  EXPECT_EQ(ConditionField(other, "GitPathAccepted", "reason"), "UnsupportedContent");
  // Accepted again: the refused file is what is left.
  summary.clear_path_refusal();
  json accepted = TargetStatus(Target("t", "x", ""), TargetValidation(), EncryptionCheck{}, &table,
                               &summary, absl::UnixEpoch());
  EXPECT_EQ(ConditionField(accepted, "GitPathAccepted", "message"),
            "Git path refused at x/big.yaml: too big");
}

TEST(ControllersTest, BlockedStreamsAndEncryptionComeBeforeRefusals) {
  rules::WatchedTypeTable table;
  table.types[{"", "v1", "configmaps"}] = {};
  reverser::v1::StreamSummary summary = AllReady();
  summary.set_total(2);
  summary.set_blocked(1);
  summary.set_reason("WatchNotPermitted");
  summary.set_refused_objects(1);
  *summary.add_refusals() = ObjectRefusal("ConfigMap", "demo", "x", "cause");
  json status = TargetStatus(Target("t", "x", ""), TargetValidation(), EncryptionCheck{}, &table,
                             &summary, absl::UnixEpoch());
  EXPECT_EQ(ConditionField(status, "Ready", "reason"), "WatchNotPermitted");
  // While a stream replays, a refusal already stalls the target (it will not heal by itself).
  summary.set_blocked(0);
  summary.set_replaying(1);
  summary.set_reason("Replaying");
  json replaying = TargetStatus(Target("t", "x", ""), TargetValidation(), EncryptionCheck{}, &table,
                                &summary, absl::UnixEpoch());
  EXPECT_EQ(ConditionField(replaying, "Ready", "reason"), "ObjectRefused");
  EXPECT_EQ(ConditionField(replaying, "StreamsRunning", "status"), "False");
}

TEST(ControllersTest, TargetStreamsShowTheSplicersRollUpAndTheLastPush) {
  rules::WatchedTypeTable table;
  table.types[{"", "v1", "configmaps"}] = {};
  reverser::v1::StreamSummary summary;
  summary.set_total(2);
  summary.set_ready(1);
  summary.set_blocked(1);
  summary.set_reason("WatchNotPermitted");
  summary.set_message("1/2 streams running; 1 blocked (configmaps)");
  summary.mutable_last_push_time()->set_seconds(1'700'000'000);
  json t = Target("t", "x", "");
  json status =
      TargetStatus(t, TargetValidation(), EncryptionCheck{}, &table, &summary, absl::UnixEpoch());
  EXPECT_EQ(ConditionField(status, "StreamsRunning", "reason"), "WatchNotPermitted");
  EXPECT_EQ(ConditionField(status, "StreamsRunning", "message"),
            "1/2 streams running; 1 blocked (configmaps)");
  EXPECT_EQ(ConditionField(status, "Stalled", "reason"), "WatchNotPermitted");
  EXPECT_EQ(ConditionField(status, "Stalled", "message"),
            "1/2 streams running; 1 blocked (configmaps)");
  EXPECT_EQ(status["lastPushTime"], "2023-11-14T22:13:20Z");
  // A report of an older push never moves the time shown back.
  t["status"]["lastPushTime"] = "2024-01-01T00:00:00Z";
  EXPECT_EQ(TargetStatus(t, TargetValidation(), EncryptionCheck{}, &table, &summary,
                         absl::UnixEpoch())["lastPushTime"],
            "2024-01-01T00:00:00Z");
  // No push seen by the splicer: the field is left as it is.
  summary.clear_last_push_time();
  EXPECT_FALSE(
      TargetStatus(t, TargetValidation(), EncryptionCheck{}, &table, &summary, absl::UnixEpoch())
          .contains("lastPushTime"));
  // No type resolved: the reference's words.
  rules::WatchedTypeTable empty;
  json none =
      TargetStatus(t, TargetValidation(), EncryptionCheck{}, &empty, nullptr, absl::UnixEpoch());
  EXPECT_EQ(ConditionField(none, "StreamsRunning", "reason"), "NoResolvedTypes");
  EXPECT_EQ(ConditionField(none, "StreamsRunning", "message"),
            "0/0 streams running; no resolved resource types");
}

reverser::v1::StreamReadiness RuleStream(const std::string& resource,
                                         reverser::v1::StreamState state,
                                         const std::string& reason) {
  reverser::v1::StreamReadiness s;
  s.mutable_claim()->mutable_type()->mutable_gvr()->set_version("v1");
  s.mutable_claim()->mutable_type()->mutable_gvr()->set_resource(resource);
  s.mutable_claim()->mutable_scope()->set_cluster(true);
  s.set_state(state);
  s.set_reason(reason);
  return s;
}

json RuleObject() {
  return {{"kind", "ClusterWatchRule"},
          {"metadata", {{"name", "r"}, {"generation", 1}}},
          {"spec", {{"targetRef", {{"name", "t"}, {"namespace", "a"}}}}}};
}

json TargetWithReady(const std::string& status, const std::string& reason, bool stalled) {
  json t = Target("t", "x", "");
  t["status"]["conditions"] = RenderConditions(Trio(status == "True" ? Outcome::kReady
                                                    : stalled        ? Outcome::kStalled
                                                                     : Outcome::kPending,
                                                    reason, "target says " + reason),
                                               json(), 1, absl::UnixEpoch());
  return t;
}

// GitTargetReady mirrors the target's Ready as the reference's does; the rule's own streams
// give StreamsRunning and status.streams; the trio follows (stalled, blocked, pending, ready).
TEST(ControllersTest, RuleStatusMirrorsItsTargetAndRollsUpItsOwnStreams) {
  json ready_target = TargetWithReady("True", "Ready", false);
  RuleContext context;
  context.target_namespace = "a";
  context.target_name = "t";
  context.target = &ready_target;
  context.streams = std::vector<reverser::v1::StreamReadiness>{
      RuleStream("configmaps", reverser::v1::STREAM_STATE_STREAMING, "AllStreamsReady")};
  context.streams_observed = absl::FromUnixSeconds(1'700'000'000);
  json status = RuleStatus(RuleObject(), context, absl::UnixEpoch());
  EXPECT_EQ(ConditionField(status, "GitTargetReady", "status"), "True");
  EXPECT_EQ(ConditionField(status, "GitTargetReady", "reason"), "OK");
  EXPECT_EQ(ConditionField(status, "GitTargetReady", "message"), "GitTarget a/t is ready");
  EXPECT_EQ(ConditionField(status, "StreamsRunning", "status"), "True");
  EXPECT_EQ(ConditionField(status, "StreamsRunning", "message"), "1/1 streams running");
  EXPECT_EQ(ConditionField(status, "Ready", "status"), "True");
  EXPECT_EQ(ConditionField(status, "Ready", "message"),
            "ClusterWatchRule is ready and monitoring resources via GitTarget 'a/t'");
  EXPECT_EQ(status["streams"], json({{"summary", "1/1"},
                                     {"total", 1},
                                     {"ready", 1},
                                     {"replaying", 0},
                                     {"blocked", 0},
                                     {"pendingSample", json::array()},
                                     {"observedTime", "2023-11-14T22:13:20Z"}}));

  // A forbidden stream of the rule's: Stalled with WatchNotPermitted, blocked types first.
  context.streams->push_back(
      RuleStream("secrets", reverser::v1::STREAM_STATE_REPLAYING, "InitialReplay"));
  context.streams->push_back(
      RuleStream("services", reverser::v1::STREAM_STATE_BLOCKED, "WatchNotPermitted"));
  json blocked = RuleStatus(RuleObject(), context, absl::UnixEpoch());
  EXPECT_EQ(ConditionField(blocked, "StreamsRunning", "status"), "False");
  EXPECT_EQ(ConditionField(blocked, "StreamsRunning", "reason"), "WatchNotPermitted");
  EXPECT_EQ(ConditionField(blocked, "StreamsRunning", "message"),
            "1/3 streams running; 2 blocked (services)");
  EXPECT_EQ(ConditionField(blocked, "Stalled", "status"), "True");
  EXPECT_EQ(ConditionField(blocked, "Stalled", "reason"), "WatchNotPermitted");
  EXPECT_EQ(blocked["streams"]["pendingSample"], json({"services", "secrets"}));
  EXPECT_EQ(blocked["streams"]["blocked"], 1);
  EXPECT_EQ(blocked["streams"]["replaying"], 1);

  // Replaying only: reconciling with the roll-up's reason.
  context.streams->pop_back();
  json replaying = RuleStatus(RuleObject(), context, absl::UnixEpoch());
  EXPECT_EQ(ConditionField(replaying, "Reconciling", "status"), "True");
  EXPECT_EQ(ConditionField(replaying, "Ready", "reason"), "Replaying");
  EXPECT_EQ(ConditionField(replaying, "Ready", "message"),
            "1/2 streams running; 1 replaying (secrets)");

  // The target stalls: so does the rule, with the target's reason.
  json stalled_target = TargetWithReady("False", "EncryptionNotConfigured", true);
  context.target = &stalled_target;
  json stalled = RuleStatus(RuleObject(), context, absl::UnixEpoch());
  EXPECT_EQ(ConditionField(stalled, "GitTargetReady", "status"), "False");
  EXPECT_EQ(ConditionField(stalled, "GitTargetReady", "reason"), "EncryptionNotConfigured");
  EXPECT_EQ(ConditionField(stalled, "Stalled", "reason"), "EncryptionNotConfigured");

  // The target is still replaying: the rule waits for it.
  json pending_target = TargetWithReady("False", "InitialReplay", false);
  context.target = &pending_target;
  context.streams = std::vector<reverser::v1::StreamReadiness>{
      RuleStream("configmaps", reverser::v1::STREAM_STATE_STREAMING, "AllStreamsReady")};
  json waiting = RuleStatus(RuleObject(), context, absl::UnixEpoch());
  EXPECT_EQ(ConditionField(waiting, "GitTargetReady", "reason"), "InitialReplay");
  EXPECT_EQ(ConditionField(waiting, "Reconciling", "status"), "True");
  EXPECT_EQ(ConditionField(waiting, "Ready", "reason"), "InitialReplay");

  // A target without any condition yet; a status computed now takes precedence over it.
  json bare = Target("t", "x", "");
  context.target = &bare;
  EXPECT_EQ(ConditionField(RuleStatus(RuleObject(), context, absl::UnixEpoch()), "GitTargetReady",
                           "status"),
            "Unknown");
  json computed = TargetWithReady("True", "Ready", false)["status"];
  context.target_status = &computed;
  EXPECT_EQ(ConditionField(RuleStatus(RuleObject(), context, absl::UnixEpoch()), "GitTargetReady",
                           "status"),
            "True");

  // No target at all: stalled, streams not evaluated, no status.streams.
  RuleContext orphan;
  orphan.target_namespace = "a";
  orphan.target_name = "gone";
  json missing = RuleStatus(RuleObject(), orphan, absl::UnixEpoch());
  EXPECT_EQ(ConditionField(missing, "GitTargetReady", "reason"), "GitTargetNotFound");
  EXPECT_EQ(ConditionField(missing, "Stalled", "reason"), "GitTargetNotFound");
  EXPECT_EQ(ConditionField(missing, "StreamsRunning", "status"), "Unknown");
  EXPECT_FALSE(missing.contains("streams"));
}

}  // namespace
}  // namespace reverser::catalog
