#include "libs/runtime/grpc_security.h"

#include <grpcpp/security/auth_metadata_processor.h>
#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_credentials_options.h>
#include <unistd.h>

#include <algorithm>
#include <set>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/strings/str_join.h"
#include "libs/runtime/admin_review.h"
#include "libs/runtime/call_policy.h"
#include "libs/runtime/log.h"
#include "libs/runtime/metrics.h"

ABSL_FLAG(std::string, grpc_tls_ca, "",
          "Mesh CA bundle (PEM): verifies every gRPC peer, server and client.");
ABSL_FLAG(std::string, grpc_tls_cert, "",
          "This process's certificate (PEM), named reverser-<role> (docs/security.md); re-read "
          "when the file changes.");
ABSL_FLAG(std::string, grpc_tls_key, "", "The key of --grpc_tls_cert (PEM).");
ABSL_FLAG(absl::Duration, grpc_tls_reload_interval, absl::Minutes(1),
          "How often the --grpc_tls_* files are re-read (rotated certificates apply without a "
          "restart).");
ABSL_FLAG(bool, grpc_insecure, false,
          "Plaintext gRPC, nobody authenticated: local development only. Excludes the "
          "--grpc_tls_* files.");

ABSL_FLAG(std::string, admin_auth, "kubernetes",
          "How operators (reverserctl) are authenticated: kubernetes (the reverser-admin "
          "certificate and a Kubernetes user's bearer token, checked with a TokenReview and "
          "authorized with a SubjectAccessReview; docs/security.md) or certificate (the "
          "reverser-admin certificate alone).");

namespace reverser::runtime {
namespace {

using grpc::experimental::FileWatcherCertificateProvider;

std::shared_ptr<FileWatcherCertificateProvider> Provider(const GrpcSecurity& security) {
  return std::make_shared<FileWatcherCertificateProvider>(
      security.key_file, security.cert_file, security.ca_file,
      static_cast<unsigned int>(
          std::max<int64_t>(1, absl::ToInt64Seconds(security.reload_interval))));
}

// A table lookup; with an operator reviewer also a TokenReview and SubjectAccessReview (cached
// by the reviewer), so Process then runs off the call's thread (IsBlocking()).
class CallAuthorizer final : public grpc::AuthMetadataProcessor {
 public:
  CallAuthorizer(std::string service, MetricsRegistry* metrics,
                 std::shared_ptr<AdminReviewer> operators)
      : service_(std::move(service)), metrics_(metrics), operators_(std::move(operators)) {}

  bool IsBlocking() const override { return operators_ != nullptr; }

  grpc::Status Process(const InputMetadata& metadata, grpc::AuthContext* context,
                       OutputMetadata* consumed, OutputMetadata* /*response*/) override {
    std::string path;
    if (auto it = metadata.find(":path"); it != metadata.end()) {
      path.assign(it->second.data(), it->second.size());
    }
    std::vector<std::string> names;
    for (const char* property : {"x509_common_name", "x509_subject_alternative_name"}) {
      for (const grpc::string_ref& value : context->FindPropertyValues(property)) {
        names.emplace_back(value.data(), value.size());
      }
    }
    const std::set<CallerRole> roles = RolesOf(names);
    absl::Status decided = AuthorizeCall(path, roles);
    if (!decided.ok()) {
      const bool unauthenticated = absl::IsUnauthenticated(decided);
      return Refuse(unauthenticated ? "unauthenticated" : "permission_denied", path, names,
                    decided);
    }
    const OperatorAccess access = OperatorAccessOf(path, roles);
    if (operators_ == nullptr || access == OperatorAccess::kNone) return grpc::Status::OK;

    std::string token;
    if (auto it = metadata.find("authorization"); it != metadata.end()) {
      absl::string_view header(it->second.data(), it->second.size());
      if (absl::ConsumePrefix(&header, "Bearer ")) token = std::string(header);
      consumed->insert(std::make_pair(std::string(it->first.data(), it->first.size()),
                                      std::string(it->second.data(), it->second.size())));
    }
    if (token.empty()) {
      return Refuse("no_token", path, names,
                    absl::UnauthenticatedError(absl::StrCat(
                        path, " is an operator's call: it needs the bearer token of a "
                              "Kubernetes user (reverserctl sends its kubeconfig user's token)")));
    }
    OperatorCall call{service_, path, std::string(OperatorVerb(access))};
    absl::StatusOr<std::string> user = operators_->Review(token, call);
    if (!user.ok()) {
      const char* reason = absl::IsUnauthenticated(user.status())      ? "token_invalid"
                           : absl::IsPermissionDenied(user.status())   ? "rbac_denied"
                                                                       : "review_failed";
      return Refuse(reason, path, names, user.status());
    }
    LogInfo("operator call", {{"method", path}, {"user", *user}, {"verb", call.verb}});
    return grpc::Status::OK;
  }

