#include "libs/redisstore/delivery_cursor_store.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "libs/core/status.h"
#include "libs/redisstore/lua_positions.h"

namespace reverser::redisstore {
namespace {

// KEYS: acked. ARGV: offered position. Returns {1|0, stored position}.
const LuaScript& OfferScript() {
  static const LuaScript* script = new LuaScript(absl::StrCat(internal::kLuaPositionHelpers, R"lua(
local cur = redis.call('GET', KEYS[1])
local valid = cur and (string.match(cur, '^%d+%-%d+$') or string.match(cur, '^%d+$'))
if valid and cmpid(ARGV[1], cur) <= 0 then return {0, cur} end
redis.call('SET', KEYS[1], ARGV[1])
return {1, ARGV[1]}
)lua"));
  return *script;
}

}  // namespace

DeliveryCursorStore::DeliveryCursorStore(RedisConnection* redis, KeyPrefix prefix)
    : redis_(redis), prefix_(std::move(prefix)) {}

absl::StatusOr<CursorOffer> DeliveryCursorStore::Offer(absl::string_view target_uid,
                                                       const core::GroupVersionResource& gvr,
                                                       const core::WatchScope& scope,
                                                       core::StreamPosition position) {
  if (target_uid.empty()) return absl::InvalidArgumentError("delivery cursor: empty target uid");
  ASSIGN_OR_RETURN(RedisReply reply,
                   redis_->Eval(OfferScript(), {SpliceAckedKey(prefix_, target_uid, gvr, scope)},
                                {position.ToString()}));
  if (!reply.IsArray() || reply.elements().size() != 2) {
    return absl::InternalError(
        absl::StrCat("cursor offer: unexpected reply ", reply.DebugString()));
  }
  CursorOffer offer;
  ASSIGN_OR_RETURN(int64_t advanced, reply.elements()[0].AsInteger());
  offer.advanced = advanced == 1;
  ASSIGN_OR_RETURN(std::string stored, reply.elements()[1].AsString());
  ASSIGN_OR_RETURN(offer.position, core::StreamPosition::Parse(stored));
  return offer;
}

absl::StatusOr<std::optional<core::StreamPosition>> DeliveryCursorStore::Read(
    absl::string_view target_uid, const core::GroupVersionResource& gvr,
    const core::WatchScope& scope) {
  const std::string key = SpliceAckedKey(prefix_, target_uid, gvr, scope);
  ASSIGN_OR_RETURN(RedisReply reply, redis_->Command({"GET", key}));
  ASSIGN_OR_RETURN(std::optional<std::string> text, reply.AsOptionalString());
  if (!text) return std::optional<core::StreamPosition>();
  auto position = core::StreamPosition::Parse(*text);
  if (!position.ok()) return core::Annotate(position.status(), key);
  return std::optional<core::StreamPosition>(*position);
}

absl::Status DeliveryCursorStore::Delete(absl::string_view target_uid,
                                         const core::GroupVersionResource& gvr,
                                         const core::WatchScope& scope) {
  return redis_->Command({"DEL", SpliceAckedKey(prefix_, target_uid, gvr, scope)}).status();
}

absl::StatusOr<int64_t> DeliveryCursorStore::DeleteTarget(absl::string_view target_uid) {
  if (target_uid.empty()) return absl::InvalidArgumentError("delivery cursor: empty target uid");
  const std::string pattern = SpliceAckedPattern(prefix_, target_uid);
  int64_t deleted = 0;
  std::string cursor = "0";
  do {
    ASSIGN_OR_RETURN(RedisReply reply,
                     redis_->Command({"SCAN", cursor, "MATCH", pattern, "COUNT", "100"}));
    if (!reply.IsArray() || reply.elements().size() != 2) {
      return absl::InternalError(absl::StrCat("SCAN: unexpected reply ", reply.DebugString()));
    }
    ASSIGN_OR_RETURN(cursor, reply.elements()[0].AsString());
    ASSIGN_OR_RETURN(std::vector<std::string> keys, reply.elements()[1].AsStringArray());
    if (keys.empty()) continue;
    RedisCommand del = {"DEL"};
    del.insert(del.end(), keys.begin(), keys.end());
    ASSIGN_OR_RETURN(RedisReply removed, redis_->Command(del));
    deleted += removed.integer();
  } while (cursor != "0");
  return deleted;
}

}  // namespace reverser::redisstore
