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
  size_t max_in_flight = 1000;
  absl::Duration summary_interval = absl::Seconds(2);
  TargetManagerOptions manager;  // stream defaults (Redis, attribution, cursors), refusals
  // Keeps manager.stream_defaults.body_cipher alive.
  std::shared_ptr<const redisstore::BodyCipher> body_cipher;
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
  void Start();
  void Stop();

 private:
  // Sends each target's readiness roll-up to the catalog when it changed.
  void ReportSummaries();
  // Asks the actor from an adapter thread (which may wait); nullopt when it did not answer.
  std::optional<AppliedReply> ApplyAndWait(const reverser::v1::TableUpdate& update);

  runtime::ServiceHost& host_;
  SplicerServiceOptions options_;
  std::unique_ptr<DeliveryClient> delivery_;
  std::unique_ptr<TargetManager> manager_;  // touched only by actor_ while it lives
  TargetManagerActor actor_;
  std::shared_ptr<reverser::v1::Catalog::Stub> catalog_stub_;
  std::unique_ptr<catalogclient::StreamFollower<reverser::v1::TableUpdate>> tables_;
  std::unique_ptr<SplicerAdminGrpcService> admin_;
  std::thread reporter_;
  std::atomic<bool> stopping_{false};
  bool stopped_ = false;
};

}  // namespace reverser::splicer
