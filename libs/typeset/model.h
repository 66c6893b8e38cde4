#pragma once

// Followability: whether reverser may follow a served type, decided by an ordered funnel of
// requirement checks, each failing with a stable kebab-case reason code.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "libs/core/types.h"
#include "libs/typeset/catalog.h"

namespace reverser::typeset {

enum class Verdict {
  kUnknown,     // the catalog is unavailable
  kFollowable,  // every check passed
  kRetained,    // only served/trusted fail, inside the removal grace or over failed discovery
  kRefused,     // a permanent check failed
};

absl::string_view VerdictName(Verdict verdict);  // "followable", "retained", ...

// Requirement names, in funnel order.
namespace requirement {
inline constexpr absl::string_view kServed = "served";
inline constexpr absl::string_view kTrusted = "trusted";
inline constexpr absl::string_view kStable = "stable";
inline constexpr absl::string_view kIdentity = "identity";
inline constexpr absl::string_view kScope = "scope";
inline constexpr absl::string_view kVerbs = "verbs";
inline constexpr absl::string_view kOrigin = "origin";
inline constexpr absl::string_view kPolicy = "policy";
inline constexpr absl::string_view kSensitivity = "sensitivity";
inline constexpr absl::string_view kScale = "scale";
}  // namespace requirement

// Stable reason codes (part of the operator-facing contract: keep them unchanged).
namespace reason {
inline constexpr absl::string_view kNotServed = "not-served";
inline constexpr absl::string_view kSubresourceOnly = "subresource-only";
inline constexpr absl::string_view kDiscoveryDegraded = "discovery-degraded";
inline constexpr absl::string_view kCatalogUnavailable = "catalog-unavailable";
inline constexpr absl::string_view kAbsenceExpired = "absence-expired";
inline constexpr absl::string_view kGvkNotUnique = "gvk-not-unique";
inline constexpr absl::string_view kGvrNotUnique = "gvr-not-unique";
inline constexpr absl::string_view kScopeUnknown = "scope-unknown";
inline constexpr absl::string_view kMissingVerb = "missing-verb";
inline constexpr absl::string_view kOriginUnknown = "origin-unknown";
inline constexpr absl::string_view kDeniedByPolicy = "denied-by-policy";
inline constexpr absl::string_view kSensitiveUnsupported = "sensitive-unsupported";
inline constexpr absl::string_view kScalePathUnresolved = "scale-path-unresolved";
}  // namespace reason

// The verbs reverser needs: list+watch to mirror, get+patch for reads and status writes.
inline constexpr absl::string_view kRequiredVerbs[] = {"get", "list", "watch", "patch"};

struct FollowCheck {
  std::string requirement;
  bool passed = true;
  std::string reason;  // empty when passed
  // Bounded detail: the missing verbs ("watch, patch"), the resources sharing a kind, the
  // failed group/version, the policy's refusal text.
  std::string detail;
  bool operator==(const FollowCheck&) const = default;
};

struct Followability {
  Verdict verdict = Verdict::kUnknown;
  // "followable", "retained — not served", "not followable — missing required verb: watch,
  // patch", "not followable — API catalog unavailable" (verdict unknown).
  std::string summary;
  std::vector<FollowCheck> checks;  // every requirement, in funnel order
  bool operator==(const Followability&) const = default;

  // The first failing check, if any.
  const FollowCheck* FirstFailure() const;
};

// What the funnel judges: the last-known facts plus the registry's view of their freshness.
struct FunnelInput {
  const CatalogEntry* facts = nullptr;
  bool present = true;  // listed by the latest scan of its group/version
  bool trusted = true;  // its group/version's discovery succeeded
  bool absence_expired = false;
  bool excluded_by_policy = false;
  bool sensitive = false;
  bool sensitive_supported = true;
};

Followability Evaluate(const FunnelInput& input);

// The verdict for a type the registry cannot judge because no scan has arrived.
Followability CatalogUnavailable();

// A served type as the registry knows it.
struct TypeRecord {
  core::GroupVersionKind gvk;
  core::GroupVersionResource gvr;
  std::optional<core::Scope> scope;
  Origin origin = Origin::kUnknown;
  bool preferred = false;
  std::vector<std::string> verbs;
  std::vector<std::string> subresources;
  bool sensitive = false;
  bool trusted = true;
  Followability followability;
  // The current followable streak has lasted the settle window (TypeActivated was sent). A
  // wobble ends the streak; the recovery starts a new one.
  bool activated = false;
  // Has settled once since it last became live, and is still live (followable or retained).
  // Tables follow settled types, so a wobble never churns a plan; refusal or removal resets it.
  bool settled = false;
  std::optional<absl::Time> absent_since;
  uint64_t generation = 0;  // registry revision of the record's last change

  Verdict verdict() const { return followability.verdict; }
  // Followable or retained: still treated as live.
  bool Followable() const {
    return verdict() == Verdict::kFollowable || verdict() == Verdict::kRetained;
  }
};

}  // namespace reverser::typeset
