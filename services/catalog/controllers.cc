#include "services/catalog/controllers.h"

#include <fnmatch.h>

#include <algorithm>
#include <set>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "libs/commitmeta/messages.h"
#include "libs/core/refusal_text.h"
#include "libs/gotemplate/template.h"
#include "libs/rules/stream_readiness.h"
#include "libs/sops/age.h"
#include "services/catalog/objects.h"

namespace reverser::catalog {
namespace {

nlohmann::json WithConditions(const nlohmann::json& object, const std::vector<Condition>& conds,
                              absl::Time now) {
  int64_t generation = GenerationOf(object);
  nlohmann::json status = nlohmann::json::object();
  status["observedGeneration"] = generation;
  status["conditions"] =
      RenderConditions(conds, NodeAt(object, {"status", "conditions"}), generation, now);
  return status;
}

std::vector<std::string> StringList(const nlohmann::json& node) {
  std::vector<std::string> out;
  if (!node.is_array()) return out;
  for (const auto& item : node) {
    if (item.is_string()) out.push_back(item.get<std::string>());
  }
  return out;
}

// Causes in status messages are cut: the gitworker's messages can be long (and quote names).
constexpr size_t kMaxCauseBytes = 300;

}  // namespace

std::string RefusedFilesMessage(const reverser::v1::StreamSummary& summary) {
  if (summary.refused_files() == 0) return "";
  for (const auto& refusal : summary.refusals()) {
    if (refusal.file().empty()) continue;
    std::string message =
        absl::StrCat("Git path refused at ", core::EscapeAndAbbreviate(refusal.file(), 1024), ": ",
                     core::EscapeAndAbbreviate(refusal.message(), kMaxCauseBytes));
    if (summary.refused_files() > 1) {
      absl::StrAppend(&message, " (and ", summary.refused_files() - 1, " more issue(s))");
    }
    return message;
  }
  return absl::StrCat(summary.refused_files(), " file(s) under the path refused");
}

std::string PathRefusalMessage(const reverser::v1::StreamSummary& summary) {
  if (!summary.has_path_refusal() || summary.path_refusal().issue_count() == 0) return "";
  const reverser::v1::PathRefusal& refusal = summary.path_refusal();
  if (refusal.issues().empty()) return core::EscapeAndAbbreviate(refusal.message(), 2048);
  const std::string& path = refusal.path();
  std::string message = absl::StrCat(
      "Git path refused at ", path.empty() ? "/" : core::EscapeAndAbbreviate(path, 1024), ": ",
      core::EscapeAndAbbreviate(refusal.issues(0).text(), 1024));
  if (refusal.issue_count() > 1) {
    absl::StrAppend(&message, " (and ", refusal.issue_count() - 1, " more issue(s))");
  }
  return message;
}

std::string PathRefusalReason(const reverser::v1::StreamSummary& summary) {
  const std::string& reason = summary.path_refusal().reason();
  if (reason == reason::kIgnoreShadowsManagedPath || reason == reason::kWriteBoundaryRefused) {
    return reason;
  }
  return reason::kUnsupportedContent;
}

std::string RefusedObjectsMessage(const reverser::v1::StreamSummary& summary) {
  if (summary.refused_objects() == 0) return "";
  std::vector<std::string> parts;
  for (const auto& refusal : summary.refusals()) {
    if (!refusal.file().empty()) continue;
    parts.push_back(absl::StrCat(core::RefusedSubjectText(refusal), ": ",
                                 core::RefusalReasonName(refusal.reason()), ": ",
                                 core::EscapeAndAbbreviate(refusal.message(), kMaxCauseBytes)));
  }
  std::string message = absl::StrCat(summary.refused_objects(), " object(s) refused");
  if (!parts.empty()) absl::StrAppend(&message, ": ", absl::StrJoin(parts, "; "));
  if (summary.refused_objects() > parts.size()) {
    absl::StrAppend(&message, " (and ", summary.refused_objects() - parts.size(), " more)");
  }
  return message;
}

std::optional<std::string> CheckCommitConfig(const nlohmann::json& provider) {
  const nlohmann::json& window = NodeAt(provider, {"spec", "push", "commitWindow"});
  if (window.is_string()) {
    absl::Duration d;
    if (!absl::ParseDuration(window.get<std::string>(), &d) || d < absl::ZeroDuration()) {
      return absl::StrCat("spec.push.commitWindow: \"", window.get<std::string>(),
                          "\" is not a non-negative duration");
    }
  }
  const nlohmann::json& message = NodeAt(provider, {"spec", "commit", "message"});
  for (const char* field : {"eventTemplate", "groupTemplate", "reconcileTemplate"}) {
    const nlohmann::json& text = NodeAt(message, {field});
    if (!text.is_string() || text.get<std::string>().empty()) continue;
    auto parsed = gotemplate::Template::Parse(field, text.get<std::string>());
    if (!parsed.ok()) {
      return absl::StrCat("spec.commit.message.", field, ": ", parsed.status().message());
    }
  }
  const nlohmann::json& signing = NodeAt(provider, {"spec", "commit", "signing"});
  if (signing.is_object() && StringAt(signing, {"secretRef", "name"}).empty()) {
    return std::string("spec.commit.signing.secretRef.name must be set when signing is enabled");
  }
  return std::nullopt;
}

nlohmann::json ProviderStatus(const nlohmann::json& provider, const ProviderProbe* probe,
                              absl::Time now) {
  std::vector<Condition> conds;
  // null removes the field (merge patch); absent leaves it as it is while a probe is pending.
  std::optional<nlohmann::json> signing_public_key;
  if (auto invalid = CheckCommitConfig(provider)) {
    conds = Trio(Outcome::kStalled, reason::kCommitConfigInvalid, *invalid);
    signing_public_key = nullptr;
  } else if (probe == nullptr) {
    conds = Trio(Outcome::kPending, reason::kChecking, "checking credentials and remote");
  } else {
    conds = probe->ok ? Trio(Outcome::kReady, reason::kReady, probe->message)
                      : Trio(Outcome::kStalled, probe->reason, probe->message);
    signing_public_key = probe->signing_public_key.has_value()
                             ? nlohmann::json(*probe->signing_public_key)
                             : nlohmann::json(nullptr);
  }
  nlohmann::json status = WithConditions(provider, conds, now);
  if (signing_public_key.has_value()) status["signingPublicKey"] = *signing_public_key;
  return status;
}

absl::StatusOr<std::string> NormalizeTargetPath(absl::string_view path) {
  if (path.empty()) return absl::InvalidArgumentError("spec.path must not be empty");
  if (path.front() == '/') {
    return absl::InvalidArgumentError(
        absl::StrCat("spec.path \"", path, "\" must be relative to the repository root"));
  }
  std::string normalized(path);
  while (normalized.size() > 1 && normalized.back() == '/') normalized.pop_back();
  for (absl::string_view segment : absl::StrSplit(normalized, '/')) {
    if (segment == "..") {
      return absl::InvalidArgumentError(
          absl::StrCat("spec.path \"", path, "\" must not contain \"..\""));
    }
    if (segment.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("spec.path \"", path, "\" contains an empty segment"));
    }
  }
  return normalized;
}

