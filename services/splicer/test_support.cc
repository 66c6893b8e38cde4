#include "services/splicer/test_support.h"

#include <utility>

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
  return pushed;
}

}  // namespace reverser::splicer::testutil
