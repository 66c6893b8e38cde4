#pragma once

// Transport security of the gRPC mesh: mutual TLS with certificates from files (re-read as
// cert-manager or a chart rotates them), each call authorized by the caller's certificate name
// before its handler runs (call_policy.h). Plaintext only behind the explicit --grpc_insecure.

#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace reverser::runtime {

class AdminReviewer;
class MetricsRegistry;

struct GrpcSecurity {
  // Plaintext, nobody authenticated: local development and in-process tests only.
  bool insecure = false;
  std::string ca_file;    // the mesh CA: verifies peers (both directions)
  std::string cert_file;  // this process's certificate (server and client)
  std::string key_file;
  absl::Duration reload_interval = absl::Minutes(1);
  // --admin_auth=kubernetes (true): an operator's calls also need a Kubernetes user's bearer
  // token, reviewed by the API server (admin_review.h); certificate (false): the reverser-admin
  // certificate alone. Without TLS nobody is authenticated either way.
  bool review_operators = true;
};

// From --grpc_tls_ca, --grpc_tls_cert, --grpc_tls_key, --grpc_insecure and --admin_auth. TLS needs all three
// files, readable now; --grpc_insecure excludes them. Neither is an InvalidArgument error that
// says what to set.
absl::StatusOr<GrpcSecurity> GrpcSecurityFromFlags();

// Checks a choice of transport: `insecure` with no files, or all three files, readable now (the
// file watcher would only log). Errors name the flags to set.
absl::Status CheckGrpcSecurity(const GrpcSecurity& security);

// Credentials for a client of the mesh: the server's certificate must come from the CA and name
// the host dialed; this process's certificate identifies it.
std::shared_ptr<grpc::ChannelCredentials> MeshChannelCredentials(const GrpcSecurity& security);

// Credentials for this process's gRPC server. With TLS a client certificate is requested and
// verified, and every call is checked by AuthorizeCall: refusals are answered UNAUTHENTICATED or
// PERMISSION_DENIED without reaching a handler, logged, and counted in
// reverser_grpc_calls_refused_total{service, reason}. With `operators` (not null), an
// operator's call (OperatorAccessOf) also needs the `authorization: Bearer <token>` of a
// Kubernetes user the reviewer allows; the token is consumed, handlers never see it.
std::shared_ptr<grpc::ServerCredentials> MeshServerCredentials(
    const GrpcSecurity& security, const std::string& service, MetricsRegistry* metrics,
    std::shared_ptr<AdminReviewer> operators = nullptr);

}  // namespace reverser::runtime
