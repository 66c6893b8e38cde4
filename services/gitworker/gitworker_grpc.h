#pragma once

// The gitworker's gRPC services. Handlers never block: a stream is a DeliverReactor
// (deliver_reactor.h), and a call that needs a branch actor asks it with runtime::AskActor /
// AskAll and finishes in the reply, on a CAF thread.
//
// GitWorker.Deliver: deliver_reactor.h.
// GitWorker.AttachCommit: attach-then-poll finalize of a CommitRequest's open window.
// GitWorkerAdmin: Status and ListBranches. A BranchStatus's `destination.path` holds the
// spec.path of every GitTarget writing to that branch, sorted and joined by ", " ("/" for the
// repository root): several targets may share one branch. With replicas (PeerListing.ownership
// set), each branch names its owner and the replica reporting it, and a request without
// local_only also asks every other live replica (its address from the Lease, local_only set,
// PeerListing.deadline) and merges: a branch two replicas report (a handover) is kept once, the
// owner's report first; `replicas` lists every replica asked, one that did not answer as such.

#include <grpcpp/grpcpp.h>

#include <caf/all.hpp>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "absl/time/time.h"
#include "libs/membership/membership.h"
#include "libs/runtime/admin_status.h"
#include "proto/reverser/v1/gitworker.grpc.pb.h"
#include "services/gitworker/branch_actor.h"
#include "services/gitworker/branch_ownership.h"
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

// How ListBranches reaches the other replicas (with --membership).
struct PeerListing {
  const BranchOwnership* ownership = nullptr;  // null: no replicas, nobody else is asked
  std::string me;                              // this replica's id
  // The live replicas (this one's view of the Leases): who is asked, at which address.
  std::function<membership::Membership()> members;
  std::shared_ptr<grpc::ChannelCredentials> credentials;  // the mesh's
  // --gitworker_tls_server_name: the name a replica's certificate is checked against (it is
  // dialed at its pod IP); empty: the host dialed.
  std::string tls_server_name;
  absl::Duration deadline = absl::Seconds(3);
};

class GitWorkerAdminGrpcService final
    : public runtime::AdminStatusService<reverser::v1::GitWorkerAdmin> {
 public:
  GitWorkerAdminGrpcService(runtime::ServiceHost* host, BranchRegistry* registry,
                            PeerListing peers = {})
      : AdminStatusService(host), registry_(registry), peers_(std::move(peers)) {}

  grpc::ServerUnaryReactor* ListBranches(grpc::CallbackServerContext* context,
                                         const reverser::v1::ListBranchesRequest* request,
                                         reverser::v1::ListBranchesResponse* response) override;

 private:
  void FillTargetPaths(reverser::v1::GitDestination* destination) const;
  // Asks the other live replicas (local_only) and merges their branches into `response`, then
  // finishes the call.
  void AskPeersAndFinish(grpc::ServerUnaryReactor* reactor,
                         reverser::v1::ListBranchesResponse* response);
  reverser::v1::GitWorkerAdmin::Stub* PeerStub(const std::string& address);

  BranchRegistry* registry_;
  const PeerListing peers_;
  std::mutex stubs_mu_;
  std::map<std::string, std::unique_ptr<reverser::v1::GitWorkerAdmin::Stub>> stubs_;
};

}  // namespace reverser::gitworker
