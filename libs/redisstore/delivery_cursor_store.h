#pragma once

// The splicer's delivery cursor per (GitTarget, GVR, scope): `P:splice:v1:<targetUID>:<GR>:
// <scope>:acked` holds the last stream position whose effect is pushed to Git for that target,
// and the materialization incarnation it belongs to (lineage.h): `<rv>-<seq>@<incarnation>`
// (a bare `<rv>-<seq>` is a cursor of incarnation ""). Monotonic within an incarnation: an
// offer at or below the stored position of the same incarnation is ignored (compared as full
// `<rv>-<seq>` positions inside Redis, atomically), so late or duplicate acks can never move
// delivery backwards; an offer of another incarnation replaces it (the splicer resynced onto a
// rebuilt materialization).
//
// TTL (`kDefaultDeliveryCursorTtl`, the splicer's --delivery_cursor_ttl): set again by every
// offer, advancing or not, and a running stream offers its cursor again at least every
// --delivery_cursor_refresh, so the cursor of a GitTarget that exists stays alive however idle.
// It expires only when no splicer ran the stream for the whole TTL (a very long outage, or a
// target deleted while no splicer saw it); then the stream splices again from the checkpoint,
// which loses nothing. The splicer deletes a removed GitTarget's cursors (DeleteTarget).
//
// With the cursor, an offer writes the reference's per-watch resume cursor
// (`WatchCursorKey`, docs/behaviour.md, Redis key schema of the reference): the stored
// position's resourceVersion, with the reference's 1 h TTL, for each watch scope the target has
// on the type — in the same script, so it costs no round trip. gitops-reverser taking over a
// GitTarget resumes its watch from there instead of replaying.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "libs/core/stream_position.h"
#include "libs/core/types.h"
#include "libs/redisstore/keys.h"
#include "libs/redisstore/ownership_store.h"
#include "libs/redisstore/redis_connection.h"

namespace reverser::redisstore {

// Longer than any sane outage (it expires only when nothing ran the stream for a week), and the
// cost of expiry is one splice, not a loss.
inline constexpr absl::Duration kDefaultDeliveryCursorTtl = absl::Hours(24 * 7);
// The reference's watch cursor TTL (`SET … EX 3600`, refreshed with every write).
inline constexpr absl::Duration kWatchCursorTtl = absl::Hours(1);

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
  // With `fence` (the splicer's replica owning the GitTarget: ownership_store.h), every write is
  // made only while the fence is current: Offer and Delete check it inside the same script,
  // DeleteTarget right before it deletes; a stale fence returns IsFenced and writes nothing.
  DeliveryCursorStore(RedisConnection* redis, KeyPrefix prefix,
                      absl::Duration ttl = kDefaultDeliveryCursorTtl,
                      std::optional<Fence> fence = std::nullopt);

  // Stores `position` of `incarnation` if it is above the stored one of the same incarnation,
  // or the stored one is of another incarnation (or nothing/garbage is stored). Either way the
  // stored cursor gets the TTL again (offering the stored position refreshes it), and each of
  // `watch_cursor_scopes` gets the reference's watch cursor with the stored position's RV.
  absl::StatusOr<CursorOffer> Offer(absl::string_view target_uid,
                                    const core::GroupVersionResource& gvr,
                                    const core::WatchScope& scope, core::StreamPosition position,
                                    absl::string_view incarnation = "",
                                    const std::vector<core::WatchScope>& watch_cursor_scopes = {});
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
  // Deletes every cursor of one target, the reference's watch cursors too (the GitTarget is
  // gone: nothing resumes from them, and a recreated target has a new UID anyway). SCANs the
  // keyspace. Returns how many keys were deleted.
  absl::StatusOr<int64_t> DeleteTarget(absl::string_view target_uid);

 private:
  absl::StatusOr<int64_t> DeleteMatching(const std::string& pattern);

  RedisConnection* redis_;
  KeyPrefix prefix_;
  std::string ttl_millis_;
  std::optional<Fence> fence_;
};

}  // namespace reverser::redisstore
