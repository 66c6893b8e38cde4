#pragma once

// Where a service is and how to reach it: address resolution from the global options and the
// endpoints files services write, channels, per-call deadlines, and one-line RPC errors; and a
// Kubernetes API client for the commands that talk to the cluster instead.

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "libs/kube/rest_client.h"
#include "libs/runtime/grpc_security.h"
#include "tools/reverserctl/cli.h"

namespace reverser::reverserctl {

// The default when nothing says otherwise: every service's --grpc_port default, on loopback.
inline constexpr char kDefaultAddress[] = "127.0.0.1:9090";

// The gRPC port in a service endpoints file ({"grpc_port":..,"http_port":..,"pid":..}).
absl::StatusOr<int> ReadEndpointsFile(const std::string& path);

// The address of `service`: --<service>_addr, else --addr, else --endpoints_file, else
// <endpoints_dir>/<service>.json, else kDefaultAddress.
absl::StatusOr<std::string> ResolveAddress(const GlobalOptions& options,
                                           const std::string& service);

// A connection to one service, remembered with its name and address for error messages.
class Connection {
 public:
  // `security`: the transport SecurityOf(options) chose (checked once, before any connection);
  // `options.token`: the resolved BearerTokenOf(options).
  Connection(std::string service, std::string address, const GlobalOptions& options,
             const runtime::GrpcSecurity& security);

  const std::string& service() const { return service_; }
  const std::string& address() const { return address_; }
  const std::shared_ptr<grpc::Channel>& channel() const { return channel_; }

  // Sets the call deadline (now + --timeout) and the operator's bearer token on `context`.
  void Prepare(grpc::ClientContext* context) const;
  // "splicer at 127.0.0.1:9090: UNIMPLEMENTED: <message>" on one line.
  std::string Describe(const grpc::Status& status) const;

 private:
  std::string service_;
  std::string address_;
  absl::Duration timeout_;
  std::string bearer_token_;
  std::shared_ptr<grpc::Channel> channel_;
};

// The transport the global options ask for: mutual TLS with readable files, or --grpc_insecure;
// neither is an InvalidArgument error that says what to pass.
absl::StatusOr<runtime::GrpcSecurity> SecurityOf(const GlobalOptions& options);

// The bearer token an operator's calls carry (GlobalOptions: --token, else the kubeconfig
// user's token or token file); empty without TLS, or when no kubeconfig has one. An explicit
// --kubeconfig that cannot be read is an error.
absl::StatusOr<std::string> BearerTokenOf(const GlobalOptions& options);

// A Kubernetes API client acting as the user of the global options' kubeconfig (--kubeconfig,
// --context, else as kubectl finds one), with --token instead of the user's token when given;
// each request bounded by `request_timeout`. InvalidArgument: an explicit --kubeconfig cannot
// be used (a usage error); NotFound: no kubeconfig anywhere.
absl::StatusOr<std::shared_ptr<kube::RestClient>> KubeClientOf(const GlobalOptions& options,
                                                               absl::Duration request_timeout);

// One line for a failed Kubernetes API call: the server's message, code and reason.
std::string DescribeKubeError(const absl::Status& status);

// The canonical name of a gRPC status code (UNAVAILABLE, DEADLINE_EXCEEDED, ...).
std::string StatusCodeName(grpc::StatusCode code);

}  // namespace reverser::reverserctl
