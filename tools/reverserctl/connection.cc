#include "tools/reverserctl/connection.h"

#include <fstream>
#include <optional>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "libs/kube/api_error.h"
#include "libs/kube/config.h"
#include "libs/kube/httplib_transport.h"
#include "nlohmann/json.hpp"

namespace reverser::reverserctl {

absl::StatusOr<int> ReadEndpointsFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read endpoints file ", path));
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json doc = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object() || !doc.contains("grpc_port") || !doc["grpc_port"].is_number_integer()) {
    return absl::InvalidArgumentError(
        absl::StrCat("endpoints file ", path, " has no integer \"grpc_port\""));
  }
  int port = doc["grpc_port"].get<int>();
  if (port <= 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("endpoints file ", path, ": grpc_port ", port, " is not a port"));
  }
  return port;
}

absl::StatusOr<std::string> ResolveAddress(const GlobalOptions& options,
                                           const std::string& service) {
  if (auto it = options.service_addr.find(service); it != options.service_addr.end()) {
    return it->second;
  }
  if (!options.addr.empty()) return options.addr;
  std::string file = options.endpoints_file;
  if (file.empty() && !options.endpoints_dir.empty()) {
    file = absl::StrCat(options.endpoints_dir, "/", service, ".json");
  }
  if (file.empty()) return std::string(kDefaultAddress);
  auto port = ReadEndpointsFile(file);
  if (!port.ok()) return port.status();
  return absl::StrCat(options.host, ":", *port);
}

absl::StatusOr<runtime::GrpcSecurity> SecurityOf(const GlobalOptions& options) {
  runtime::GrpcSecurity security;
  security.insecure = options.insecure;
  security.ca_file = options.tls_ca;
  security.cert_file = options.tls_cert;
  security.key_file = options.tls_key;
  if (absl::Status s = runtime::CheckGrpcSecurity(security); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(s.message(),
                     "; reverserctl calls as an operator: a certificate named "
                     "reverser-admin from the mesh CA (docs/security.md)"));
  }
  return security;
}

absl::StatusOr<std::string> BearerTokenOf(const GlobalOptions& options) {
  if (options.insecure) return std::string();
  if (!options.token.empty()) return options.token;
  kube::KubeconfigOptions kube_options;
  kube_options.context = options.kube_context;
  absl::StatusOr<kube::ClusterConfig> config =
      kube::LoadDefaultConfig(options.kubeconfig, kube_options);
  if (!config.ok()) {
    // Without any kubeconfig the calls go without a token: a service that reviews operators
    // answers UNAUTHENTICATED and says so. A kubeconfig asked for by name must be readable.
    if (absl::IsNotFound(config.status()) && options.kubeconfig.empty()) return std::string();
    return absl::InvalidArgumentError(absl::StrCat("--kubeconfig: ", config.status().message()));
  }
  if (!config->token_file.empty()) {
    absl::StatusOr<std::string> token = kube::ReadFileToString(config->token_file);
    if (!token.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the kubeconfig's token file ", config->token_file, ": ", token.status().message()));
    }
    return std::string(absl::StripAsciiWhitespace(*token));
  }
  return config->token;
}

absl::StatusOr<std::shared_ptr<kube::RestClient>> KubeClientOf(const GlobalOptions& options,
                                                               absl::Duration request_timeout) {
  kube::KubeconfigOptions kube_options;
  kube_options.context = options.kube_context;
  absl::StatusOr<kube::ClusterConfig> config =
      kube::LoadDefaultConfig(options.kubeconfig, kube_options);
  if (!config.ok()) {
    if (absl::IsNotFound(config.status()) && options.kubeconfig.empty()) {
      return absl::NotFoundError(
          absl::StrCat("no Kubernetes config (pass --kubeconfig): ", config.status().message()));
    }
    return absl::InvalidArgumentError(absl::StrCat("--kubeconfig: ", config.status().message()));
  }
  if (!options.token.empty()) {
    config->token = options.token;
    config->token_file.clear();  // it would win over the token given
  }
  kube::RestClientOptions client_options;
  client_options.request_timeout = request_timeout;
  auto client = kube::NewHttplibRestClient(*config, "reverserctl/0.1", client_options);
  if (!client.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the kubeconfig's cluster: ", client.status().message()));
  }
  return *std::move(client);
}

std::string DescribeKubeError(const absl::Status& status) {
  std::optional<kube::ApiError> error = kube::GetApiError(status);
  std::string text = error ? error->ToString() : std::string(status.message());
  return absl::StrReplaceAll(text, {{"\n", " "}});
}

namespace {

grpc::ChannelArguments ChannelArgumentsFor(const GlobalOptions& options) {
  grpc::ChannelArguments args;
  if (!options.tls_server_name.empty()) args.SetSslTargetNameOverride(options.tls_server_name);
  return args;
}

}  // namespace

Connection::Connection(std::string service, std::string address, const GlobalOptions& options,
                       const runtime::GrpcSecurity& security)
    : service_(std::move(service)),
      address_(std::move(address)),
      timeout_(options.timeout),
      bearer_token_(security.insecure ? std::string() : options.token),
      channel_(grpc::CreateCustomChannel(address_, runtime::MeshChannelCredentials(security),
                                         ChannelArgumentsFor(options))) {}

void Connection::Prepare(grpc::ClientContext* context) const {
  context->set_deadline(std::chrono::system_clock::now() + absl::ToChronoMilliseconds(timeout_));
  if (!bearer_token_.empty()) context->AddMetadata("authorization", "Bearer " + bearer_token_);
}

std::string Connection::Describe(const grpc::Status& status) const {
  std::string message = absl::StrReplaceAll(status.error_message(), {{"\n", " "}});
  if (message.empty() && status.error_code() == grpc::StatusCode::UNIMPLEMENTED) {
    message = "this version of the service does not implement the call";
  }
  return absl::StrCat(service_, " at ", address_, ": ", StatusCodeName(status.error_code()),
                      message.empty() ? "" : ": ", message);
}

std::string StatusCodeName(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK:
      return "OK";
    case grpc::StatusCode::CANCELLED:
      return "CANCELLED";
    case grpc::StatusCode::UNKNOWN:
      return "UNKNOWN";
    case grpc::StatusCode::INVALID_ARGUMENT:
      return "INVALID_ARGUMENT";
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return "DEADLINE_EXCEEDED";
    case grpc::StatusCode::NOT_FOUND:
      return "NOT_FOUND";
    case grpc::StatusCode::ALREADY_EXISTS:
      return "ALREADY_EXISTS";
    case grpc::StatusCode::PERMISSION_DENIED:
      return "PERMISSION_DENIED";
    case grpc::StatusCode::UNAUTHENTICATED:
      return "UNAUTHENTICATED";
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return "RESOURCE_EXHAUSTED";
    case grpc::StatusCode::FAILED_PRECONDITION:
      return "FAILED_PRECONDITION";
    case grpc::StatusCode::ABORTED:
      return "ABORTED";
    case grpc::StatusCode::OUT_OF_RANGE:
      return "OUT_OF_RANGE";
    case grpc::StatusCode::UNIMPLEMENTED:
      return "UNIMPLEMENTED";
    case grpc::StatusCode::INTERNAL:
      return "INTERNAL";
    case grpc::StatusCode::UNAVAILABLE:
      return "UNAVAILABLE";
    case grpc::StatusCode::DATA_LOSS:
      return "DATA_LOSS";
    default:
      return absl::StrCat("CODE_", static_cast<int>(code));
  }
}

}  // namespace reverser::reverserctl
