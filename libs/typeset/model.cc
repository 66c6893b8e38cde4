#include "libs/typeset/model.h"

#include <algorithm>
#include <functional>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "libs/typeset/policy.h"

namespace reverser::typeset {
namespace {

FollowCheck Pass(absl::string_view requirement, std::string detail = "") {
  return {std::string(requirement), true, "", std::move(detail)};
}

FollowCheck Fail(absl::string_view requirement, absl::string_view reason, std::string detail) {
  return {std::string(requirement), false, std::string(reason), std::move(detail)};
}

// Failures that only say "discovery cannot vouch for this type right now".
bool IsTransient(const FollowCheck& check) {
  return !check.passed &&
         (check.reason == reason::kNotServed || check.reason == reason::kDiscoveryDegraded);
}

}  // namespace

absl::string_view VerdictName(Verdict verdict) {
  switch (verdict) {
    case Verdict::kFollowable:
      return "followable";
    case Verdict::kRetained:
      return "retained";
    case Verdict::kRefused:
      return "refused";
    case Verdict::kUnknown:
      break;
  }
  return "unknown";
}

const FollowCheck* Followability::FirstFailure() const {
  for (const FollowCheck& c : checks) {
    if (!c.passed) return &c;
  }
  return nullptr;
}

// The human phrase of a failed check, as summaries render it.
std::string Phrase(const FollowCheck& c) {
  static const auto* phrases = new std::map<std::string, std::string, std::less<>>{
      {std::string(reason::kNotServed), "not served"},
      {std::string(reason::kSubresourceOnly), "served only as a subresource"},
      {std::string(reason::kDiscoveryDegraded), "discovery degraded for its group/version"},
      {std::string(reason::kCatalogUnavailable), "API catalog unavailable"},
      {std::string(reason::kAbsenceExpired), "no longer served (removal grace elapsed)"},
      {std::string(reason::kGvkNotUnique), "GVK served by more than one resource"},
      {std::string(reason::kGvrNotUnique), "resource resolves to more than one kind"},
      {std::string(reason::kScopeUnknown), "scope unknown"},
      {std::string(reason::kMissingVerb), "missing required verb"},
      {std::string(reason::kOriginUnknown), "origin could not be classified"},
      {std::string(reason::kDeniedByPolicy), "denied by policy"},
      {std::string(reason::kSensitiveUnsupported),
       "sensitive type without supported write handling"},
      {std::string(reason::kScalePathUnresolved), "scale parent replica path unresolved"},
  };
  // A policy names its own refusal; identity and verb failures append their bounded detail.
  if (c.reason == reason::kDeniedByPolicy && !c.detail.empty()) return c.detail;
  auto it = phrases->find(c.reason);
  if (it == phrases->end()) return c.reason;
  bool append = c.reason == reason::kGvkNotUnique || c.reason == reason::kGvrNotUnique ||
                c.reason == reason::kMissingVerb;
  return append && !c.detail.empty() ? absl::StrCat(it->second, ": ", c.detail) : it->second;
}

Followability Evaluate(const FunnelInput& in) {
  if (in.facts == nullptr) return CatalogUnavailable();
  const CatalogEntry& f = *in.facts;
  Followability out;
  auto& checks = out.checks;

  if (f.subresource_only) {
    checks.push_back(
        Fail(requirement::kServed, reason::kSubresourceOnly, absl::StrJoin(f.subresources, ", ")));
  } else if (!in.present) {
    checks.push_back(Fail(requirement::kServed, reason::kNotServed, ""));
  } else {
    checks.push_back(Pass(requirement::kServed));
  }

  checks.push_back(in.trusted ? Pass(requirement::kTrusted)
                              : Fail(requirement::kTrusted, reason::kDiscoveryDegraded,
                                     GroupVersion{f.gvr.group, f.gvr.version}.ToString()));

  checks.push_back(in.absence_expired ? Fail(requirement::kStable, reason::kAbsenceExpired, "")
                                      : Pass(requirement::kStable));

  if (!f.kind_shared_with.empty()) {
    std::vector<std::string> all = f.kind_shared_with;
    all.push_back(f.gvr.resource);
    std::sort(all.begin(), all.end());
    checks.push_back(Fail(requirement::kIdentity, reason::kGvkNotUnique, absl::StrJoin(all, ", ")));
  } else if (f.conflicting_listings || f.gvk.kind.empty()) {
    checks.push_back(Fail(requirement::kIdentity, reason::kGvrNotUnique,
                          f.gvk.kind.empty() ? "no kind" : "listed with conflicting facts"));
  } else {
    checks.push_back(Pass(requirement::kIdentity));
  }

  checks.push_back(f.scope.has_value()
                       ? Pass(requirement::kScope, std::string(core::ScopeName(*f.scope)))
                       : Fail(requirement::kScope, reason::kScopeUnknown, ""));

  std::vector<std::string> missing;
  for (absl::string_view verb : kRequiredVerbs) {
    if (!std::binary_search(f.verbs.begin(), f.verbs.end(), std::string(verb))) {
      missing.emplace_back(verb);
    }
  }
  checks.push_back(missing.empty() ? Pass(requirement::kVerbs)
                                   : Fail(requirement::kVerbs, reason::kMissingVerb,
                                          absl::StrJoin(missing, ", ")));

  checks.push_back(f.origin != Origin::kUnknown
                       ? Pass(requirement::kOrigin, std::string(OriginName(f.origin)))
                       : Fail(requirement::kOrigin, reason::kOriginUnknown, ""));

  checks.push_back(in.excluded_by_policy ? Fail(requirement::kPolicy, reason::kDeniedByPolicy,
                                                std::string(WatchPolicy::kExclusionDetail))
                                         : Pass(requirement::kPolicy));

  checks.push_back(in.sensitive && !in.sensitive_supported
                       ? Fail(requirement::kSensitivity, reason::kSensitiveUnsupported, "")
                       : Pass(requirement::kSensitivity, in.sensitive ? "sensitive" : ""));

  // Reverser mirrors objects through their main resource only; scale is never used.
  checks.push_back(Pass(requirement::kScale, "skipped: scale unused"));

  const FollowCheck* first_permanent = nullptr;
  for (const FollowCheck& c : checks) {
    if (!c.passed && !IsTransient(c)) {
      first_permanent = &c;
      break;
    }
  }
  const FollowCheck* first = out.FirstFailure();
  if (first == nullptr) {
    out.verdict = Verdict::kFollowable;
    out.summary = "followable";
  } else if (first_permanent == nullptr) {
    out.verdict = Verdict::kRetained;
    out.summary = absl::StrCat("retained — ", Phrase(*first));
  } else {
    // The summary names the check that makes the refusal permanent.
    out.verdict = Verdict::kRefused;
    out.summary = absl::StrCat("not followable — ", Phrase(*first_permanent));
  }
  return out;
}

Followability CatalogUnavailable() {
  Followability out;
  out.verdict = Verdict::kUnknown;
  out.checks.push_back(Fail(requirement::kTrusted, reason::kCatalogUnavailable, ""));
  out.summary = absl::StrCat("not followable — ", Phrase(out.checks.back()));
  return out;
}

}  // namespace reverser::typeset
