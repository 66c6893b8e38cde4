#pragma once

// The splicer's delivery cursor per (GitTarget, GVR, scope): `P:splice:v1:<targetUID>:<GR>:
// <scope>:acked` holds the last stream position whose effect is pushed to Git for that target.
// Monotonic: an offer at or below the stored position is ignored (compared as full
// `<rv>-<seq>` positions inside Redis, atomically), so late or duplicate acks can never move
// delivery backwards. No TTL: it lives until the target or the claim goes away.

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "libs/core/stream_position.h"
#include "libs/core/types.h"
#include "libs/redisstore/keys.h"
#include "libs/redisstore/redis_connection.h"

namespace reverser::redisstore {

struct CursorOffer {
  bool advanced = false;          // false: the stored position was already at or above
  core::StreamPosition position;  // the stored position after the offer
};

class DeliveryCursorStore {
 public:
  DeliveryCursorStore(RedisConnection* redis, KeyPrefix prefix);

  // Stores `position` if it is above the stored one (or nothing/garbage is stored).
  absl::StatusOr<CursorOffer> Offer(absl::string_view target_uid,
                                    const core::GroupVersionResource& gvr,
                                    const core::WatchScope& scope, core::StreamPosition position);
  // nullopt: never acked (splice from scratch). InvalidArgument for an unparseable value.
  absl::StatusOr<std::optional<core::StreamPosition>> Read(absl::string_view target_uid,
                                                           const core::GroupVersionResource& gvr,
                                                           const core::WatchScope& scope);
  absl::Status Delete(absl::string_view target_uid, const core::GroupVersionResource& gvr,
                      const core::WatchScope& scope);
  // Deletes every cursor of one target (GitTarget deleted: a recreated target, which has a new
  // UID anyway, must not inherit). Returns how many were deleted.
  absl::StatusOr<int64_t> DeleteTarget(absl::string_view target_uid);

 private:
  RedisConnection* redis_;
  KeyPrefix prefix_;
};

}  // namespace reverser::redisstore
