#pragma once

// Test inputs shared by the splicer's tests (and its bench): ConfigMaps as the materializer
// stores them, and what a gitworker answers once it has pushed a delivery.

#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "libs/redisstore/materialization_store.h"
#include "proto/reverser/v1/catalog.pb.h"
#include "proto/reverser/v1/gitworker.grpc.pb.h"

namespace reverser::splicer::testutil {

// A ConfigMap's JSON with uid `uid-<name>` and `data: {<data_key>: <value>}`.
std::string ConfigMapJson(absl::string_view ns, absl::string_view name, absl::string_view value,
                          uint64_t rv, absl::string_view data_key = "k");

// A stream entry carrying ConfigMapJson (deletes too: the materializer stores the deleted object).
redisstore::StreamEntry ConfigMapEntry(absl::string_view ns, absl::string_view name,
                                       absl::string_view value, uint64_t rv,
                                       redisstore::ChangeOp op = redisstore::ChangeOp::kModified);

// The feedback a gitworker sends once `message` (a resync or an event) is pushed: an ack of its
// target, claim and position (a resync's coverage head). nullopt for a target config.
std::optional<reverser::v1::DeliveryFeedback> PushedAck(
    const reverser::v1::DeliveryMessage& message);

// A gitworker peer that accepts every delivery and acks it as pushed the moment it arrives.
class AckingGitWorker final : public reverser::v1::GitWorker::Service {
 public:
  grpc::Status Deliver(grpc::ServerContext* context,
                       grpc::ServerReaderWriter<reverser::v1::DeliveryFeedback,
                                                reverser::v1::DeliveryMessage>* stream) override;
  // Every snapshot (resync) received so far, in arrival order.
  std::vector<reverser::v1::ClusterSnapshot> Resyncs() const;
  // Every live event received so far, in arrival order.
  std::vector<reverser::v1::LiveEvent> Events() const;
  // How many messages arrived, target configs included.
  int Received() const { return received_.load(); }

 private:
  std::atomic<int> received_{0};
  mutable absl::Mutex mu_;
  std::vector<reverser::v1::ClusterSnapshot> resyncs_ ABSL_GUARDED_BY(mu_);
  std::vector<reverser::v1::LiveEvent> events_ ABSL_GUARDED_BY(mu_);
};

// The table of GitTarget `uid` (namespace `ns`, name `mirror-<uid>`) following every operation
// on ConfigMaps in `ns`.
reverser::v1::WatchedTypeTable ConfigMapTable(const std::string& uid, const std::string& ns);
// A full table update of `generation` listing ConfigMapTable(uid, ns) for each of `uids`.
reverser::v1::TableUpdate FullConfigMapTables(uint64_t generation,
                                              const std::vector<std::string>& uids,
                                              const std::string& ns);

// Writes the checkpoint the splicer tests start from: ConfigMaps in namespace `team`, holding
// team/a (value "1", resourceVersion 5), at position EndOf(5).
absl::Status SeedTeamConfigMapCheckpoint(redisstore::RedisConnection* conn);

}  // namespace reverser::splicer::testutil
