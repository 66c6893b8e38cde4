#include "libs/redisstore/delivery_cursor_store.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "libs/core/status.h"
#include "libs/redisstore/lua_positions.h"

namespace reverser::redisstore {
namespace {

// KEYS: acked, then the reference watch cursors to write. ARGV: offered position, its
// incarnation, the cursor TTL (ms), the watch cursor TTL (s). Returns {1|0, stored value}.
// Fenced (ownership_store.h): KEYS start with the unit's epoch and owner keys and ARGV[5], ARGV[6]
// are the fence's epoch and owner; a stale fence returns {-1, current epoch, current owner} and
// writes nothing.
constexpr absl::string_view kOfferBody = R"lua(
local cur = redis.call('GET', KEYS[o + 1])
local value = nil
if cur then
  local at = string.find(cur, '@', 1, true)
  local pos, inc = cur, ''
  if at then pos, inc = string.sub(cur, 1, at - 1), string.sub(cur, at + 1) end
  local valid = string.match(pos, '^%d+%-%d+$') or string.match(pos, '^%d+$')
  if valid and inc == ARGV[2] and cmpid(ARGV[1], pos) <= 0 then value = cur end
end
local advanced = 0
if not value then
  advanced = 1
  value = ARGV[1]
  if ARGV[2] ~= '' then value = value .. '@' .. ARGV[2] end
end
redis.call('SET', KEYS[o + 1], value, 'PX', ARGV[3])
local rv = string.match(value, '^(%d+)')
for i = o + 2, #KEYS do redis.call('SET', KEYS[i], rv, 'EX', ARGV[4]) end
return {advanced, value}
)lua";

const LuaScript& OfferScript() {
  static const LuaScript* script =
      new LuaScript(absl::StrCat(internal::kLuaPositionHelpers, "local o = 0\n", kOfferBody));
  return *script;
}

const LuaScript& FencedOfferScript() {
  static const LuaScript* script = new LuaScript(absl::StrCat(internal::kLuaPositionHelpers, R"lua(
local epoch = redis.call('GET', KEYS[1])
local owner = redis.call('GET', KEYS[2]) or ''
if not epoch or epoch ~= ARGV[5] or owner ~= ARGV[6] then return {-1, epoch or '0', owner} end
local o = 2
)lua",
                                                              kOfferBody));
  return *script;
}

// `<rv>-<seq>` or `<rv>-<seq>@<incarnation>`.
absl::StatusOr<DeliveryCursor> ParseCursor(absl::string_view text) {
  DeliveryCursor cursor;
  absl::string_view position = text;
  if (size_t at = text.find('@'); at != absl::string_view::npos) {
    position = text.substr(0, at);
    cursor.incarnation = std::string(text.substr(at + 1));
  }
  ASSIGN_OR_RETURN(cursor.position, core::StreamPosition::Parse(position));
  return cursor;
}

}  // namespace

DeliveryCursorStore::DeliveryCursorStore(RedisConnection* redis, KeyPrefix prefix,
                                         absl::Duration ttl, std::optional<Fence> fence)
    : redis_(redis),
      prefix_(std::move(prefix)),
      ttl_millis_(absl::StrCat(std::max<int64_t>(1, absl::ToInt64Milliseconds(ttl)))),
      fence_(std::move(fence)) {}

