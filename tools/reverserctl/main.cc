// reverserctl: the admin CLI over the services' gRPC admin APIs.
//
//   reverserctl --addr=127.0.0.1:9090 status catalog
//   reverserctl --addr=127.0.0.1:9090 health
//   reverserctl --addr=127.0.0.1:9091 compact apps/v1/deployments@team

#include <grpcpp/grpcpp.h>

#include <iostream>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "google/protobuf/util/json_util.h"
#include "proto/grpc/health/v1/health.grpc.pb.h"
#include "proto/reverser/v1/catalog.grpc.pb.h"
#include "proto/reverser/v1/gitworker.grpc.pb.h"
#include "proto/reverser/v1/materializer.grpc.pb.h"
#include "proto/reverser/v1/splicer.grpc.pb.h"
#include "services/materializer/claim_syntax.h"

ABSL_FLAG(std::string, addr, "127.0.0.1:9090", "gRPC address of the service (host:port).");
ABSL_FLAG(absl::Duration, timeout, absl::Seconds(5), "Deadline of each call.");

namespace {

constexpr char kUsage[] =
    "reverserctl — administer reverser services over gRPC.\n\n"
    "Usage:\n"
    "  reverserctl [--addr=host:port] health\n"
    "      Standard gRPC health check; exit 0 when SERVING.\n"
    "  reverserctl [--addr=host:port] status <catalog|materializer|splicer|gitworker>\n"
    "      The service's admin Status as JSON.\n"
    "  reverserctl [--addr=host:port] materializations\n"
    "      A materializer's materializations (phase, checkpoint, counts) as JSON.\n"
    "  reverserctl [--addr=host:port] compact [<claim>]\n"
    "      Ask a materializer to fold its streams into new checkpoints now (no API call): the\n"
    "      one claim `group/version/resource[@namespace]` (core types as `v1/configmaps`), or\n"
    "      every claim it owns. Prints the results as JSON; exit 1 if any failed.";

std::chrono::system_clock::time_point Deadline() {
  return std::chrono::system_clock::now() +
         absl::ToChronoMilliseconds(absl::GetFlag(FLAGS_timeout));
}

template <typename Admin>
grpc::Status CallStatus(const std::shared_ptr<grpc::Channel>& channel,
                        reverser::v1::ServiceStatus* out) {
  auto stub = Admin::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(Deadline());
  return stub->Status(&context, reverser::v1::StatusRequest(), out);
}

int Fail(const std::string& message, int code = 1) {
  std::cerr << "reverserctl: " << message << "\n";
  return code;
}

int Health(const std::shared_ptr<grpc::Channel>& channel) {
  auto stub = grpc::health::v1::Health::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(Deadline());
  grpc::health::v1::HealthCheckResponse response;
  grpc::Status status = stub->Check(&context, grpc::health::v1::HealthCheckRequest(), &response);
  if (!status.ok()) return Fail("health check failed: " + status.error_message());
  std::cout << grpc::health::v1::HealthCheckResponse::ServingStatus_Name(response.status()) << "\n";
  return response.status() == grpc::health::v1::HealthCheckResponse::SERVING ? 0 : 1;
}

void PrintJson(const google::protobuf::Message& message) {
  std::string json;
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.always_print_primitive_fields = true;
  (void)google::protobuf::util::MessageToJsonString(message, &json, options);
  std::cout << json;
}

int Materializations(const std::shared_ptr<grpc::Channel>& channel) {
  auto stub = reverser::v1::MaterializerAdmin::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(Deadline());
  reverser::v1::ListMaterializationsResponse out;
  grpc::Status status =
      stub->ListMaterializations(&context, reverser::v1::ListMaterializationsRequest(), &out);
  if (!status.ok()) return Fail("materializations call failed: " + status.error_message());
  PrintJson(out);
  return 0;
}

int Compact(const std::shared_ptr<grpc::Channel>& channel, const std::string* claim_text) {
  reverser::v1::CompactRequest request;
  if (claim_text != nullptr) {
    auto claim = reverser::materializer::ParseClaim(*claim_text);
    if (!claim.ok()) return Fail(std::string(claim.status().message()), 2);
    *request.mutable_claim() = *claim;
  }
  auto stub = reverser::v1::MaterializerAdmin::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(Deadline());
  reverser::v1::CompactResponse out;
  grpc::Status status = stub->Compact(&context, request, &out);
  if (!status.ok()) return Fail("compact call failed: " + status.error_message());
  PrintJson(out);
  int failed = 0;
  for (const auto& result : out.results()) {
    if (result.error().empty()) continue;
    ++failed;
    std::cerr << "reverserctl: " << reverser::materializer::FormatClaim(result.claim()) << ": "
              << result.error() << "\n";
  }
  return failed == 0 ? 0 : 1;
}

int Status(const std::shared_ptr<grpc::Channel>& channel, const std::string& service) {
  reverser::v1::ServiceStatus out;
  grpc::Status status;
  if (service == "catalog") {
    status = CallStatus<reverser::v1::CatalogAdmin>(channel, &out);
  } else if (service == "materializer") {
    status = CallStatus<reverser::v1::MaterializerAdmin>(channel, &out);
  } else if (service == "splicer") {
    status = CallStatus<reverser::v1::SplicerAdmin>(channel, &out);
  } else if (service == "gitworker") {
    status = CallStatus<reverser::v1::GitWorkerAdmin>(channel, &out);
  } else {
    return Fail("unknown service \"" + service +
                    "\": expected catalog, materializer, splicer or gitworker",
                2);
  }
  if (!status.ok()) return Fail("status call failed: " + status.error_message());
  PrintJson(out);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  absl::FlagsUsageConfig config;
  config.contains_help_flags = [](absl::string_view file) {
    return absl::StrContains(file, "reverserctl");
  };
  config.contains_helpshort_flags = config.contains_help_flags;
  absl::SetFlagsUsageConfig(config);
  absl::SetProgramUsageMessage(kUsage);
  std::vector<char*> args = absl::ParseCommandLine(argc, argv);
  if (args.size() < 2) return Fail(std::string("missing command\n\n") + kUsage, 2);
  auto channel = grpc::CreateChannel(absl::GetFlag(FLAGS_addr), grpc::InsecureChannelCredentials());
  std::string command = args[1];
  if (command == "health" && args.size() == 2) return Health(channel);
  if (command == "status" && args.size() == 3) return Status(channel, args[2]);
  if (command == "materializations" && args.size() == 2) return Materializations(channel);
  if (command == "compact" && args.size() <= 3) {
    std::string claim = args.size() == 3 ? args[2] : "";
    return Compact(channel, args.size() == 3 ? &claim : nullptr);
  }
  return Fail("unknown command or wrong arguments\n\n" + std::string(kUsage), 2);
}
