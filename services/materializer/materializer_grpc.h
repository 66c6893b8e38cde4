#pragma once

// The materializer's operator-facing gRPC surface (callback API): `MaterializerAdmin`. Every
// handler asks the supervisor actor through runtime::AskActor and returns at once; the actor's
// reply (or its timeout) finishes the call, so no gRPC thread waits on a worker.
//
//  - Status: the host's ServiceStatus (runtime::AdminStatusService).
//  - ListMaterializations: one MaterializationState per owned claim.
//  - Compact: folds one claim (or every owned claim) into a new checkpoint; a claim this
//    process does not own is NOT_FOUND.

#include <caf/all.hpp>

#include "libs/runtime/admin_status.h"
#include "proto/reverser/v1/materializer.grpc.pb.h"
#include "services/materializer/supervisor_protocol.h"

namespace reverser::materializer {

class MaterializerAdminGrpcService final
    : public runtime::AdminStatusService<reverser::v1::MaterializerAdmin> {
 public:
  MaterializerAdminGrpcService(runtime::ServiceHost* host, SupervisorActor supervisor)
      : AdminStatusService(host), supervisor_(caf::actor_cast<caf::weak_actor_ptr>(supervisor)) {}

  grpc::ServerUnaryReactor* ListMaterializations(
      grpc::CallbackServerContext* context, const reverser::v1::ListMaterializationsRequest*,
      reverser::v1::ListMaterializationsResponse* response) override;
  grpc::ServerUnaryReactor* Compact(grpc::CallbackServerContext* context,
                                    const reverser::v1::CompactRequest* request,
                                    reverser::v1::CompactResponse* response) override;

 private:
  grpc::Status Unavailable(const caf::error& err) const;

  // The supervisor (a SupervisorActor), or null once it ended.
  caf::actor Supervisor() const { return caf::actor_cast<caf::actor>(supervisor_); }

  // Weak: a detached actor's thread ends only once no strong handle to it is left, and the
  // handlers outlive the actor system's shutdown.
  caf::weak_actor_ptr supervisor_;
};

}  // namespace reverser::materializer
