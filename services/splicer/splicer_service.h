#pragma once

// The splicer service, assembled: the gitworker delivery client, the TargetManager and the actor
// that owns it, the tables (followed from the catalog, or a static file), the readiness reporter
// and the admin gRPC surface. main.cc turns flags into SplicerServiceOptions.
//
// Threads: the delivery client's connection thread (writes; acks and refusals are read there),
// one reader per materialization (materialization_reader.h), the TargetManager actor's own
// (detached) thread, the tables follower's, the readiness reporter's, and the host's gRPC and CAF
// workers. Only the actor touches the TargetManager; the others post to it.

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "libs/catalogclient/stream_follower.h"
#include "libs/kube/rest_client.h"
#include "libs/membership/member_view.h"
#include "libs/membership/replica.h"
#include "libs/redisstore/body_cipher.h"
#include "libs/runtime/service_host.h"
#include "proto/reverser/v1/catalog.grpc.pb.h"
#include "services/splicer/delivery_client.h"
#include "services/splicer/splicer_grpc.h"
#include "services/splicer/target_manager.h"
#include "services/splicer/target_manager_actor.h"

namespace reverser::splicer {

struct SplicerServiceOptions {
  // Exactly one: the catalog to follow, or the tables to serve instead (a full update).
  std::string catalog_address;
  std::optional<reverser::v1::TableUpdate> static_tables;
  std::string gitworker_address = "127.0.0.1:9090";
  // --gitworker_tls_server_name: the name every gitworker's certificate is checked against
  // (routed replicas are dialed by pod IP); empty: the host dialed.
  std::string gitworker_tls_server_name;
  size_t max_in_flight = 1000;
  absl::Duration summary_interval = absl::Seconds(2);
  TargetManagerOptions manager;  // stream defaults (Redis, attribution, cursors), refusals
  // Keeps manager.stream_defaults.body_cipher alive.
  std::shared_ptr<const redisstore::BodyCipher> body_cipher;
  // --membership (replica.enabled): join as service "splicer" and splice only the GitTargets this
  // replica owns. --gitworker_membership: deliver to the gitworker replica owning each target's
  // branch (a MemberView of service "gitworker" in replica.namespace_) instead of
  // gitworker_address. Either needs the Kubernetes API (`kubeconfig`, else in-cluster).
  membership::ReplicaSettings replica;
  bool gitworker_membership = false;
  std::string kubeconfig;
  // Tests: the API client to use instead of one from `kubeconfig`, and reflector options.
  std::shared_ptr<kube::RestClient> kube_client;
  kube::ReflectorOptions reflector;
};

// A JSON reverser.v1.TableUpdate from `path`, as a full update.
absl::StatusOr<reverser::v1::TableUpdate> ReadTargetsFile(const std::string& path);

class SplicerService {
 public:
  SplicerService(runtime::ServiceHost& host, SplicerServiceOptions options);
  ~SplicerService();
  SplicerService(const SplicerService&) = delete;
  SplicerService& operator=(const SplicerService&) = delete;

  // Builds the parts and registers the admin service with the host (before host.Start()).
  void Register();
  // With --membership / --gitworker_membership: joins (writes this replica's Lease) and starts
  // the views, whose changes go to the actor. Before Start(); an error names what failed (the
  // Kubernetes API, RBAC, the namespace).
  absl::Status JoinMembership(const std::string& advertise_address = "");
  void Start();
  // Stops the tables, the views and the actor, then every target (streams, clients), then
  // leaves (the Lease deleted, so the other replicas take the targets over at once).
  void Stop();

 private:
  // Sends each target's readiness roll-up to the catalog when it changed.
  void ReportSummaries();
  // The one gitworker (--gitworker_address): acks, refusals, configs on every (re)connect.
  void ConnectSingleGitworker();
  // Asks the actor from an adapter thread (which may wait); nullopt when it did not answer.
  std::optional<AppliedReply> ApplyAndWait(const reverser::v1::TableUpdate& update);

  runtime::ServiceHost& host_;
  SplicerServiceOptions options_;
  std::unique_ptr<DeliveryClient> delivery_;  // null with --gitworker_membership
  std::shared_ptr<kube::RestClient> kube_;
  std::unique_ptr<membership::Replica> replica_;
  std::unique_ptr<membership::MemberView> gitworkers_;
  std::atomic<membership::Replica*> joined_{nullptr};  // replica_, for the actor's Held()
  std::unique_ptr<TargetManager> manager_;             // touched only by actor_ while it lives
  ManagerActor actor_;
  std::shared_ptr<reverser::v1::Catalog::Stub> catalog_stub_;
  std::unique_ptr<catalogclient::StreamFollower<reverser::v1::TableUpdate>> tables_;
  std::unique_ptr<SplicerAdminGrpcService> admin_;
  std::thread reporter_;
  std::atomic<bool> stopping_{false};
  bool stopped_ = false;
};

}  // namespace reverser::splicer
