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

}  // namespace reverser::typeset