bool PathsOverlap(const std::string& a, const std::string& b) {
  if (a == "." || b == "." || a == b) return true;
  auto nested = [](const std::string& outer, const std::string& inner) {
    return inner.size() > outer.size() && inner.compare(0, outer.size(), outer) == 0 &&
           inner[outer.size()] == '/';
  };
  return nested(a, b) || nested(b, a);
}

bool BranchAllowed(const nlohmann::json& provider, const std::string& branch) {
  for (const std::string& pattern : StringList(NodeAt(provider, {"spec", "allowedBranches"}))) {
    if (::fnmatch(pattern.c_str(), branch.c_str(), FNM_PATHNAME) == 0) return true;
  }
  return false;
}

TargetValidation ValidateTarget(const nlohmann::json& target, const nlohmann::json* provider,
                                const std::vector<const nlohmann::json*>& others) {
  const std::string ns = StringAt(target, {"metadata", "namespace"});
  const std::string provider_name = StringAt(target, {"spec", "providerRef", "name"});
  const std::string branch = StringAt(target, {"spec", "branch"});
  if (provider == nullptr) {
    return {false, reason::kProviderNotFound,
            absl::StrCat("GitProvider ", ns, "/", provider_name, " not found")};
  }
  if (!BranchAllowed(*provider, branch)) {
    return {
        false, reason::kBranchNotAllowed,
        absl::StrCat(
            "branch \"", branch, "\" does not match any allowedBranches of GitProvider ", ns, "/",
            provider_name, " (",
            absl::StrJoin(StringList(NodeAt(*provider, {"spec", "allowedBranches"})), ", "), ")")};
  }
  auto path = NormalizeTargetPath(StringAt(target, {"spec", "path"}));
  if (!path.ok()) return {false, reason::kInvalidPath, std::string(path.status().message())};

  // Later-created loses; ties broken by namespace/name (RFC 3339 UTC strings sort by time).
  auto order = [](const nlohmann::json& t) {
    return std::make_tuple(StringAt(t, {"metadata", "creationTimestamp"}),
                           StringAt(t, {"metadata", "namespace"}),
                           StringAt(t, {"metadata", "name"}));
  };
  for (const nlohmann::json* other : others) {
    if (StringAt(*other, {"metadata", "namespace"}) != ns ||
        StringAt(*other, {"spec", "providerRef", "name"}) != provider_name ||
        StringAt(*other, {"spec", "branch"}) != branch) {
      continue;
    }
    auto other_path = NormalizeTargetPath(StringAt(*other, {"spec", "path"}));
    if (!other_path.ok() || !PathsOverlap(*path, *other_path)) continue;
    if (order(*other) < order(target)) {
      return {false, reason::kTargetConflict,
              absl::StrCat("path \"", *path, "\" overlaps GitTarget ", ns, "/",
                           StringAt(*other, {"metadata", "name"}), " (path \"", *other_path,
                           "\") on the same provider and branch; the earlier target keeps it")};
    }
  }
  return {true, reason::kValidated, "provider, branch and path are valid"};
}

