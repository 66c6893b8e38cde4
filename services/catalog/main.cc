// The catalog service binary.

#include "libs/runtime/admin_status.h"
#include "libs/runtime/service_main.h"
#include "proto/reverser/v1/catalog.grpc.pb.h"

namespace reverser::catalog {
namespace {

class App final : public runtime::ServiceApp {
 public:
  absl::Status Setup(runtime::ServiceHost& host) override {
    admin_ = std::make_unique<runtime::AdminStatusService<reverser::v1::CatalogAdmin>>(&host);
    host.AddGrpcService(admin_.get());
    return absl::OkStatus();
  }

 private:
  std::unique_ptr<runtime::AdminStatusService<reverser::v1::CatalogAdmin>> admin_;
};

std::unique_ptr<runtime::ServiceApp> MakeApp() { return std::make_unique<App>(); }

}  // namespace
}  // namespace reverser::catalog

int main(int argc, char** argv) {
  return reverser::runtime::RunServiceMain(
      argc, argv,
      {"catalog", "reverser catalog — API discovery, the type registry, rules, watched-type tables, claims and CRD status.\n\nUsage: catalog [flags]"},
      &reverser::catalog::MakeApp);
}
