// The materializer service binary.

#include "libs/runtime/admin_status.h"
#include "libs/runtime/service_main.h"
#include "proto/reverser/v1/materializer.grpc.pb.h"

namespace reverser::materializer {
namespace {

class App final : public runtime::ServiceApp {
 public:
  absl::Status Setup(runtime::ServiceHost& host) override {
    admin_ = std::make_unique<runtime::AdminStatusService<reverser::v1::MaterializerAdmin>>(&host);
    host.AddGrpcService(admin_.get());
    return absl::OkStatus();
  }

 private:
  std::unique_ptr<runtime::AdminStatusService<reverser::v1::MaterializerAdmin>> admin_;
};

std::unique_ptr<runtime::ServiceApp> MakeApp() { return std::make_unique<App>(); }

}  // namespace
}  // namespace reverser::materializer

int main(int argc, char** argv) {
  return reverser::runtime::RunServiceMain(
      argc, argv,
      {"materializer", "reverser materializer — per-type Redis materialization (stream + checkpoint) and the audit webhook intake.\n\nUsage: materializer [flags]"},
      &reverser::materializer::MakeApp);
}