std::string EncryptionSpecKey(const nlohmann::json& target) {
  return NodeAt(target, {"spec", "encryption"}).dump();
}

EncryptionCheck CheckEncryption(const nlohmann::json& target,
                                const EncryptionSecretResult* secret) {
  EncryptionCheck out;
  auto invalid = [&out](std::string message) {
    out.ok = false;
    out.reason = reason::kInvalidConfig;
    out.message = std::move(message);
    return out;
  };
  const nlohmann::json& encryption = NodeAt(target, {"spec", "encryption"});
  const nlohmann::json& age = NodeAt(encryption, {"age"});
  auto flag = [](const nlohmann::json& node, const char* key) {
    const nlohmann::json& value = NodeAt(node, {key});
    return value.is_boolean() && value.get<bool>();
  };
  std::string provider(absl::StripAsciiWhitespace(StringAt(encryption, {"provider"})));
  if ((!provider.empty() && provider != "sops") || !flag(age, "enabled")) {
    out.reason = reason::kNotRequired;
    out.message = "SOPS age encryption is not enabled for this GitTarget";
    return out;
  }
  out.required = true;
  const nlohmann::json& recipients = NodeAt(age, {"recipients"});
  const bool extract = flag(recipients, "extractFromSecret");
  const bool generate = flag(recipients, "generateWhenMissing");
  const std::string secret_name(
      absl::StripAsciiWhitespace(StringAt(encryption, {"secretRef", "name"})));
  if (generate && !extract) {
    return invalid(
        "encryption.age.recipients.generateWhenMissing=true requires extractFromSecret=true");
  }
  if (generate && secret_name.empty()) {
    return invalid("encryption.secretRef.name must be set when encryption is configured");
  }
  std::set<std::string> resolved;
  const std::vector<std::string> public_keys = StringList(NodeAt(recipients, {"publicKeys"}));
  for (size_t i = 0; i < public_keys.size(); ++i) {
    absl::string_view key = absl::StripAsciiWhitespace(public_keys[i]);
    if (key.empty()) continue;
    auto recipient = sops::age::X25519Recipient::Parse(key);
    if (!recipient.ok()) {
      return invalid(absl::StrCat("invalid age recipient in age.recipients.publicKeys[", i,
                                  "]: ", recipient.status().message()));
    }
    resolved.insert(recipient->String());
  }
  if (extract) {
    std::string kind(absl::StripAsciiWhitespace(StringAt(encryption, {"secretRef", "kind"})));
    if (!kind.empty() && kind != "Secret") {
      return invalid(absl::StrCat("encryption.secretRef.kind must be Secret, got \"", kind, "\""));
    }
    if (secret_name.empty()) {
      return invalid(
          "encryption.secretRef.name must be set when age.recipients.extractFromSecret=true");
    }
    const std::string ns = StringAt(target, {"metadata", "namespace"});
    out.secret = EncryptionSecretRef{ns, secret_name, generate};
    if (secret == nullptr) {
      out.ok = false;
      out.pending = true;
      out.reason = reason::kNotChecked;
      out.message = absl::StrCat("reading encryption secret ", ns, "/", secret_name);
      return out;
    }
    if (!secret->ok) {
      out.ok = false;
      out.reason = secret->reason;
      out.message = secret->message;
      return out;
    }
    resolved.insert(secret->recipients.begin(), secret->recipients.end());
  }
  if (resolved.empty()) {
    return invalid(
        "encryption.age.enabled=true requires at least one resolved recipient from "
        "age.recipients.publicKeys or secret *.agekey entries");
  }
  out.recipients.assign(resolved.begin(), resolved.end());
  out.reason = reason::kEncryptionOk;
  out.message = "Encryption configuration is valid";
  return out;
}

