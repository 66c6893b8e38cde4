#pragma once

// The catalog service assembled: the catalog actor, discovery, watches, the status and probe
// workers, the feeds and the two gRPC services, registered on a runtime::ServiceHost.
//
//   CatalogService catalog(host, options);
//   catalog.Register();   // before host.Start(): gRPC services and readiness components
//   host.Start();
//   catalog.Start();      // actor, discovery loop, watches, the CommitRequest controller, the
//                         // attribution webhook's rules
//   ...
//   catalog.Stop();       // before host.Shutdown()
//
// Readiness components: `discovery` (the last pass succeeded), `watches` (every watched kind
// listed and its watch healthy), `catalog` (primed: claims and tables are being published).

#include <map>
#include <memory>
#include <optional>

#include "libs/core/clock.h"
#include "libs/kube/rest_client.h"
#include "libs/membership/member_view.h"
#include "libs/runtime/service_host.h"
#include "services/catalog/attribution_webhook.h"
#include "services/catalog/catalog_actor.h"
#include "services/catalog/catalog_grpc.h"
#include "services/catalog/catalog_metrics.h"
#include "services/catalog/commit_request_clients.h"
#include "services/catalog/commit_request_controller.h"
#include "services/catalog/encryption_secret.h"
#include "services/catalog/feeds.h"
#include "services/catalog/kube_io.h"
#include "services/catalog/provider_probe.h"

namespace reverser::catalog {

struct CatalogServiceOptions {
  std::shared_ptr<kube::RestClient> client;
  const core::Clock* clock = &core::Clock::Real();
  CatalogStateOptions state;
  absl::Duration discovery_period = absl::Seconds(30);
  // How a GitProvider's remote is checked; default: CheckReachable with a 5 s timeout.
  ReachabilityCheck reachable;
  // Key material for generated age keys; default: the system's.
  sops::crypto::Random* random = nullptr;
  // CommitRequests are handled only with an attacher (the gitworker's AttachCommit); without
  // an author source every request is attributed to the committer.
  std::shared_ptr<CommitAttacher> commit_attacher;
  std::shared_ptr<CommandAuthorSource> command_authors;
  // --gitworker_membership: instead of commit_attacher, each AttachCommit goes to the gitworker
  // replica that owns the target's branch (RoutedCommitAttacher), seen through a MemberView of
  // the gitworkers' Leases (service "gitworker" in `namespace_`, read with `client`). The
  // catalog has no membership of its own.
  struct GitworkerRouting {
    bool enabled = false;
    std::string namespace_;
    membership::MembershipTiming timing;
    kube::ReflectorOptions reflector;
    RoutedCommitAttacherOptions attacher;
  };
  GitworkerRouting gitworker_routing;
  // Non-empty configuration: keep that ValidatingWebhookConfiguration's rules equal to the
  // followed types (attribution_webhook.h); empty: off.
  AttributionWebhookOptions attribution_webhook;
};

class CatalogService final : public CatalogBackend, private CatalogOutputs {
 public:
  CatalogService(runtime::ServiceHost& host, CatalogServiceOptions options);
  ~CatalogService() override;

  void Register();
  void Start();
  void Stop();

  // Re-judges registry deadlines now (tests driving a FakeClock).
  void Tick();

  // CatalogBackend.
  ClaimFeed& claim_feed() override { return claims_; }
  TableFeed& table_feed() override { return tables_; }
  TypeFeed& type_feed() override { return types_; }
  void ReportStreamSummary(reverser::v1::StreamSummary summary) override;
  void Rescan(RescanCallback done) override;

 private:
  // CatalogOutputs (actor thread).
  void Publish(const CatalogState& state, const CatalogChanges& changes) override;
  void ScanApplied(const CatalogState& state, ScanInput& scan) override;
  void WatchHealth(const CatalogState& state, ObjectKind kind, const absl::Status& status) override;

  void WriteStatus(const StatusWrite& write);
  void ReadEncryptionSecretFor(const EncryptionSecretRequest& request);
  void UpdateWatchComponent(const CatalogState& state);

  runtime::ServiceHost& host_;
  CatalogServiceOptions options_;
  ClaimFeed claims_;
  TableFeed tables_;
  TypeFeed types_;
  CatalogGrpcService grpc_;
  CatalogAdminGrpcService admin_;
  caf::actor actor_;
  std::unique_ptr<ActorInbox> inbox_;
  std::unique_ptr<DiscoveryLoop> discovery_;
  std::unique_ptr<ObjectWatches> watches_;
  std::unique_ptr<membership::MemberView> gitworkers_;  // with gitworker_routing
  std::shared_ptr<CommitAttacher> routed_attacher_;
  std::unique_ptr<CommitRequestController> commit_requests_;
  std::unique_ptr<AttributionWebhookSync> attribution_webhook_;
  TaskQueue status_queue_{"status"};
  TaskQueue probe_queue_{"probe"};
  TaskQueue encryption_queue_{"encryption"};
  // The last encryption failure logged per GitTarget (encryption queue thread only): each
  // failure is logged once, not on every re-read.
  std::map<std::string, std::string> encryption_failure_logged_;
  std::map<ObjectKind, absl::Status> watch_health_;  // actor thread only
  CatalogMetrics metrics_;                           // actor thread only
  uint64_t refreshed_generation_ = 0;  // catalog generation after the last pass (actor thread)
  // What priming waited for at the last publish; nullopt before the first (actor thread).
  std::optional<std::string> last_waiting_for_;
  bool started_ = false;
};

}  // namespace reverser::catalog
