#pragma once

// The audit intake's stream writer (`--intake=audit`): routes each accepted event's changes
// (audit_changes.h) to the claimed (type, scope) materializations and appends them through
// MaterializationStore, whose Lua append keeps the stream's order rules (an entry not above the
// top is diverted and counted). Unclaimed types are ignored here (their facts are still
// recorded). A claimed change the stream cannot take (no body, a scale write, a write through
// another version, an entry diverted for its order) asks the claim's worker to LIST early.
// One Redis connection serves the webhook's HTTP threads in turn.
//
// A delete answered with a Status has neither body nor resourceVersion: it is attached to the
// stream top, with the object's last materialized body (the splicer needs one to place the
// removal), and dropped when the materialization already has it deleted or holds a different
// incarnation (uid) under that name — a late delete must never remove a re-created object.

#include <memory>
#include <mutex>
#include <optional>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "libs/redisstore/keys.h"
#include "libs/redisstore/materialization_store.h"
#include "libs/redisstore/redis_connection.h"
#include "libs/runtime/metrics.h"
#include "services/materializer/audit_webhook.h"
#include "services/materializer/claim_registry.h"

namespace reverser::materializer {

class AuditStreamWriter final : public StreamSink {
 public:
  // `body_cipher` seals the bodies of sensitive claims (may be null: their writes then fail).
  AuditStreamWriter(redisstore::RedisOptions options, redisstore::KeyPrefix prefix,
                    ClaimRegistry* claims, runtime::MetricsRegistry* metrics,
                    const redisstore::BodyCipher* body_cipher = nullptr);
  absl::Status Append(const std::vector<const audit::AuditEvent*>& accepted_events) override;

 private:
  // The last stream entry or checkpoint item for `identity`: its body, or nullopt when absent
  // (never materialized, or its latest entry is a delete).
  struct LastKnown {
    bool deleted = false;  // the latest entry for it is a DELETED
    std::optional<std::string> body;
  };
  absl::StatusOr<LastKnown> FindLastKnown(redisstore::MaterializationStore& store,
                                          const std::string& identity)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Count(const core::GroupVersionResource& gvr, absl::string_view outcome);
  redisstore::MaterializationStore StoreFor(const ClaimKey& claim,
                                            const ClaimRegistry::Reader& claims)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  redisstore::RedisOptions options_;
  redisstore::KeyPrefix prefix_;
  ClaimRegistry* claims_;
  runtime::MetricsRegistry* metrics_;
  const redisstore::BodyCipher* body_cipher_;
  absl::Mutex mu_;
  // Connected lazily.
  std::unique_ptr<redisstore::RedisConnection> redis_ ABSL_GUARDED_BY(mu_);
};

}  // namespace reverser::materializer
