#pragma once

// The splicer's admin gRPC surface (SplicerAdmin, callback API). Every handler that needs the
// TargetManager asks its actor (runtime::AskActor) and returns at once; the reply, or a timeout
// (UNAVAILABLE), finishes the call on a CAF worker. No handler waits on an actor.
//
//  - ListStreams: each GitTarget's readiness roll-up, with its streams (one target by uid).
//  - Resplice: makes the matching streams splice again; they send their resyncs on their readers.

#include <chrono>

#include "libs/runtime/admin_status.h"
#include "proto/reverser/v1/splicer.grpc.pb.h"
#include "services/splicer/target_manager_actor.h"

namespace reverser::splicer {

class SplicerAdminGrpcService final
    : public runtime::AdminStatusService<reverser::v1::SplicerAdmin> {
 public:
  // `timeout`: how long a call waits for the actor's answer before it fails UNAVAILABLE.
  SplicerAdminGrpcService(runtime::ServiceHost* host, caf::actor_system* system,
                          const TargetManagerActor& manager,
                          std::chrono::milliseconds timeout = std::chrono::seconds(10))
      : AdminStatusService(host),
        system_(system),
        manager_(caf::actor_cast<caf::weak_actor_ptr>(manager)),
        timeout_(timeout) {}

  grpc::ServerUnaryReactor* ListStreams(grpc::CallbackServerContext* context,
                                        const reverser::v1::ListStreamsRequest* request,
                                        reverser::v1::ListStreamsResponse* response) override;
  grpc::ServerUnaryReactor* Resplice(grpc::CallbackServerContext* context,
                                     const reverser::v1::RespliceRequest* request,
                                     reverser::v1::RespliceResponse* response) override;

 private:
  // The actor, or null once it ended. Weak: the actor runs on a thread of its own, which ends
  // only when no handle is left, and the gRPC surface outlives it during shutdown.
  caf::actor Manager() const;

  caf::actor_system* system_;
  caf::weak_actor_ptr manager_;
  std::chrono::milliseconds timeout_;
};

}  // namespace reverser::splicer
