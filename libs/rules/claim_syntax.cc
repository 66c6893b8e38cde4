#include "libs/rules/claim_syntax.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "libs/core/proto_convert.h"

namespace reverser::rules {

absl::StatusOr<reverser::v1::Claim> ParseClaim(absl::string_view item) {
  item = absl::StripAsciiWhitespace(item);
  std::pair<absl::string_view, absl::string_view> type_ns = absl::StrSplit(item, '@');
  std::vector<absl::string_view> parts = absl::StrSplit(type_ns.first, '/');
  core::GroupVersionResource gvr;
  if (parts.size() == 2) {
    gvr = {"", std::string(parts[0]), std::string(parts[1])};
  } else if (parts.size() == 3) {
    gvr = {std::string(parts[0]), std::string(parts[1]), std::string(parts[2])};
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "claim \"", item, "\" is not group/version/resource or version/resource"));
  }
  if (gvr.version.empty() || gvr.resource.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("claim \"", item, "\" is incomplete"));
  }
  reverser::v1::Claim claim;
  *claim.mutable_type()->mutable_gvr() = core::ToProto(gvr);
  if (type_ns.second.empty()) {
    claim.mutable_scope()->set_cluster(true);
  } else {
    if (auto s = core::ValidateNamespaceName(type_ns.second); !s.ok()) return s;
    claim.mutable_scope()->set_namespace_(std::string(type_ns.second));
  }
  return claim;
}

absl::StatusOr<reverser::v1::ClaimSet> ParseStaticClaims(absl::string_view text) {
  reverser::v1::ClaimSet set;
  set.set_generation(1);
  for (absl::string_view item : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    auto claim = ParseClaim(item);
    if (!claim.ok()) return claim.status();
    *set.add_claims() = std::move(*claim);
  }
  return set;
}

std::string FormatClaim(const reverser::v1::Claim& claim) {
  core::GroupVersionResource gvr = core::FromProto(claim.type().gvr());
  std::string out = gvr.ToString();
  if (claim.scope().has_namespace_()) absl::StrAppend(&out, "@", claim.scope().namespace_());
  return out;
}

}  // namespace reverser::rules
