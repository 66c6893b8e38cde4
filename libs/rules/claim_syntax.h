#pragma once

// The text form of claims, shared by --static_claims and `reverserctl compact`:
// `group/version/resource[@namespace]`, core types as `version/resource` (`v1/configmaps`),
// no namespace = the whole cluster.

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/reverser/v1/catalog.pb.h"

namespace reverser::rules {

// Parses one claim.
absl::StatusOr<reverser::v1::Claim> ParseClaim(absl::string_view text);
// Parses a comma-separated list of claims (generation 1).
absl::StatusOr<reverser::v1::ClaimSet> ParseStaticClaims(absl::string_view text);
// The inverse of ParseClaim.
std::string FormatClaim(const reverser::v1::Claim& claim);

}  // namespace reverser::rules
