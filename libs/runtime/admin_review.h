#pragma once

// The Kubernetes review of an operator's call: the bearer token `reverserctl` sends (its
// kubeconfig user's) is checked by a TokenReview and the user authorized by a
// SubjectAccessReview on a virtual resource, so cluster RBAC decides who administers reverser
// (docs/security.md). The interface lives here, beside the call policy that asks it; the
// implementation talks to the API server (libs/kube/access_review.h).

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace reverser::runtime {

// The virtual resource an operator's call is authorized on: `get` (look) or `update` (rescan,
// compact, resplice) on `reverser/admin` in API group `configbutler.ai`, named by the service.
inline constexpr char kAdminReviewGroup[] = "configbutler.ai";
inline constexpr char kAdminReviewResource[] = "reverser";
inline constexpr char kAdminReviewSubresource[] = "admin";

struct OperatorCall {
  std::string service;  // "catalog", "materializer", "splicer", "gitworker": the resource name
  std::string method;   // "/reverser.v1.SplicerAdmin/Resplice", for logs
  std::string verb;     // "get" or "update"
};

class AdminReviewer {
 public:
  virtual ~AdminReviewer() = default;
  // The name of the user the token belongs to when that user may make `call`. Unauthenticated:
  // the token is not valid; PermissionDenied: RBAC does not allow the call (the message says
  // what to grant); Unavailable: the API server could not answer. Thread-safe; may block.
  virtual absl::StatusOr<std::string> Review(absl::string_view bearer_token,
                                             const OperatorCall& call) = 0;
};

}  // namespace reverser::runtime
