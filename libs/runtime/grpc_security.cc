#include "libs/runtime/grpc_security.h"

#include <grpcpp/security/auth_metadata_processor.h>
#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_credentials_options.h>
#include <unistd.h>

#include <algorithm>
#include <set>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
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

namespace reverser::runtime {
namespace {

using grpc::experimental::FileWatcherCertificateProvider;

std::shared_ptr<FileWatcherCertificateProvider> Provider(const GrpcSecurity& security) {
  return std::make_shared<FileWatcherCertificateProvider>(
      security.key_file, security.cert_file, security.ca_file,
      static_cast<unsigned int>(
          std::max<int64_t>(1, absl::ToInt64Seconds(security.reload_interval))));
}

// Runs inline on the call's thread (IsBlocking() false): a table lookup, no I/O.
class CallAuthorizer final : public grpc::AuthMetadataProcessor {
 public:
  CallAuthorizer(std::string service, MetricsRegistry* metrics)
      : service_(std::move(service)), metrics_(metrics) {}

  bool IsBlocking() const override { return false; }

  grpc::Status Process(const InputMetadata& metadata, grpc::AuthContext* context,
                       OutputMetadata* /*consumed*/, OutputMetadata* /*response*/) override {
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
    absl::Status decided = AuthorizeCall(path, RolesOf(names));
    if (decided.ok()) return grpc::Status::OK;
    const bool unauthenticated = absl::IsUnauthenticated(decided);
    if (metrics_ != nullptr) {
      metrics_
          ->GetCounter("reverser_grpc_calls_refused_total",
                       "gRPC calls refused before any handler ran, by reason: unauthenticated "
                       "(no client certificate of the mesh) or permission_denied (its role may "
                       "not make the call).",
                       {{"service", service_},
                        {"reason", unauthenticated ? "unauthenticated" : "permission_denied"}})
          .Increment();
    }
    LogWarning("grpc call refused", {{"method", path},
                                     {"peer_names", absl::StrJoin(names, ",")},
                                     {"error", std::string(decided.message())}});
    return grpc::Status(
        unauthenticated ? grpc::StatusCode::UNAUTHENTICATED : grpc::StatusCode::PERMISSION_DENIED,
        std::string(decided.message()));
  }

 private:
  const std::string service_;
  MetricsRegistry* metrics_;
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

std::shared_ptr<grpc::ServerCredentials> MeshServerCredentials(const GrpcSecurity& security,
                                                               const std::string& service,
                                                               MetricsRegistry* metrics) {
  if (security.insecure) return grpc::InsecureServerCredentials();
  grpc::experimental::TlsServerCredentialsOptions options(Provider(security));
  options.watch_root_certs();
  options.watch_identity_key_cert_pairs();
  // Requested, and verified when sent; a call without one is refused by the authorizer with a
  // clear UNAUTHENTICATED instead of a bare handshake failure.
  options.set_cert_request_type(GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_AND_VERIFY);
  std::shared_ptr<grpc::ServerCredentials> credentials =
      grpc::experimental::TlsServerCredentials(options);
  credentials->SetAuthMetadataProcessor(std::make_shared<CallAuthorizer>(service, metrics));
  return credentials;
}

}  // namespace reverser::runtime