 private:
  grpc::Status Refuse(const char* reason, const std::string& path,
                      const std::vector<std::string>& names, const absl::Status& why) {
    if (metrics_ != nullptr) {
      metrics_
          ->GetCounter("reverser_grpc_calls_refused_total",
                       "gRPC calls refused before any handler ran, by reason: unauthenticated "
                       "(no client certificate of the mesh), permission_denied (its role may "
                       "not make the call), and for operators' calls no_token, token_invalid "
                       "(TokenReview), rbac_denied (SubjectAccessReview) or review_failed (the "
                       "API server did not answer).",
                       {{"service", service_}, {"reason", reason}})
          .Increment();
    }
    LogWarning("grpc call refused", {{"method", path},
                                     {"peer_names", absl::StrJoin(names, ",")},
                                     {"reason", reason},
                                     {"error", std::string(why.message())}});
    grpc::StatusCode code = grpc::StatusCode::PERMISSION_DENIED;
    if (absl::IsUnauthenticated(why)) code = grpc::StatusCode::UNAUTHENTICATED;
    if (absl::IsUnavailable(why) || absl::IsDeadlineExceeded(why)) {
      code = grpc::StatusCode::UNAVAILABLE;
    }
    return grpc::Status(code, std::string(why.message()));
  }

  const std::string service_;
  MetricsRegistry* metrics_;
  const std::shared_ptr<AdminReviewer> operators_;
};

}  // namespace

absl::Status CheckGrpcSecurity(const GrpcSecurity& security) {
  const bool any_file =
      !security.ca_file.empty() || !security.cert_file.empty() || !security.key_file.empty();
  if (security.insecure) {
    return any_file ? absl::InvalidArgumentError(
                          "--grpc_insecure and --grpc_tls_* exclude each other: choose one")
                    : absl::OkStatus();
  }
  if (!any_file) {
    return absl::InvalidArgumentError(
        "gRPC needs mutual TLS: set --grpc_tls_ca, --grpc_tls_cert and --grpc_tls_key (or "
        "--grpc_insecure for local development)");
  }
  for (const auto& [flag, file] : {std::pair<const char*, const std::string&>{
                                       "--grpc_tls_ca", security.ca_file},
                                   {"--grpc_tls_cert", security.cert_file},
                                   {"--grpc_tls_key", security.key_file}}) {
    if (file.empty()) return absl::InvalidArgumentError(absl::StrCat(flag, " is not set"));
    if (access(file.c_str(), R_OK) != 0) {
      return absl::InvalidArgumentError(absl::StrCat(flag, ": cannot read ", file));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<GrpcSecurity> GrpcSecurityFromFlags() {
  GrpcSecurity security;
  security.insecure = absl::GetFlag(FLAGS_grpc_insecure);
  security.ca_file = absl::GetFlag(FLAGS_grpc_tls_ca);
  security.cert_file = absl::GetFlag(FLAGS_grpc_tls_cert);
  security.key_file = absl::GetFlag(FLAGS_grpc_tls_key);
  security.reload_interval = absl::GetFlag(FLAGS_grpc_tls_reload_interval);
  const std::string admin_auth = absl::GetFlag(FLAGS_admin_auth);
  if (admin_auth != "kubernetes" && admin_auth != "certificate") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--admin_auth must be kubernetes or certificate, not \"", admin_auth, "\""));
  }
  security.review_operators = admin_auth == "kubernetes";
  if (security.reload_interval < absl::Seconds(1)) {
    return absl::InvalidArgumentError("--grpc_tls_reload_interval must be at least 1s");
  }
  if (absl::Status s = CheckGrpcSecurity(security); !s.ok()) return s;
  return security;
}

std::shared_ptr<grpc::ChannelCredentials> MeshChannelCredentials(const GrpcSecurity& security) {
  if (security.insecure) return grpc::InsecureChannelCredentials();
  grpc::experimental::TlsChannelCredentialsOptions options;
  options.set_certificate_provider(Provider(security));
  options.watch_root_certs();
  options.watch_identity_key_cert_pairs();
  return grpc::experimental::TlsCredentials(options);
}

std::shared_ptr<grpc::ServerCredentials> MeshServerCredentials(
    const GrpcSecurity& security, const std::string& service, MetricsRegistry* metrics,
    std::shared_ptr<AdminReviewer> operators) {
  if (security.insecure) return grpc::InsecureServerCredentials();
  grpc::experimental::TlsServerCredentialsOptions options(Provider(security));
  options.watch_root_certs();
  options.watch_identity_key_cert_pairs();
  // Requested, and verified when sent; a call without one is refused by the authorizer with a
  // clear UNAUTHENTICATED instead of a bare handshake failure.
  options.set_cert_request_type(GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_AND_VERIFY);
  std::shared_ptr<grpc::ServerCredentials> credentials =
      grpc::experimental::TlsServerCredentials(options);
  credentials->SetAuthMetadataProcessor(std::make_shared<CallAuthorizer>(service, metrics, std::move(operators)));
  return credentials;
}

}  // namespace reverser::runtime
