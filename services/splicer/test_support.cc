#include "services/splicer/test_support.h"

#include <utility>

#include "absl/time/clock.h"
#include "nlohmann/json.hpp"

namespace reverser::splicer::testutil {

std::string ConfigMapJson(absl::string_view ns, absl::string_view name, absl::string_view value,
                          uint64_t rv, absl::string_view data_key) {
  const std::string n(name);
  return nlohmann::json({{"apiVersion", "v1"},
                         {"kind", "ConfigMap"},
                         {"metadata",
                          {{"name", n},
                           {"namespace", std::string(ns)},
                           {"uid", "uid-" + n},
                           {"resourceVersion", std::to_string(rv)}}},
                         {"data", {{std::string(data_key), std::string(value)}}}})
      .dump();
}

redisstore::StreamEntry ConfigMapEntry(absl::string_view ns, absl::string_view name,
                                       absl::string_view value, uint64_t rv,
                                       redisstore::ChangeOp op) {
  redisstore::StreamEntry entry;
  entry.op = op;
  entry.uid = "uid-" + std::string(name);
  entry.namespace_ = std::string(ns);
  entry.name = std::string(name);
  entry.resource_version = std::to_string(rv);
  entry.object_json = ConfigMapJson(ns, name, value, rv);
  return entry;
}

std::optional<reverser::v1::DeliveryFeedback> PushedAck(
    const reverser::v1::DeliveryMessage& message) {
  reverser::v1::DeliveryFeedback pushed;
  auto* ack = pushed.mutable_ack();
  if (message.has_resync()) {
    *ack->mutable_target() = message.resync().target();
    *ack->mutable_claim() = message.resync().claim();
    *ack->mutable_position() = message.resync().coverage_head();
  } else if (message.has_event()) {
    *ack->mutable_target() = message.event().target();
    *ack->mutable_claim() = message.event().claim();
    *ack->mutable_position() = message.event().position();
  } else {
    return std::nullopt;
  }
  ack->mutable_pushed_at()->set_seconds(absl::ToUnixSeconds(absl::Now()));
  return pushed;
}

grpc::Status AckingGitWorker::Deliver(
    grpc::ServerContext* /*context*/,
    grpc::ServerReaderWriter<reverser::v1::DeliveryFeedback, reverser::v1::DeliveryMessage>*
        stream) {
  reverser::v1::DeliveryMessage message;
  while (stream->Read(&message)) {
    received_++;
    if (message.has_resync()) {
      absl::MutexLock lock(&mu_);
      resyncs_.push_back(message.resync());
    }
    if (message.has_event()) {
      absl::MutexLock lock(&mu_);
      events_.push_back(message.event());
    }
    reverser::v1::DeliveryFeedback accepted;
    accepted.set_accepted_sequence(message.sequence());
    stream->Write(accepted);
    if (auto pushed = PushedAck(message)) stream->Write(*pushed);
  }
  return grpc::Status::OK;
}

std::vector<reverser::v1::ClusterSnapshot> AckingGitWorker::Resyncs() const {
  absl::MutexLock lock(&mu_);
  return resyncs_;
}

std::vector<reverser::v1::LiveEvent> AckingGitWorker::Events() const {
  absl::MutexLock lock(&mu_);
  return events_;
}

reverser::v1::WatchedTypeTable ConfigMapTable(const std::string& uid, const std::string& ns) {
  reverser::v1::WatchedTypeTable table;
  table.mutable_target()->set_namespace_(ns);
  table.mutable_target()->set_name("mirror-" + uid);
  table.mutable_target()->set_uid(uid);
  auto* type = table.add_types();
  type->mutable_type()->mutable_gvr()->set_version("v1");
  type->mutable_type()->mutable_gvr()->set_resource("configmaps");
  type->mutable_type()->set_scope(reverser::v1::RESOURCE_SCOPE_NAMESPACED);
  (*type->mutable_namespaces())[ns].set_all(true);
  return table;
}

reverser::v1::TableUpdate FullConfigMapTables(uint64_t generation,
                                              const std::vector<std::string>& uids,
                                              const std::string& ns) {
  reverser::v1::TableUpdate update;
  update.set_generation(generation);
  update.set_full(true);
  for (const auto& uid : uids) *update.add_upserted() = ConfigMapTable(uid, ns);
  return update;
}

absl::Status SeedTeamConfigMapCheckpoint(redisstore::RedisConnection* conn) {
  redisstore::MaterializationStore store(conn, redisstore::KeyPrefix::Default(),
                                         {"", "v1", "configmaps"},
                                         core::WatchScope::Namespace("team"));
  return store
      .ReplaceCheckpoint({{"team/a", ConfigMapJson("team", "a", "1", 5)}},
                         core::StreamPosition::EndOf(5))
      .status();
}

}  // namespace reverser::splicer::testutil
