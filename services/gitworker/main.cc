// The gitworker service binary.

#include "libs/runtime/admin_status.h"
#include "libs/runtime/service_main.h"
#include "proto/reverser/v1/gitworker.grpc.pb.h"

namespace reverser::gitworker {
namespace {

class App final : public runtime::ServiceApp {
 public:
  absl::Status Setup(runtime::ServiceHost& host) override {
    admin_ = std::make_unique<runtime::AdminStatusService<reverser::v1::GitWorkerAdmin>>(&host);
    host.AddGrpcService(admin_.get());
    return absl::OkStatus();
  }

 private:
  std::unique_ptr<runtime::AdminStatusService<reverser::v1::GitWorkerAdmin>> admin_;
};

std::unique_ptr<runtime::ServiceApp> MakeApp() { return std::make_unique<App>(); }

}  // namespace
}  // namespace reverser::gitworker

int main(int argc, char** argv) {
  return reverser::runtime::RunServiceMain(
      argc, argv,
      {"gitworker", "reverser gitworker — per-branch commit windows, manifest writer, encryption and compare-and-swap push.\n\nUsage: gitworker [flags]"},
      &reverser::gitworker::MakeApp);
}