nlohmann::json TargetStatus(const nlohmann::json& target, const TargetValidation& validation,
                            const EncryptionCheck& encryption, const rules::WatchedTypeTable* table,
                            const reverser::v1::StreamSummary* summary, absl::Time now) {
  std::vector<Condition> conds;
  if (!validation.ok) {
    conds = Trio(Outcome::kStalled, reason::kValidationFailed, validation.message);
    conds.push_back({"Validated", kFalse, validation.reason, validation.message});
    conds.push_back({"EncryptionConfigured", kUnknown, reason::kBlocked, "validation failed"});
    conds.push_back({"StreamsRunning", kUnknown, reason::kBlocked, "validation failed"});
    conds.push_back({"GitPathAccepted", kUnknown, reason::kBlocked, "validation failed"});
    return WithConditions(target, conds, now);
  }
  Condition validated{"Validated", kTrue, validation.reason, validation.message};
  Condition enc{"EncryptionConfigured",
                encryption.ok        ? kTrue
                : encryption.pending ? kUnknown
                                     : kFalse,
                encryption.reason, encryption.message};
  if (!encryption.ok) {
    // Nothing is mirrored until encryption is configured (no table): streams are blocked.
    conds = encryption.pending
                ? Trio(Outcome::kPending, reason::kNotChecked, encryption.message)
                : Trio(Outcome::kStalled, reason::kEncryptionNotConfigured, encryption.message);
    conds.push_back(validated);
    conds.push_back(enc);
    conds.push_back({"StreamsRunning", kUnknown, reason::kBlocked, "encryption not configured"});
    conds.push_back({"GitPathAccepted", kUnknown, reason::kBlocked, "encryption not configured"});
    return WithConditions(target, conds, now);
  }

  // Streams: what the splicer reported (rolled up per type, libs/rules/stream_readiness.h),
  // else what the table implies.
  uint32_t total = 0, ready = 0, replaying = 0, blocked = 0;
  Condition streams{"StreamsRunning", kFalse, reason::kInitialReplay,
                    "waiting for the splicer to report stream readiness"};
  if (table != nullptr && table->types.empty()) {
    streams = {"StreamsRunning", kFalse, reason::kNoResolvedTypes, rules::kNoResolvedTypesMessage};
  } else if (summary != nullptr) {
    total = summary->total();
    ready = summary->ready();
    replaying = summary->replaying();
    blocked = summary->blocked();
    bool all_ready = total > 0 && ready == total;
    std::string why = summary->reason().empty()
                          ? std::string(all_ready ? reason::kAllStreamsReady : "Replaying")
                          : summary->reason();
    std::string msg = summary->message().empty()
                          ? absl::StrCat(ready, "/", total, " streams running")
                          : summary->message();
    streams = {"StreamsRunning", all_ready ? kTrue : kFalse, why, msg};
  }

  // What the gitworker refuses (rolled up by the splicer).
  const std::string refused_files = summary != nullptr ? RefusedFilesMessage(*summary) : "";
  const std::string refused_objects = summary != nullptr ? RefusedObjectsMessage(*summary) : "";
  const std::string refused_path = summary != nullptr ? PathRefusalMessage(*summary) : "";
  Condition path{"GitPathAccepted", kTrue, reason::kGitPathAccepted,
                 "every file under the path is readable"};
  if (!refused_path.empty()) {
    // The acceptance gate refuses every write: it says more than any one refused file.
    path = {"GitPathAccepted", kFalse, PathRefusalReason(*summary), refused_path};
  } else if (!refused_files.empty()) {
    path = {"GitPathAccepted", kFalse, reason::kUnsupportedContent, refused_files};
  } else if (summary == nullptr) {
    path = {"GitPathAccepted", kUnknown, reason::kInitialReplay,
            "waiting for the splicer to report the gitworker's refusals"};
  }

  if (blocked > 0) {
    conds = Trio(Outcome::kStalled, streams.reason, streams.message);
  } else if (!refused_path.empty()) {
    conds = Trio(Outcome::kStalled, path.reason, refused_path);
  } else if (!refused_files.empty()) {
    conds = Trio(Outcome::kStalled, reason::kUnsupportedContent, refused_files);
  } else if (!refused_objects.empty()) {
    conds = Trio(Outcome::kStalled, reason::kObjectRefused, refused_objects);
  } else if (streams.status == kTrue) {
    conds = Trio(Outcome::kReady, reason::kReady, streams.message);
  } else {
    conds = Trio(Outcome::kPending, streams.reason, streams.message);
  }
  conds.push_back(validated);
  conds.push_back(enc);
  conds.push_back(streams);
  conds.push_back(path);
  nlohmann::json status = WithConditions(target, conds, now);
  nlohmann::json s = {{"summary", absl::StrCat(ready, "/", total)},
                      {"total", total},
                      {"ready", ready},
                      {"replaying", replaying},
                      {"blocked", blocked}};
  if (summary != nullptr && summary->has_observed_time()) {
    s["observedTime"] = FormatKubeTime(absl::FromUnixSeconds(summary->observed_time().seconds()));
  }
  status["streams"] = s;
  // The latest push the splicer saw acked; never moved back by an older report.
  if (summary != nullptr && summary->has_last_push_time()) {
    absl::Time pushed = absl::FromUnixSeconds(summary->last_push_time().seconds());
    std::optional<absl::Time> shown = ParseKubeTime(StringAt(target, {"status", "lastPushTime"}));
    status["lastPushTime"] = FormatKubeTime(shown && *shown > pushed ? *shown : pushed);
  }
  return status;
}

