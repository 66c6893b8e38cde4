#include "libs/typeset/proto_convert.h"

#include "libs/core/proto_convert.h"

namespace reverser::typeset {

reverser::v1::FollowVerdict ToProto(Verdict verdict) {
  switch (verdict) {
    case Verdict::kFollowable:
      return reverser::v1::FOLLOW_VERDICT_FOLLOWABLE;
    case Verdict::kRetained:
      return reverser::v1::FOLLOW_VERDICT_RETAINED;
    case Verdict::kRefused:
      return reverser::v1::FOLLOW_VERDICT_REFUSED;
    case Verdict::kUnknown:
      return reverser::v1::FOLLOW_VERDICT_UNKNOWN;
  }
  return reverser::v1::FOLLOW_VERDICT_UNSPECIFIED;
}

reverser::v1::TypeIdentity IdentityToProto(const TypeRecord& record) {
  reverser::v1::TypeIdentity out;
  *out.mutable_gvk() = core::ToProto(record.gvk);
  *out.mutable_gvr() = core::ToProto(record.gvr);
  out.set_scope(record.scope ? core::ToProto(*record.scope)
                             : reverser::v1::RESOURCE_SCOPE_UNSPECIFIED);
  return out;
}

reverser::v1::TypeRecord ToProto(const TypeRecord& record) {
  reverser::v1::TypeRecord out;
  *out.mutable_identity() = IdentityToProto(record);
  out.set_origin(std::string(OriginName(record.origin)));
  out.set_preferred_version(record.preferred);
  for (const std::string& verb : record.verbs) out.add_verbs(verb);
  out.set_sensitive(record.sensitive);
  out.set_verdict(ToProto(record.verdict()));
  out.set_summary(record.followability.summary);
  for (const FollowCheck& check : record.followability.checks) {
    auto* c = out.add_checks();
    c->set_requirement(check.requirement);
    c->set_passed(check.passed);
    c->set_reason(check.reason);
    c->set_detail(check.detail);
  }
  out.set_generation(record.generation);
  return out;
}

Verdict FromProto(reverser::v1::FollowVerdict verdict) {
  switch (verdict) {
    case reverser::v1::FOLLOW_VERDICT_FOLLOWABLE:
      return Verdict::kFollowable;
    case reverser::v1::FOLLOW_VERDICT_RETAINED:
      return Verdict::kRetained;
    case reverser::v1::FOLLOW_VERDICT_REFUSED:
      return Verdict::kRefused;
    default:
      return Verdict::kUnknown;
  }
}

Origin OriginFromName(absl::string_view name) {
  if (name == "builtin") return Origin::kBuiltin;
  if (name == "crd") return Origin::kCrd;
  if (name == "aggregated") return Origin::kAggregated;
  return Origin::kUnknown;
}

TypeRecord FromProto(const reverser::v1::TypeRecord& record) {
  TypeRecord out;
  const auto& id = record.identity();
  out.gvk = core::FromProto(id.gvk());
  out.gvr = core::FromProto(id.gvr());
  if (id.scope() == reverser::v1::RESOURCE_SCOPE_NAMESPACED) out.scope = core::Scope::kNamespaced;
  if (id.scope() == reverser::v1::RESOURCE_SCOPE_CLUSTER) out.scope = core::Scope::kCluster;
  out.origin = OriginFromName(record.origin());
  out.preferred = record.preferred_version();
  out.verbs.assign(record.verbs().begin(), record.verbs().end());
  out.sensitive = record.sensitive();
  out.followability.verdict = FromProto(record.verdict());
  out.followability.summary = record.summary();
  for (const auto& check : record.checks()) {
    out.followability.checks.push_back(
        {check.requirement(), check.passed(), check.reason(), check.detail()});
  }
  out.trusted = true;
  for (const FollowCheck& c : out.followability.checks) {
    if (c.requirement == requirement::kTrusted && !c.passed) out.trusted = false;
  }
  out.generation = record.generation();
  return out;
}

}  // namespace reverser::typeset
