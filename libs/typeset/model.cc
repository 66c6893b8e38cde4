#include "libs/typeset/model.h"

#include <algorithm>

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

Followability Evaluate(const FunnelInput& in) {
  if (in.facts == nullptr) return CatalogUnavailable();
  const CatalogEntry& f = *in.facts;
  Followability out;
  auto& checks = out.checks;

  if (f.subresource_only) {
    checks.push_back(
        Fail(requirement::kServed, reason::kSubresourceOnly,
             absl::StrCat("served only as subresources: ", absl::StrJoin(f.subresources, ", "))));
  } else if (!in.present) {
    checks.push_back(Fail(requirement::kServed, reason::kNotServed, "not served by discovery"));
  } else {
    checks.push_back(Pass(requirement::kServed));
  }

  checks.push_back(in.trusted
                       ? Pass(requirement::kTrusted)
                       : Fail(requirement::kTrusted, reason::kDiscoveryDegraded,
                              absl::StrCat("discovery failed for ",
                                           GroupVersion{f.gvr.group, f.gvr.version}.ToString())));

  checks.push_back(in.absence_expired ? Fail(requirement::kStable, reason::kAbsenceExpired,
                                             "absent from discovery beyond the removal grace")
                                      : Pass(requirement::kStable));

  if (f.conflicting_listings) {
    checks.push_back(Fail(requirement::kIdentity, reason::kGvrNotUnique,
                          absl::StrCat("resource ", f.gvr.ToString(),
                                       " is listed with more than one kind or scope")));
  } else if (!f.kind_shared_with.empty()) {
    checks.push_back(Fail(requirement::kIdentity, reason::kGvkNotUnique,
                          absl::StrCat("kind ", f.gvk.ToString(), " is also served as ",
                                       absl::StrJoin(f.kind_shared_with, ", "))));
  } else if (f.gvk.kind.empty()) {
    checks.push_back(Fail(requirement::kIdentity, reason::kGvkNotUnique, "no kind listed"));
  } else {
    checks.push_back(Pass(requirement::kIdentity));
  }

  checks.push_back(f.scope.has_value()
                       ? Pass(requirement::kScope, std::string(core::ScopeName(*f.scope)))
                       : Fail(requirement::kScope, reason::kScopeUnknown, "scope unknown"));

  std::vector<std::string> missing;
  for (absl::string_view verb : kRequiredVerbs) {
    if (!std::binary_search(f.verbs.begin(), f.verbs.end(), std::string(verb))) {
      missing.emplace_back(verb);
    }
  }
  checks.push_back(missing.empty() ? Pass(requirement::kVerbs)
                                   : Fail(requirement::kVerbs, reason::kMissingVerb,
                                          absl::StrCat("missing required verb: ",
                                                       absl::StrJoin(missing, ", "))));

  checks.push_back(f.origin != Origin::kUnknown
                       ? Pass(requirement::kOrigin, std::string(OriginName(f.origin)))
                       : Fail(requirement::kOrigin, reason::kOriginUnknown,
                              "origin unknown (not built-in, no CRD or APIService evidence)"));

  checks.push_back(in.excluded_by_policy ? Fail(requirement::kPolicy, reason::kDeniedByPolicy,
                                                std::string(WatchPolicy::kExclusionDetail))
                                         : Pass(requirement::kPolicy));

  checks.push_back(in.sensitive && !in.sensitive_supported
                       ? Fail(requirement::kSensitivity, reason::kSensitiveUnsupported,
                              "sensitive resource and encryption is unsupported")
                       : Pass(requirement::kSensitivity, in.sensitive ? "sensitive" : ""));

  // Reverser mirrors objects through their main resource only; scale is never used.
  checks.push_back(Pass(requirement::kScale, "skipped: scale unused"));

  bool any_failed = false;
  bool only_transient = true;
  const FollowCheck* first_permanent = nullptr;
  for (const FollowCheck& c : checks) {
    if (c.passed) continue;
    any_failed = true;
    if (!IsTransient(c)) {
      only_transient = false;
      if (first_permanent == nullptr) first_permanent = &c;
    }
  }
  if (!any_failed) {
    out.verdict = Verdict::kFollowable;
    out.summary = "followable";
  } else if (only_transient) {
    out.verdict = Verdict::kRetained;
    out.summary = absl::StrCat("retained — ", out.FirstFailure()->detail);
  } else {
    out.verdict = Verdict::kRefused;
    out.summary = absl::StrCat("not followable — ", first_permanent->detail);
  }
  return out;
}

Followability CatalogUnavailable() {
  Followability out;
  out.verdict = Verdict::kUnknown;
  out.summary = "unknown — catalog unavailable";
  out.checks.push_back(
      Fail(requirement::kTrusted, reason::kCatalogUnavailable, "catalog unavailable"));
  return out;
}

}  // namespace reverser::typeset
