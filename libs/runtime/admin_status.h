#pragma once

// The admin `Status` call every service's admin API shares. `AdminApi` is a generated service
// (reverser::v1::CatalogAdmin, MaterializerAdmin, ...); services derive from AdminStatusService
// to add their own admin calls.

#include <grpcpp/grpcpp.h>

#include "libs/runtime/service_host.h"
#include "proto/reverser/v1/admin.pb.h"

namespace reverser::runtime {

template <typename AdminApi>
class AdminStatusService : public AdminApi::CallbackService {
 public:
  explicit AdminStatusService(ServiceHost* host) : host_(host) {}

  grpc::ServerUnaryReactor* Status(grpc::CallbackServerContext* context,
                                   const reverser::v1::StatusRequest* /*request*/,
                                   reverser::v1::ServiceStatus* response) override {
    *response = host_->Status();
    auto* reactor = context->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }

 protected:
  ServiceHost* host() const { return host_; }

 private:
  ServiceHost* host_;
};

}  // namespace reverser::runtime