namespace {

// GitTargetReady as the reference's: the target's Ready mirrored; `stalled` when the target is
// missing or stalled (which stalls the rule).
Condition GitTargetReadyOf(const RuleContext& context, bool* stalled) {
  *stalled = false;
  const std::string name = absl::StrCat(context.target_namespace, "/", context.target_name);
  if (context.target == nullptr) {
    *stalled = true;
    return {"GitTargetReady", kFalse, reason::kGitTargetNotFound,
            absl::StrCat("Referenced GitTarget ", name, " not found")};
  }
  const nlohmann::json& conditions = context.target_status != nullptr
                                         ? NodeAt(*context.target_status, {"conditions"})
                                         : NodeAt(*context.target, {"status", "conditions"});
  auto value = [](const nlohmann::json* c, const char* field, const std::string& fallback) {
    std::string v = c->value(field, "");
    return v.empty() ? fallback : v;
  };
  const nlohmann::json* ready = FindCondition(conditions, "Ready");
  const nlohmann::json* stalled_condition = FindCondition(conditions, "Stalled");
  const nlohmann::json* reconciling = FindCondition(conditions, "Reconciling");
  if (ready != nullptr && ready->value("status", "") == kTrue) {
    return {"GitTargetReady", kTrue, reason::kGitTargetReadyOk,
            absl::StrCat("GitTarget ", name, " is ready")};
  }
  if (ready != nullptr && stalled_condition != nullptr &&
      stalled_condition->value("status", "") == kTrue) {
    *stalled = true;
    return {"GitTargetReady", kFalse, value(stalled_condition, "reason", "Stalled"),
            value(stalled_condition, "message", "GitTarget is stalled")};
  }
  if (ready != nullptr) {
    return {"GitTargetReady", kFalse, value(ready, "reason", reason::kProgressing),
            value(ready, "message", "GitTarget is not ready yet")};
  }
  if (reconciling != nullptr && reconciling->value("status", "") == kTrue) {
    return {"GitTargetReady", kFalse, value(reconciling, "reason", reason::kProgressing),
            value(reconciling, "message", "GitTarget is reconciling")};
  }
  return {"GitTargetReady", kUnknown, reason::kProgressing,
          absl::StrCat("Waiting for GitTarget ", name, " to publish Ready")};
}

}  // namespace

