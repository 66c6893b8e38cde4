#include "services/catalog/controllers.h"

#include <fnmatch.h>

#include <algorithm>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "libs/commitmeta/messages.h"
#include "libs/gotemplate/template.h"
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

}  // namespace

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
    return {false, reason::kBranchNotAllowed,
            absl::StrCat("branch \"", branch, "\" does not match any allowedBranches of GitProvider ",
                         ns, "/", provider_name, " (",
                         absl::StrJoin(StringList(NodeAt(*provider, {"spec", "allowedBranches"})),
                                       ", "),
                         ")")};
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

EncryptionCheck CheckEncryption(const nlohmann::json& target) {
  EncryptionCheck out;
  const nlohmann::json& age = NodeAt(target, {"spec", "encryption", "age"});
  const nlohmann::json& enabled = NodeAt(age, {"enabled"});
  if (!enabled.is_boolean() || !enabled.get<bool>()) {
    out.reason = reason::kNotRequired;
    out.message = "no encryption configured";
    return out;
  }
  out.required = true;
  out.recipients = StringList(NodeAt(age, {"recipients", "publicKeys"}));
  const nlohmann::json& extract = NodeAt(age, {"recipients", "extractFromSecret"});
  const nlohmann::json& generate = NodeAt(age, {"recipients", "generateWhenMissing"});
  bool uses_secret = (extract.is_boolean() && extract.get<bool>()) ||
                     (generate.is_boolean() && generate.get<bool>());
  if (uses_secret) {
    out.ok = false;
    out.reason = reason::kInvalidConfig;
    out.message =
        "recipients.extractFromSecret and recipients.generateWhenMissing are not supported yet; "
        "list the age recipients in spec.encryption.age.recipients.publicKeys";
    return out;
  }
  for (const std::string& r : out.recipients) {
    if (r.rfind("age1", 0) != 0) {
      out.ok = false;
      out.reason = reason::kInvalidConfig;
      out.message = absl::StrCat("\"", r, "\" is not an age recipient (age1...)");
      return out;
    }
  }
  if (out.recipients.empty()) {
    out.ok = false;
    out.reason = reason::kInvalidConfig;
    out.message = "age encryption is enabled but no recipient is configured";
    return out;
  }
  out.reason = reason::kEncryptionOk;
  out.message = absl::StrCat(out.recipients.size(), " age recipient(s)");
  return out;
}

nlohmann::json TargetStatus(const nlohmann::json& target, const TargetValidation& validation,
                            const rules::WatchedTypeTable* table,
                            const reverser::v1::StreamSummary* summary, absl::Time now) {
  std::vector<Condition> conds;
  if (!validation.ok) {
    conds = Trio(Outcome::kStalled, reason::kValidationFailed, validation.message);
    conds.push_back({"Validated", kFalse, validation.reason, validation.message});
    conds.push_back({"EncryptionConfigured", kUnknown, reason::kBlocked, "validation failed"});
    conds.push_back({"StreamsRunning", kUnknown, reason::kBlocked, "validation failed"});
    return WithConditions(target, conds, now);
  }
  EncryptionCheck encryption = CheckEncryption(target);
  Condition validated{"Validated", kTrue, validation.reason, validation.message};
  Condition enc{"EncryptionConfigured", encryption.ok ? kTrue : kFalse, encryption.reason,
                encryption.message};

  // Streams: what the splicer reported, else what the table implies.
  uint32_t total = 0, ready = 0, replaying = 0, blocked = 0;
  Condition streams{"StreamsRunning", kFalse, reason::kInitialReplay,
                    "waiting for the splicer to report stream readiness"};
  if (table != nullptr && table->types.empty()) {
    streams = {"StreamsRunning", kFalse, reason::kNoResolvedTypes,
               "no WatchRule selects a followable type for this target"};
  } else if (summary != nullptr) {
    total = summary->total();
    ready = summary->ready();
    replaying = summary->replaying();
    blocked = summary->blocked();
    bool all_ready = total > 0 && ready == total;
    std::string msg = absl::StrCat(ready, "/", total, " streams ready");
    if (replaying > 0) absl::StrAppend(&msg, ", ", replaying, " replaying");
    if (blocked > 0) absl::StrAppend(&msg, ", ", blocked, " blocked");
    if (summary->pending_sample_size() > 0) {
      absl::StrAppend(&msg, " (pending: ", absl::StrJoin(summary->pending_sample(), ", "), ")");
    }
    std::string why = summary->reason().empty()
                          ? std::string(all_ready ? reason::kAllStreamsReady : "Replaying")
                          : summary->reason();
    streams = {"StreamsRunning", all_ready ? kTrue : kFalse, why, msg};
  }

  if (!encryption.ok) {
    conds = Trio(Outcome::kStalled, reason::kEncryptionNotConfigured, encryption.message);
  } else if (streams.status == kTrue) {
    conds = Trio(Outcome::kReady, reason::kReady, streams.message);
  } else if (blocked > 0) {
    conds = Trio(Outcome::kStalled, streams.reason, streams.message);
  } else {
    conds = Trio(Outcome::kPending, streams.reason, streams.message);
  }
  conds.push_back(validated);
  conds.push_back(enc);
  conds.push_back(streams);
  nlohmann::json status = WithConditions(target, conds, now);
  nlohmann::json s = {{"summary", absl::StrCat(ready, "/", total)},
                      {"total", total},
                      {"ready", ready},
                      {"replaying", replaying},
                      {"blocked", blocked}};
  if (summary != nullptr && summary->has_observed_time()) {
    s["observedTime"] =
        FormatKubeTime(absl::FromUnixSeconds(summary->observed_time().seconds()));
  }
  status["streams"] = s;
  return status;
}

nlohmann::json RuleStatus(const nlohmann::json& rule, const RuleContext& context,
                          absl::Time now) {
  std::vector<Condition> conds;
  if (context.parse_error) {
    conds = Trio(Outcome::kStalled, reason::kInvalidRule, *context.parse_error);
    conds.push_back({"ResourcesResolved", kFalse, reason::kInvalidRule, *context.parse_error});
    return WithConditions(rule, conds, now);
  }
  Condition target_ready{"GitTargetReady", kTrue, reason::kReady, "GitTarget is valid"};
  if (context.target == nullptr) {
    target_ready = {"GitTargetReady", kFalse, reason::kGitTargetNotFound, "GitTarget not found"};
  } else if (context.target_validation != nullptr && !context.target_validation->ok) {
    target_ready = {"GitTargetReady", kFalse, reason::kGitDestinationInvalid,
                    absl::StrCat("GitTarget is not valid: ", context.target_validation->message)};
  }
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
  if (target_ready.status != kTrue) {
    conds = Trio(Outcome::kStalled, target_ready.reason, target_ready.message);
  } else if (resolved.status != kTrue) {
    // A CRD may still be installed: keep reconciling rather than stalling.
    conds = Trio(Outcome::kPending, resolved.reason, resolved.message);
  } else {
    conds = Trio(Outcome::kReady, reason::kReady, "rule resolved and GitTarget valid");
  }
  conds.push_back(resolved);
  conds.push_back(target_ready);
  return WithConditions(rule, conds, now);
}

}  // namespace reverser::catalog
