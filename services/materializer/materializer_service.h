#pragma once

// The materializer service assembled on a runtime::ServiceHost: the Redis settings, the
// Kubernetes client, the supervisor actor and its worker factory, the claim source (the
// catalog's WatchClaims stream, or --static_claims), the audit webhook and the admin gRPC
// service.
//
//   MaterializerService service(host, options);
//   RETURN_IF_ERROR(service.Setup());  // before the host listens: checks, gRPC, components
//   RETURN_IF_ERROR(service.Start());  // after: the webhook listens, the claims follow
//   ...
//   service.Stop();                    // before the host shuts down
//
// Readiness components: `claims` (a claim set was applied; its detail counts the
// materializations) and, with the webhook, `audit_webhook` (listening: the API server can
// deliver).

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "libs/audit/audit_event.h"
#include "libs/catalogclient/stream_follower.h"
#include "libs/core/json_depth.h"
#include "libs/kube/rest_client.h"
#include "libs/membership/replica.h"
#include "libs/redisstore/body_cipher.h"
#include "libs/runtime/service_host.h"
#include "proto/reverser/v1/catalog.pb.h"
#include "services/materializer/audit_stream_writer.h"
#include "services/materializer/audit_webhook.h"
#include "services/materializer/claim_registry.h"
#include "services/materializer/materializer_grpc.h"
#include "services/materializer/redis_fact_sink.h"
#include "services/materializer/supervisor_protocol.h"

namespace reverser::materializer {

// The service's own settings (main.cc fills them from its flags; the shared Redis and catalog
// flags are read by their libraries). Checked by Setup.
struct MaterializerServiceOptions {
  std::string kubeconfig;     // empty: $KUBECONFIG, then in-cluster
  std::string static_claims;  // instead of the catalog
  std::string intake = "watch";
  int64_t compact_after_entries = 10000;
  bool use_watch_list = true;
  absl::Duration audit_intake_relist_interval = absl::Minutes(5);
  absl::Duration audit_intake_heal_settle = absl::Seconds(45);
  absl::Duration redis_state_check_interval = absl::Seconds(5);
  bool audit_webhook = true;
  int audit_port = 9444;
  std::string audit_tls_cert;
  std::string audit_tls_key;
  std::string audit_client_ca;
  std::vector<std::string> audit_client_names = {std::string(kDefaultAuditClientName)};
  bool audit_insecure = false;
  int64_t audit_max_body_bytes = static_cast<int64_t>(kDefaultMaxBodyBytes);
  int64_t audit_max_event_bytes = static_cast<int64_t>(audit::kDefaultMaxEventBytes);
  absl::Duration audit_read_timeout = absl::Seconds(15);
  absl::Duration audit_write_timeout = absl::Seconds(30);
  absl::Duration audit_idle_timeout = absl::Seconds(5);
  // The validating admission webhook (CommitRequest command authors), on its own port.
  bool admission_webhook = false;
  int admission_port = 9445;
  std::string admission_tls_cert;
  std::string admission_tls_key;
  bool admission_insecure = false;
  // Also record who asked for each change of a followed type (attribution from admission, for
  // clusters without audit access); needs admission_webhook.
  bool admission_attribution = false;
  int64_t json_max_depth = core::kApiObjectMaxDepth;
  absl::Duration author_fact_ttl = absl::Minutes(15);
  absl::Duration fact_index_size_interval = absl::Seconds(10);
};

class MaterializerService final {
 public:
  MaterializerService(runtime::ServiceHost& host, MaterializerServiceOptions options);
  ~MaterializerService();

  // Checks the settings (InvalidArgument naming the flag), builds the parts and registers the
  // admin service and readiness components. Connects to nothing but the kubeconfig's files.
  absl::Status Setup();
  // Starts the audit webhook and the claim stream.
  absl::Status Start();
  // Stops the claim stream, the webhook and the supervisor (which stops every worker); with
  // --membership, waits for the workers to stop, then leaves (the Lease is deleted, so the
  // other replicas take the units over at once).
  void Stop();

  // Whether this replica's Lease is held (--membership); shared with every worker's write gate.
  struct ReplicaGate {
    mutable std::mutex mu;
    membership::Replica* replica = nullptr;  // null: not joined (or left): no writes
    bool Held() const;
  };

 private:
  runtime::ServiceHost& host_;
  MaterializerServiceOptions options_;
  std::shared_ptr<kube::RestClient> client_;
  std::shared_ptr<const redisstore::BodyCipher> body_cipher_;
  ClaimRegistry claims_registry_;
  SupervisorActor supervisor_;
  std::unique_ptr<catalogclient::StreamFollower<reverser::v1::ClaimSet>> claims_;
  std::unique_ptr<RedisFactSink> fact_sink_;
  std::unique_ptr<AuditStreamWriter> stream_writer_;
  std::unique_ptr<AuditIntake> intake_;
  std::unique_ptr<AuditWebhookServer> webhook_;
  std::unique_ptr<AdmissionReviewer> reviewer_;
  std::unique_ptr<AdmissionWebhookServer> admission_;
  std::unique_ptr<MaterializerAdminGrpcService> admin_;
  membership::ReplicaSettings replica_settings_;
  std::shared_ptr<ReplicaGate> replica_gate_ = std::make_shared<ReplicaGate>();
  std::unique_ptr<membership::Replica> replica_;
};

}  // namespace reverser::materializer