nlohmann::json RuleStatus(const nlohmann::json& rule, const RuleContext& context, absl::Time now) {
  std::vector<Condition> conds;
  if (context.parse_error) {
    conds = Trio(Outcome::kStalled, reason::kInvalidRule, *context.parse_error);
    conds.push_back({"ResourcesResolved", kFalse, reason::kInvalidRule, *context.parse_error});
    return WithConditions(rule, conds, now);
  }
  bool target_stalled = false;
  Condition target_ready = GitTargetReadyOf(context, &target_stalled);
  Condition resolved{"ResourcesResolved", kTrue, reason::kResolved,
                     "every named resource resolved to a followable type"};
  if (!context.unresolved.empty()) {
    std::vector<std::string> parts;
    for (const auto& u : context.unresolved) {
      parts.push_back(absl::StrCat("rules[", u.rule_index, "] ", u.resource, ": ", u.message));
    }
    resolved = {"ResourcesResolved", kFalse, reason::kUnresolvedResources,
                absl::StrJoin(parts, "; ")};
  }
  // Streams: the rule's own (type, namespace) selections, each in the state of the splice
  // stream that serves it; none while the target has no table (missing or not validated).
  std::optional<rules::StreamRollup> rollup;
  Condition streams{"StreamsRunning", kUnknown, reason::kBlocked,
                    "GitTarget has no watched-type table; streams not evaluated"};
  if (context.streams) {
    rollup = rules::RollUpStreams(*context.streams);
    streams = {"StreamsRunning", rollup->running() ? kTrue : kFalse, rollup->reason,
               rollup->message};
  }

  const std::string kind = rule.value("kind", "");
  if (target_stalled) {
    conds = Trio(Outcome::kStalled, target_ready.reason, target_ready.message);
  } else if (rollup && rollup->blocked > 0) {
    conds = Trio(Outcome::kStalled, rollup->reason, rollup->message);
  } else if (resolved.status != kTrue) {
    // A CRD may still be installed: keep reconciling rather than stalling.
    conds = Trio(Outcome::kPending, resolved.reason, resolved.message);
  } else if (target_ready.status != kTrue) {
    conds = Trio(Outcome::kPending, target_ready.reason, target_ready.message);
  } else if (streams.status == kTrue) {
    conds = Trio(Outcome::kReady, reason::kReady,
                 absl::StrCat(kind.empty() ? "Rule" : kind,
                              " is ready and monitoring resources via GitTarget '",
                              context.target_namespace, "/", context.target_name, "'"));
  } else {
    conds = Trio(Outcome::kPending, streams.reason, streams.message);
  }
  conds.push_back(resolved);
  conds.push_back(target_ready);
  conds.push_back(streams);
  nlohmann::json status = WithConditions(rule, conds, now);
  if (rollup) {
    nlohmann::json s = {{"summary", absl::StrCat(rollup->ready, "/", rollup->total)},
                        {"total", rollup->total},
                        {"ready", rollup->ready},
                        {"replaying", rollup->replaying},
                        {"blocked", rollup->blocked},
                        {"pendingSample", rollup->pending_sample}};
    if (context.streams_observed) s["observedTime"] = FormatKubeTime(*context.streams_observed);
    status["streams"] = std::move(s);
  }
  return status;
}

}  // namespace reverser::catalog
