#pragma once

// Operators' bearer tokens reviewed by the API server, as kube-rbac-proxy does: a TokenReview
// says who the token belongs to, a SubjectAccessReview whether that user may `get` or `update`
// the virtual resource `reverser/admin` (group configbutler.ai) named by the service. Decisions
// are cached briefly per (token digest, service, verb), so a burst of reverserctl calls asks the
// API server once; failures to reach it are not cached. The service's own identity needs
// `create` on tokenreviews and subjectaccessreviews (ClusterRole system:auth-delegator).

#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "libs/kube/rest_client.h"
#include "libs/runtime/admin_review.h"

namespace reverser::kube {

struct AccessReviewOptions {
  absl::Duration allowed_ttl = absl::Seconds(10);  // how long an allowed call stays allowed
  absl::Duration denied_ttl = absl::Seconds(2);    // and a refused one refused
  size_t max_cached = 10'000;                      // decisions kept; the cache empties when full
  std::function<absl::Time()> now = [] { return absl::Now(); };
};

class KubeAccessReviewer final : public runtime::AdminReviewer {
 public:
  KubeAccessReviewer(std::shared_ptr<RestClient> client, AccessReviewOptions options = {});

  absl::StatusOr<std::string> Review(absl::string_view bearer_token,
                                     const runtime::OperatorCall& call) override;

  // API server round trips made (TokenReview + SubjectAccessReview count one each).
  int64_t reviews_requested() const;

 private:
  struct Decision {
    absl::Status status;
    std::string user;
    absl::Time expires;
  };
  absl::StatusOr<std::string> Ask(absl::string_view bearer_token,
                                  const runtime::OperatorCall& call);

  const std::shared_ptr<RestClient> client_;
  const AccessReviewOptions options_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, Decision> cache_ ABSL_GUARDED_BY(mu_);
  int64_t reviews_requested_ ABSL_GUARDED_BY(mu_) = 0;
};

// A reviewer over the API server that `kubeconfig_path` names (empty: $KUBECONFIG, then the
// in-cluster config, as LoadDefaultConfig). FailedPrecondition when there is none.
absl::StatusOr<std::shared_ptr<runtime::AdminReviewer>> NewAccessReviewer(
    const std::string& kubeconfig_path, const std::string& user_agent);

}  // namespace reverser::kube
