#pragma once

// The status the catalog writes for its CRDs, as pure functions of the objects it watches (and
// of what the blocking probes and the splicers reported). The catalog actor calls these after
// every change and writes the result through the status subresource when it differs.

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "libs/rules/table.h"
#include "proto/reverser/v1/catalog.pb.h"
#include "services/catalog/conditions.h"

namespace reverser::catalog {

// GitProvider reasons (docs/behaviour.md, Status conditions).
namespace reason {
inline constexpr char kReady[] = "Ready";
inline constexpr char kChecking[] = "Checking";
inline constexpr char kSecretNotFound[] = "SecretNotFound";
inline constexpr char kSecretMalformed[] = "SecretMalformed";
inline constexpr char kConnectionFailed[] = "ConnectionFailed";
inline constexpr char kCommitConfigInvalid[] = "CommitConfigInvalid";
// GitTarget.
inline constexpr char kValidated[] = "OK";
inline constexpr char kProviderNotFound[] = "ProviderNotFound";
inline constexpr char kBranchNotAllowed[] = "BranchNotAllowed";
inline constexpr char kInvalidPath[] = "InvalidPath";
inline constexpr char kTargetConflict[] = "TargetConflict";
inline constexpr char kValidationFailed[] = "ValidationFailed";
inline constexpr char kBlocked[] = "Blocked";
inline constexpr char kNotRequired[] = "NotRequired";
inline constexpr char kEncryptionOk[] = "OK";
inline constexpr char kInvalidConfig[] = "InvalidConfig";
inline constexpr char kMissingSecret[] = "MissingSecret";
// Declared by the reference for EncryptionConfigured but never set by its v1alpha3 controller
// (generateWhenMissing=false never creates anything); kept for completeness.
inline constexpr char kSecretCreateDisabled[] = "SecretCreateDisabled";
// The encryption Secret has not been read yet (EncryptionConfigured=Unknown).
inline constexpr char kNotChecked[] = "NotChecked";
inline constexpr char kEncryptionNotConfigured[] = "EncryptionNotConfigured";
inline constexpr char kInitialReplay[] = "InitialReplay";
inline constexpr char kNoResolvedTypes[] = "NoResolvedTypes";
inline constexpr char kAllStreamsReady[] = "AllStreamsReady";
// GitPathAccepted (reference §2A.15); the catalog sets UnsupportedContent for files the
// gitworker refuses to read, and the acceptance gate's reason when it refuses the path.
inline constexpr char kGitPathAccepted[] = "GitPathAccepted";
inline constexpr char kUnsupportedContent[] = "UnsupportedContent";
inline constexpr char kIgnoreShadowsManagedPath[] = "IgnoreShadowsManagedPath";
inline constexpr char kWriteBoundaryRefused[] = "WriteBoundaryRefused";
// Not a reference reason: objects the gitworker can never write (Ready=False, Stalled=True).
inline constexpr char kObjectRefused[] = "ObjectRefused";
// WatchRule / ClusterWatchRule.
inline constexpr char kGitTargetReadyOk[] = "OK";  // GitTargetReady=True (the reference's)
inline constexpr char kProgressing[] = "Progressing";
inline constexpr char kResolved[] = "Resolved";
inline constexpr char kUnresolvedResources[] = "UnresolvedResources";
inline constexpr char kGitTargetNotFound[] = "GitTargetNotFound";
inline constexpr char kGitDestinationInvalid[] = "GitDestinationInvalid";
// Not a reference reason: a rule the parser rejects (the CRD schema normally prevents it).
inline constexpr char kInvalidRule[] = "InvalidRule";
}  // namespace reason

// The outcome of the blocking GitProvider checks (credentials Secret, remote reachability).
struct ProviderProbe {
  std::string uid;
  int64_t generation = 0;
  bool ok = true;
  std::string reason;  // SecretNotFound, SecretMalformed, ConnectionFailed when !ok
  std::string message;
  absl::Time at;
  // status.signingPublicKey: the signing key's authorized_keys line; nullopt clears it
  // (signing not configured, or its key unusable).
  std::optional<std::string> signing_public_key;
};

// The spec checks that need no I/O: commit window duration, commit templates and the signing
// Secret's name. Returns the CommitConfigInvalid message, or nullopt.
std::optional<std::string> CheckCommitConfig(const nlohmann::json& provider);

// Status of a GitProvider. `probe` is null while the checks are pending.
nlohmann::json ProviderStatus(const nlohmann::json& provider, const ProviderProbe* probe,
                              absl::Time now);

// Validation of a GitTarget against its provider and the other targets (the Validated gate).
struct TargetValidation {
  bool ok = true;
  std::string reason;  // ProviderNotFound, BranchNotAllowed, InvalidPath, TargetConflict
  std::string message;
};

// "." for the repository root, otherwise the path without a trailing "/"; error for "",
// absolute paths and ".." segments.
absl::StatusOr<std::string> NormalizeTargetPath(absl::string_view path);
// Go filepath.Match semantics ('*' and '?' stop at '/').
bool BranchAllowed(const nlohmann::json& provider, const std::string& branch);
// Equal or nested paths ("." overlaps everything).
bool PathsOverlap(const std::string& a, const std::string& b);

// `provider`: the GitProvider the target names (null if absent). `others`: every other
// GitTarget, for the overlap rule (the later-created target loses; ties by namespace/name).
TargetValidation ValidateTarget(const nlohmann::json& target, const nlohmann::json* provider,
                                const std::vector<const nlohmann::json*>& others);

// The age key Secret a GitTarget's recipients come from (spec.encryption.secretRef, in the
// target's namespace) and whether a key may be generated into it.
struct EncryptionSecretRef {
  std::string namespace_;
  std::string name;
  bool generate_when_missing = false;
};

// What reading (with generateWhenMissing: creating or completing) the age key Secret gave. Only
// public recipients are kept; the Secret itself is not.
struct EncryptionSecretResult {
  std::string uid;   // of the GitTarget
  std::string spec;  // its spec.encryption as read (a spec change invalidates the result)
  bool ok = true;
  std::string reason;  // MissingSecret, InvalidConfig when !ok
  std::string message;
  std::vector<std::string> recipients;  // from the *.agekey entries, sorted
  absl::Time at;
};

// The key an EncryptionSecretResult is valid for: spec.encryption, serialized.
std::string EncryptionSpecKey(const nlohmann::json& target);

// The age recipients of a target's encryption config and whether it is usable (the
// EncryptionConfigured gate, reference order): not enabled -> NotRequired; generateWhenMissing
// without extractFromSecret, a missing secretRef.name, a publicKeys entry that is no age
// recipient, a secretRef.kind other than Secret, or no recipient at all -> InvalidConfig; the
// Secret unreadable -> MissingSecret (from `secret`). With extractFromSecret the Secret's
// recipients are added to publicKeys; `secret` null (not read yet) -> `pending`.
struct EncryptionCheck {
  bool required = false;
  bool ok = true;
  bool pending = false;  // waiting for the Secret to be read (then ok is false, but nothing failed)
  std::string reason;    // NotRequired, OK, InvalidConfig, MissingSecret, NotChecked
  std::string message;
  std::vector<std::string> recipients;        // normalized, deduplicated, sorted
  std::optional<EncryptionSecretRef> secret;  // the Secret to read, when one is needed
};
EncryptionCheck CheckEncryption(const nlohmann::json& target,
                                const EncryptionSecretResult* secret = nullptr);

// Status of a GitTarget. `table` is its watched-type table (null when it has none: invalid
// targets), `summary` what a splicer last reported (null if nothing yet). The summary's
// refusals become GitPathAccepted (refused files: False, UnsupportedContent, "Git path refused
// at <file>: <cause> (and N more issue(s))") and the trio (Stalled with UnsupportedContent for
// refused files, else ObjectRefused for refused objects: "N object(s) refused: Kind ns/name:
// Reason: cause; ..."). Order: validation, encryption, blocked streams, refused files, refused
// objects, replaying streams, ready.
// `status.lastPushTime` is the summary's last push (never moved back); lastReconcileTime is the
// caller's (CatalogState stamps it when it writes).
nlohmann::json TargetStatus(const nlohmann::json& target, const TargetValidation& validation,
                            const EncryptionCheck& encryption, const rules::WatchedTypeTable* table,
                            const reverser::v1::StreamSummary* summary, absl::Time now);

// The two refusal messages of a summary (bounded: at most the summary's samples, each cause
// cut): "" when nothing of that kind is refused.
std::string RefusedFilesMessage(const reverser::v1::StreamSummary& summary);
// The acceptance gate's refusal of the path ("" when it accepts it): "Git path refused at
// <path>: <first issue> (and N more issue(s))", the issue cut.
std::string PathRefusalMessage(const reverser::v1::StreamSummary& summary);
// Its GitPathAccepted reason (one of the gate's three; anything else is UnsupportedContent).
std::string PathRefusalReason(const reverser::v1::StreamSummary& summary);
std::string RefusedObjectsMessage(const reverser::v1::StreamSummary& summary);

// What a rule's status depends on besides the rule object itself.
struct RuleContext {
  std::optional<std::string> parse_error;  // the rule was rejected by the parser
  std::string target_namespace;            // the GitTarget it names
  std::string target_name;
  const nlohmann::json* target = nullptr;  // that GitTarget, if present
  // The status the catalog computes for that GitTarget now (else its status as served):
  // GitTargetReady mirrors its Ready, as the reference's does.
  const nlohmann::json* target_status = nullptr;
  std::vector<rules::UnresolvedResource> unresolved;  // entries of this rule only
  // One per (type, namespace) the rule selects, in the state of the splice stream serving it
  // (InitialReplay before a splicer reported it); nullopt while the target has no table.
  std::optional<std::vector<reverser::v1::StreamReadiness>> streams;
  std::optional<absl::Time> streams_observed;  // when the splicer's report was made
};

// Status of a WatchRule / ClusterWatchRule (docs/behaviour.md, WatchRule and ClusterWatchRule
// conditions): ResourcesResolved, GitTargetReady (the target's Ready mirrored: True/OK, else
// the target's Stalled or Ready reason; GitTargetNotFound), StreamsRunning with status.streams
// (the rule's own streams rolled up as the target's are), and the trio: Stalled when the target
// is missing or stalled or a stream is blocked; Reconciling while resources are unresolved, the
// target is not ready or streams replay; Ready when the target is ready and every stream runs.
nlohmann::json RuleStatus(const nlohmann::json& rule, const RuleContext& context, absl::Time now);

}  // namespace reverser::catalog
