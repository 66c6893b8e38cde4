#pragma once

// The gitworker's gRPC services. Handlers never block: a stream is a DeliverReactor
// (deliver_reactor.h), and a call that needs a branch actor asks it with runtime::AskActor /
// AskAll and finishes in the reply, on a CAF thread.
//
// GitWorker.Deliver: deliver_reactor.h.
// GitWorker.AttachCommit: attach-then-poll finalize of a CommitRequest's open window.
// GitWorkerAdmin: Status and ListBranches. A BranchStatus's `destination.path` holds the
// spec.path of every GitTarget writing to that branch, sorted and joined by ", " ("/" for the
// repository root): several targets may share one branch.

#include <grpcpp/grpcpp.h>

#include "absl/time/time.h"

#include <caf/all.hpp>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "libs/runtime/admin_status.h"
#include "proto/reverser/v1/gitworker.grpc.pb.h"
#include "services/gitworker/branch_actor.h"
#include "services/gitworker/deliver_reactor.h"

namespace reverser::gitworker {

class GitWorkerGrpcService final : public reverser::v1::GitWorker::CallbackService {
 public:
  GitWorkerGrpcService(caf::actor_system& system, BranchRegistry* registry,
                       DeliveryOptions options);

  grpc::ServerBidiReactor<reverser::v1::DeliveryMessage, reverser::v1::DeliveryFeedback>* Deliver(
      grpc::CallbackServerContext* context) override;

  grpc::ServerUnaryReactor* AttachCommit(grpc::CallbackServerContext* context,
                                         const reverser::v1::AttachCommitRequest* request,
                                         reverser::v1::FinalizeResult* response) override;

 private:
  // The branch each CommitRequest registered on, so every poll reaches the same branch actor,
  // and when a request first arrived for a target with no branch yet (it resolves NoOpenWindow
  // once its close delay passed). Reply handlers (on CAF threads) hold it too.
  struct Attachments {
    struct Entry {
      std::optional<BranchActor> branch;
      absl::Time received;
    };
    std::mutex mu;
    std::map<std::string, Entry> entries;  // CommitRequest uid → its branch
  };

  caf::actor_system& system_;
  BranchRegistry* registry_;
  DeliveryOptions options_;
  std::shared_ptr<Attachments> attachments_ = std::make_shared<Attachments>();
};

class GitWorkerAdminGrpcService final
    : public runtime::AdminStatusService<reverser::v1::GitWorkerAdmin> {
 public:
  GitWorkerAdminGrpcService(runtime::ServiceHost* host, BranchRegistry* registry)
      : AdminStatusService(host), registry_(registry) {}

  grpc::ServerUnaryReactor* ListBranches(grpc::CallbackServerContext* context,
                                         const reverser::v1::ListBranchesRequest* request,
                                         reverser::v1::ListBranchesResponse* response) override;

 private:
  void FillTargetPaths(reverser::v1::GitDestination* destination) const;

  BranchRegistry* registry_;
};

}  // namespace reverser::gitworker