absl::StatusOr<CursorOffer> DeliveryCursorStore::Offer(
    absl::string_view target_uid, const core::GroupVersionResource& gvr,
    const core::WatchScope& scope, core::StreamPosition position, absl::string_view incarnation,
    const std::vector<core::WatchScope>& watch_cursor_scopes) {
  if (target_uid.empty()) return absl::InvalidArgumentError("delivery cursor: empty target uid");
  if (incarnation.find('@') != absl::string_view::npos) {
    return absl::InvalidArgumentError("delivery cursor: '@' in an incarnation");
  }
  std::vector<std::string> keys;
  if (fence_) {
    const OwnershipKeys own = OwnershipKeys::For(prefix_, fence_->unit);
    keys = {own.epoch, own.owner};
  }
  keys.push_back(SpliceAckedKey(prefix_, target_uid, gvr, scope));
  for (const core::WatchScope& watch : watch_cursor_scopes) {
    keys.push_back(WatchCursorKey(prefix_, target_uid, gvr, watch));
  }
  static const std::string kWatchCursorTtlSeconds =
      absl::StrCat(absl::ToInt64Seconds(kWatchCursorTtl));
  std::vector<std::string> args = {position.ToString(), std::string(incarnation), ttl_millis_,
                                   kWatchCursorTtlSeconds};
  if (fence_) {
    args.push_back(absl::StrCat(fence_->epoch));
    args.push_back(fence_->owner);
  }
  ASSIGN_OR_RETURN(RedisReply reply,
                   redis_->Eval(fence_ ? FencedOfferScript() : OfferScript(), keys, args));
  if (fence_ && reply.IsArray() && reply.elements().size() == 3 &&
      reply.elements()[0].type() == RedisReply::Type::kInteger &&
      reply.elements()[0].integer() == -1) {
    ASSIGN_OR_RETURN(std::string epoch, reply.elements()[1].AsString());
    ASSIGN_OR_RETURN(std::string owner, reply.elements()[2].AsString());
    return FencedError(*fence_, epoch, owner);
  }
  if (!reply.IsArray() || reply.elements().size() != 2) {
    return absl::InternalError(
        absl::StrCat("cursor offer: unexpected reply ", reply.DebugString()));
  }
  CursorOffer offer;
  ASSIGN_OR_RETURN(int64_t advanced, reply.elements()[0].AsInteger());
  offer.advanced = advanced == 1;
  ASSIGN_OR_RETURN(std::string stored, reply.elements()[1].AsString());
  ASSIGN_OR_RETURN(DeliveryCursor cursor, ParseCursor(stored));
  offer.position = cursor.position;
  offer.incarnation = std::move(cursor.incarnation);
  return offer;
}

absl::StatusOr<std::optional<DeliveryCursor>> DeliveryCursorStore::ReadCursor(
    absl::string_view target_uid, const core::GroupVersionResource& gvr,
    const core::WatchScope& scope) {
  const std::string key = SpliceAckedKey(prefix_, target_uid, gvr, scope);
  ASSIGN_OR_RETURN(RedisReply reply, redis_->Command({"GET", key}));
  ASSIGN_OR_RETURN(std::optional<std::string> text, reply.AsOptionalString());
  if (!text) return std::optional<DeliveryCursor>();
  auto cursor = ParseCursor(*text);
  if (!cursor.ok()) return core::Annotate(cursor.status(), key);
  return std::optional<DeliveryCursor>(std::move(*cursor));
}

absl::StatusOr<std::optional<core::StreamPosition>> DeliveryCursorStore::Read(
    absl::string_view target_uid, const core::GroupVersionResource& gvr,
    const core::WatchScope& scope) {
  ASSIGN_OR_RETURN(std::optional<DeliveryCursor> cursor, ReadCursor(target_uid, gvr, scope));
  if (!cursor) return std::optional<core::StreamPosition>();
  return std::optional<core::StreamPosition>(cursor->position);
}

absl::Status DeliveryCursorStore::Delete(absl::string_view target_uid,
                                         const core::GroupVersionResource& gvr,
                                         const core::WatchScope& scope) {
  const std::string key = SpliceAckedKey(prefix_, target_uid, gvr, scope);
  if (fence_) {
    OwnershipStore fenced(redis_, prefix_);
    return fenced.FencedWrite(*fence_, {{key}, {{"DEL", key}}}).status();
  }
  return redis_->Command({"DEL", key}).status();
}

absl::StatusOr<int64_t> DeliveryCursorStore::DeleteTarget(absl::string_view target_uid) {
  if (target_uid.empty()) return absl::InvalidArgumentError("delivery cursor: empty target uid");
  if (fence_) {
    OwnershipStore fenced(redis_, prefix_);
    RETURN_IF_ERROR(fenced.Check(*fence_));
  }
  ASSIGN_OR_RETURN(int64_t acked, DeleteMatching(SpliceAckedPattern(prefix_, target_uid)));
  ASSIGN_OR_RETURN(int64_t watch, DeleteMatching(WatchCursorPattern(prefix_, target_uid)));
  return acked + watch;
}

absl::StatusOr<int64_t> DeliveryCursorStore::DeleteMatching(const std::string& pattern) {
  int64_t deleted = 0;
  std::string cursor = "0";
  do {
    ASSIGN_OR_RETURN(RedisReply reply,
                     redis_->Command({"SCAN", cursor, "MATCH", pattern, "COUNT", "1000"}));
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
