#include "libs/kube/access_review.h"

#include <openssl/sha.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "libs/kube/config.h"
#include "libs/kube/httplib_transport.h"

namespace reverser::kube {
namespace {

const core::GroupVersionResource kTokenReviews{"authentication.k8s.io", "v1", "tokenreviews"};
const core::GroupVersionResource kSubjectAccessReviews{"authorization.k8s.io", "v1",
                                                       "subjectaccessreviews"};

// The cache never holds a token, only its digest.
std::string CacheKey(absl::string_view token, const runtime::OperatorCall& call) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(token.data()), token.size(), digest);
  return absl::StrCat(absl::string_view(reinterpret_cast<const char*>(digest), sizeof digest),
                      "\n", call.service, "\n", call.verb);
}

// A failure of the service's own request (its RBAC, the network) is not the operator's fault:
// it must not read as "your token is invalid".
absl::Status ReviewFailed(absl::string_view what, const absl::Status& status) {
  const std::string message =
      absl::StrCat("the API server did not answer this service's ", what, ": ", status.message(),
                   absl::IsPermissionDenied(status) || absl::IsUnauthenticated(status)
                       ? " (the service needs create on tokenreviews and subjectaccessreviews, "
                         "ClusterRole system:auth-delegator)"
                       : "");
  return absl::IsUnavailable(status) || absl::IsDeadlineExceeded(status)
             ? absl::UnavailableError(message)
             : absl::FailedPreconditionError(message);
}

// Readers that take any JSON the server sends (nlohmann's value() throws on a mismatch).
const nlohmann::json& ObjectAt(const nlohmann::json& object, const char* key) {
  static const nlohmann::json* empty = new nlohmann::json(nlohmann::json::object());
  if (!object.is_object()) return *empty;
  auto it = object.find(key);
  return it != object.end() && it->is_object() ? *it : *empty;
}

std::string StringAt(const nlohmann::json& object, const char* key) {
  if (!object.is_object()) return {};
  auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : std::string();
}

bool TrueAt(const nlohmann::json& object, const char* key) {
  if (!object.is_object()) return false;
  auto it = object.find(key);
  return it != object.end() && it->is_boolean() && it->get<bool>();
}

}  // namespace

KubeAccessReviewer::KubeAccessReviewer(std::shared_ptr<RestClient> client,
                                       AccessReviewOptions options)
    : client_(std::move(client)), options_(std::move(options)) {}

int64_t KubeAccessReviewer::reviews_requested() const {
  absl::MutexLock lock(&mu_);
  return reviews_requested_;
}

absl::StatusOr<std::string> KubeAccessReviewer::Review(absl::string_view bearer_token,
                                                       const runtime::OperatorCall& call) {
  const std::string key = CacheKey(bearer_token, call);
  {
    absl::MutexLock lock(&mu_);
    if (auto it = cache_.find(key); it != cache_.end()) {
      if (it->second.expires > options_.now()) {
        if (!it->second.status.ok()) return it->second.status;
        return it->second.user;
      }
      cache_.erase(it);
    }
  }
  absl::StatusOr<std::string> decided = Ask(bearer_token, call);
  const bool answered = decided.ok() || absl::IsUnauthenticated(decided.status()) ||
                        absl::IsPermissionDenied(decided.status());
  if (answered) {
    absl::MutexLock lock(&mu_);
    if (cache_.size() >= options_.max_cached) cache_.clear();
    cache_[key] = Decision{decided.status(), decided.ok() ? *decided : std::string(),
                           options_.now() + (decided.ok() ? options_.allowed_ttl
                                                          : options_.denied_ttl)};
  }
  return decided;
}

absl::StatusOr<std::string> KubeAccessReviewer::Ask(absl::string_view bearer_token,
                                                    const runtime::OperatorCall& call) {
  nlohmann::json token_review = {
      {"apiVersion", "authentication.k8s.io/v1"},
      {"kind", "TokenReview"},
      {"spec", {{"token", std::string(bearer_token)}}},
  };
  {
    absl::MutexLock lock(&mu_);
    ++reviews_requested_;
  }
  absl::StatusOr<nlohmann::json> reviewed = client_->Create(kTokenReviews, "", token_review);
  if (!reviewed.ok()) return ReviewFailed("TokenReview", reviewed.status());
  const nlohmann::json& status = ObjectAt(*reviewed, "status");
  if (!TrueAt(status, "authenticated")) {
    const std::string error = StringAt(status, "error");
    return absl::UnauthenticatedError(
        absl::StrCat("the bearer token is not valid for this cluster",
                     error.empty() ? "" : ": ", error));
  }
  const nlohmann::json& user = ObjectAt(status, "user");
  const std::string username = StringAt(user, "username");
  if (username.empty()) {
    return absl::UnauthenticatedError("the TokenReview named no user for the bearer token");
  }

  nlohmann::json spec = {
      {"user", username},
      {"resourceAttributes",
       {{"group", runtime::kAdminReviewGroup},
        {"resource", runtime::kAdminReviewResource},
        {"subresource", runtime::kAdminReviewSubresource},
        {"name", call.service},
        {"verb", call.verb}}},
  };
  if (std::string uid = StringAt(user, "uid"); !uid.empty()) spec["uid"] = uid;
  if (auto groups = user.find("groups"); groups != user.end() && groups->is_array()) {
    spec["groups"] = *groups;
  }
  if (auto extra = user.find("extra"); extra != user.end() && extra->is_object()) {
    spec["extra"] = *extra;
  }
  nlohmann::json access_review = {
      {"apiVersion", "authorization.k8s.io/v1"},
      {"kind", "SubjectAccessReview"},
      {"spec", spec},
  };
  {
    absl::MutexLock lock(&mu_);
    ++reviews_requested_;
  }
  absl::StatusOr<nlohmann::json> authorized =
      client_->Create(kSubjectAccessReviews, "", access_review);
  if (!authorized.ok()) return ReviewFailed("SubjectAccessReview", authorized.status());
  const nlohmann::json& verdict = ObjectAt(*authorized, "status");
  if (!TrueAt(verdict, "allowed")) {
    const std::string reason = StringAt(verdict, "reason");
    return absl::PermissionDeniedError(absl::StrCat(
        "user \"", username, "\" may not ", call.verb, " ", runtime::kAdminReviewResource, "/",
        runtime::kAdminReviewSubresource, " \"", call.service, "\" in API group ",
        runtime::kAdminReviewGroup, " (", call.method,
        "): grant it with a ClusterRole rule {apiGroups: [", runtime::kAdminReviewGroup,
        "], resources: [", runtime::kAdminReviewResource, "/", runtime::kAdminReviewSubresource,
        "], verbs: [", call.verb, "]}", reason.empty() ? "" : "; ", reason));
  }
  return username;
}

absl::StatusOr<std::shared_ptr<runtime::AdminReviewer>> NewAccessReviewer(
    const std::string& kubeconfig_path, const std::string& user_agent) {
  absl::StatusOr<ClusterConfig> config = LoadDefaultConfig(kubeconfig_path);
  if (!config.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--admin_auth=kubernetes reviews operators' tokens with the Kubernetes API, and there is "
        "no configuration for it (", config.status().message(),
        "): set --kubeconfig, or choose --admin_auth=certificate"));
  }
  absl::StatusOr<std::shared_ptr<RestClient>> client = NewHttplibRestClient(*config, user_agent);
  if (!client.ok()) return client.status();
  return std::shared_ptr<runtime::AdminReviewer>(std::make_shared<KubeAccessReviewer>(*client));
}

}  // namespace reverser::kube
