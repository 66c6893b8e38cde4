// The splicer service binary.

#include "libs/runtime/admin_status.h"
#include "libs/runtime/service_main.h"
#include "proto/reverser/v1/splicer.grpc.pb.h"

namespace reverser::splicer {
namespace {

class App final : public runtime::ServiceApp {
 public:
  absl::Status Setup(runtime::ServiceHost& host) override {
    admin_ = std::make_unique<runtime::AdminStatusService<reverser::v1::SplicerAdmin>>(&host);
    host.AddGrpcService(admin_.get());
    return absl::OkStatus();
  }

 private:
  std::unique_ptr<runtime::AdminStatusService<reverser::v1::SplicerAdmin>> admin_;
};

std::unique_ptr<runtime::ServiceApp> MakeApp() { return std::make_unique<App>(); }

}  // namespace
}  // namespace reverser::splicer

int main(int argc, char** argv) {
  return reverser::runtime::RunServiceMain(
      argc, argv,
      {"splicer", "reverser splicer — splices checkpoints and stream tails into desired sets and live events per GitTarget.\n\nUsage: splicer [flags]"},
      &reverser::splicer::MakeApp);
}
