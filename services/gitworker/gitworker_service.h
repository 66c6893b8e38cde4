#pragma once

// The gitworker assembled: the branch registry (branch actors), the catalog's target configs
// (followed over the mesh), the Secret source and the two gRPC services, on a
// runtime::ServiceHost.
//
//   GitWorkerService gitworker(host, options);
//   gitworker.Register();  // before host.Start(): work dir, Secrets, gRPC services, components
//   host.Start();
//   gitworker.Start();     // follows the catalog's target configs; joins the replicas
//   ...
//   gitworker.Stop();      // before host.Shutdown(): finalizes and pushes every branch
//
// Readiness component `catalog` (not gating): the catalog's target configs arrived.
//
// With `replica.enabled` (--membership), several gitworkers share the branches
// (branch_ownership.h): Start() joins service "gitworker" with this replica's Lease, advertising
// its gRPC address; Stop() stops accepting (deliveries answered not_owner), finishes the
// branches (finalize, push), then leaves (the Lease deleted, so the others take over at once).

#include <atomic>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "libs/catalogclient/stream_follower.h"
#include "libs/core/clock.h"
#include "libs/kube/reflector.h"
#include "libs/kube/rest_client.h"
#include "libs/membership/replica.h"
#include "libs/runtime/service_host.h"
#include "proto/reverser/v1/catalog.pb.h"
#include "services/gitworker/branch_actor.h"
#include "services/gitworker/branch_ownership.h"
#include "services/gitworker/gitworker_grpc.h"
#include "services/gitworker/target_configs.h"
#include "services/gitworker/target_writer.h"
#include "services/gitworker/work_dir.h"

namespace reverser::gitworker {

struct GitWorkerServiceOptions {
  std::string work_dir;  // created private (work_dir.h); branch clones live under it
  absl::Duration push_cooldown = absl::Seconds(5);
  size_t target_buffer = 1000;  // items per GitTarget buffer of a stream
  size_t max_unaccepted = 64;   // messages a stream reads ahead of their acceptance
  WriterLimits limits;

  // Where credential and signing Secrets are read.
  enum class SecretsSource { kFiles, kApi };
  SecretsSource secrets_source = SecretsSource::kFiles;
  std::string credentials_dir;  // kFiles: mounted Secrets; empty: remotes reached anonymously
  std::string kubeconfig;       // kApi and operator reviews; empty: the default lookup
  absl::Duration signing_key_cache_ttl = absl::Seconds(30);

  // The catalog whose target configs are written with; empty: configs are used as delivered
  // (--target_config_source=delivery, local development only).
  std::string catalog_address;

  // Several replicas sharing the branches (--membership, --membership_namespace, --replica_id,
  // the timing flags). Off: this replica owns every branch. Needs the catalog (the unit set is
  // every GitTarget's branch, from its configs).
  membership::ReplicaSettings replica;
  // The gRPC address the other services reach this replica at (its Lease's annotation, what
  // NotOwner names); empty: <listen address>:<grpc port> (the host name for 0.0.0.0).
  std::string advertise_address;
  // --gitworker_tls_server_name: the name the other replicas' certificates are checked against
  // when ListBranches asks them (they are dialed at their advertised address); empty: the host.
  std::string peer_tls_server_name;
  // The API server the Leases are written to; null: from `kubeconfig` (tests pass one).
  std::shared_ptr<kube::RestClient> kube_client;
  kube::ReflectorOptions membership_reflector;
  const core::Clock* clock = &core::Clock::Real();
};

class GitWorkerService {
 public:
  GitWorkerService(runtime::ServiceHost& host, GitWorkerServiceOptions options);
  ~GitWorkerService();

  absl::Status Register();
  // Follows the catalog; with membership, joins (an error: the Lease could not be written).
  absl::Status Start();
  void Stop();

  // With membership: this replica once joined (null before Start and without membership).
  membership::Replica* replica() const { return joined_.load(); }
  const BranchOwnership* ownership() const { return ownership_.get(); }

 private:
  // The catalog's resolution of every GitTarget, from Catalog/WatchTables.
  void FollowCatalog();

  runtime::ServiceHost& host_;
  GitWorkerServiceOptions options_;
  std::unique_ptr<WorkDirLock> work_dir_lock_;  // held for the process's life
  std::unique_ptr<BranchRegistry> registry_;
  std::unique_ptr<TargetConfigBook> configs_;
  std::unique_ptr<catalogclient::StreamFollower<reverser::v1::TableUpdate>> tables_;
  std::unique_ptr<GitWorkerGrpcService> grpc_;
  std::unique_ptr<GitWorkerAdminGrpcService> admin_;
  // With membership.
  std::shared_ptr<kube::RestClient> kube_client_;
  std::unique_ptr<BranchOwnership> ownership_;
  std::optional<OwnershipActor> ownership_actor_;
  std::unique_ptr<membership::Replica> replica_;
  std::atomic<membership::Replica*> joined_{nullptr};  // replica_, read from CAF threads
  bool left_ = false;
};

}  // namespace reverser::gitworker
