#pragma once

// Finding a GitTarget and one of its streams in a splicer's ListStreams answer by the names an
// operator types: `namespace/name` and `group/version/resource[@namespace]`. The splicer knows
// targets by uid, which operators do not.

#include <string>

#include "absl/status/statusor.h"
#include "proto/reverser/v1/splicer.pb.h"

namespace reverser::reverserctl {

// True for "namespace/name" (both parts non-empty, one slash).
bool IsTargetName(const std::string& text);

// The summary of the target `name`; NotFound ("follows no target a/b (targets: c/d, ...)").
absl::StatusOr<const reverser::v1::StreamSummary*> FindTarget(
    const reverser::v1::ListStreamsResponse& streams, const std::string& name);

// The claim of the one stream of `summary` that `type` names: same group/version/resource and,
// when `type` has "@namespace", the same scope. InvalidArgument: `type` is malformed or names
// several streams (add @namespace); NotFound: no such stream. A splicer that lists its streams
// without their claims gets the claim as typed (a namespaced stream then needs @namespace).
absl::StatusOr<reverser::v1::Claim> FindStream(const reverser::v1::StreamSummary& summary,
                                               const std::string& type);

}  // namespace reverser::reverserctl
