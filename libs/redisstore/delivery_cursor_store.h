#pragma once

// The splicer's delivery cursor per (GitTarget, GVR, scope): `P:splice:v1:<targetUID>:<GR>:
// <scope>:acked` holds the last stream position whose effect is pushed to Git for that target,
// and the materialization incarnation it belongs to (lineage.h): `<rv>-<seq>@<incarnation>`
// (a bare `<rv>-<seq>` is a cursor of incarnation ""). Monotonic within an incarnation: an
// offer at or below the stored position of the same incarnation is ignored (compared as full
// `<rv>-<seq>` positions inside Redis, atomically), so late or duplicate acks can never move
// delivery backwards; an offer of another incarnation replaces it (the splicer resynced onto a
// rebuilt materialization). No TTL: it lives until the target or the claim goes away.

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
  std::string incarnation;        // and its incarnation
};

struct DeliveryCursor {
  core::StreamPosition position;
  std::string incarnation;  // of the materialization the position belongs to ("" if unknown)
};

class DeliveryCursorStore {
 public:
  DeliveryCursorStore(RedisConnection* redis, KeyPrefix prefix);

  // Stores `position` of `incarnation` if it is above the stored one of the same incarnation,
  // or the stored one is of another incarnation (or nothing/garbage is stored).
  absl::StatusOr<CursorOffer> Offer(absl::string_view target_uid,
                                    const core::GroupVersionResource& gvr,
                                    const core::WatchScope& scope, core::StreamPosition position,
                                    absl::string_view incarnation = "");
  // nullopt: never acked (splice from scratch). InvalidArgument for an unparseable value.
  absl::StatusOr<std::optional<DeliveryCursor>> ReadCursor(absl::string_view target_uid,
                                                           const core::GroupVersionResource& gvr,
                                                           const core::WatchScope& scope);
  // ReadCursor's position only.
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
