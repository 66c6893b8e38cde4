#include "libs/redisstore/ownership_store.h"

#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "libs/core/status.h"

namespace reverser::redisstore {
namespace {

constexpr absl::string_view kFencedPayload = "reverser.configbutler.ai/fenced";

// KEYS: epoch, owner. ARGV: owner. Returns the new epoch.
const LuaScript& TakeOverScript() {
  static const LuaScript* script = new LuaScript(R"lua(
local epoch = redis.call('INCR', KEYS[1])
redis.call('SET', KEYS[2], ARGV[1])
return epoch
)lua");
  return *script;
}

// KEYS: epoch, owner, then the keys the commands touch. ARGV: epoch, owner, number of commands,
// then per command its argument count and arguments. Returns {1, {replies}} when written, or
// {0, current epoch, current owner} when the fence is stale (nothing written). A unit never
// taken over has no epoch: no fence passes, epoch 0 included.
const LuaScript& FencedWriteScript() {
  static const LuaScript* script = new LuaScript(R"lua(
local epoch = redis.call('GET', KEYS[1])
local owner = redis.call('GET', KEYS[2]) or ''
if not epoch or epoch ~= ARGV[1] or owner ~= ARGV[2] then return {0, epoch or '0', owner} end
local n = tonumber(ARGV[3])
local i = 4
local replies = {}
for c = 1, n do
  local argc = tonumber(ARGV[i])
  local args = {}
  for a = 1, argc do args[a] = ARGV[i + a] end
  i = i + argc + 1
  replies[c] = redis.call(unpack(args))
end
return {1, replies}
)lua");
  return *script;
}

absl::Status Stale(const Fence& fence, absl::string_view epoch, absl::string_view owner) {
  absl::Status s = absl::FailedPreconditionError(absl::StrCat(
      "fenced: unit \"", fence.unit, "\" is at epoch ", epoch, " owned by \"", owner,
      "\", not epoch ", fence.epoch, " of \"", fence.owner, "\": another owner took it over"));
  s.SetPayload(kFencedPayload, absl::Cord("1"));
  return s;
}

absl::Status CheckUnit(absl::string_view unit) {
  if (unit.empty()) return absl::InvalidArgumentError("ownership: empty unit");
  return absl::OkStatus();
}

}  // namespace

absl::Status FencedError(const Fence& fence, absl::string_view epoch, absl::string_view owner) {
  return Stale(fence, epoch, owner);
}

bool IsFenced(const absl::Status& status) {
  return status.code() == absl::StatusCode::kFailedPrecondition &&
         status.GetPayload(kFencedPayload).has_value();
}

OwnershipStore::OwnershipStore(RedisConnection* redis, KeyPrefix prefix)
    : redis_(redis), prefix_(std::move(prefix)) {}

absl::StatusOr<Fence> OwnershipStore::TakeOver(absl::string_view unit, absl::string_view owner) {
  RETURN_IF_ERROR(CheckUnit(unit));
  if (owner.empty()) return absl::InvalidArgumentError("ownership: empty owner");
  const OwnershipKeys keys = OwnershipKeys::For(prefix_, unit);
  ASSIGN_OR_RETURN(RedisReply reply,
                   redis_->Eval(TakeOverScript(), {keys.epoch, keys.owner}, {std::string(owner)}));
  ASSIGN_OR_RETURN(int64_t epoch, reply.AsInteger());
  return Fence{std::string(unit), epoch, std::string(owner)};
}

absl::StatusOr<Fence> OwnershipStore::Read(absl::string_view unit) {
  RETURN_IF_ERROR(CheckUnit(unit));
  const OwnershipKeys keys = OwnershipKeys::For(prefix_, unit);
  ASSIGN_OR_RETURN(RedisReply reply, redis_->Command({"MGET", keys.epoch, keys.owner}));
  if (!reply.IsArray() || reply.elements().size() != 2) {
    return absl::InternalError(absl::StrCat("ownership: unexpected reply ", reply.DebugString()));
  }
  Fence fence{std::string(unit), 0, ""};
  ASSIGN_OR_RETURN(std::optional<std::string> epoch, reply.elements()[0].AsOptionalString());
  ASSIGN_OR_RETURN(std::optional<std::string> owner, reply.elements()[1].AsOptionalString());
  if (epoch.has_value() && !absl::SimpleAtoi(*epoch, &fence.epoch)) {
    return absl::DataLossError(
        absl::StrCat("ownership: epoch of \"", unit, "\" is \"", *epoch, "\", not an integer"));
  }
  fence.owner = owner.value_or("");
  return fence;
}

absl::Status OwnershipStore::Check(const Fence& fence) {
  ASSIGN_OR_RETURN(Fence current, Read(fence.unit));
  if (current.epoch > 0 && current.epoch == fence.epoch && current.owner == fence.owner)
    return absl::OkStatus();
  return Stale(fence, absl::StrCat(current.epoch), current.owner);
}

absl::StatusOr<std::vector<RedisReply>> OwnershipStore::FencedWrite(const Fence& fence,
                                                                    const FencedCommands& write) {
  RETURN_IF_ERROR(CheckUnit(fence.unit));
  if (write.commands.empty()) return absl::InvalidArgumentError("fenced write: no commands");
  const OwnershipKeys keys = OwnershipKeys::For(prefix_, fence.unit);
  std::vector<std::string> script_keys = {keys.epoch, keys.owner};
  script_keys.insert(script_keys.end(), write.keys.begin(), write.keys.end());
  std::vector<std::string> args = {absl::StrCat(fence.epoch), fence.owner,
                                   absl::StrCat(write.commands.size())};
  for (const RedisCommand& command : write.commands) {
    if (command.empty()) return absl::InvalidArgumentError("fenced write: empty command");
    args.push_back(absl::StrCat(command.size()));
    args.insert(args.end(), command.begin(), command.end());
  }
  ASSIGN_OR_RETURN(RedisReply reply, redis_->Eval(FencedWriteScript(), script_keys, args));
  const auto& e = reply.elements();
  if (!reply.IsArray() || e.empty() || e[0].type() != RedisReply::Type::kInteger) {
    return absl::InternalError(
        absl::StrCat("fenced write: unexpected reply ", reply.DebugString()));
  }
  if (e[0].integer() == 0 && e.size() == 3) {
    ASSIGN_OR_RETURN(std::string epoch, e[1].AsString());
    ASSIGN_OR_RETURN(std::string owner, e[2].AsString());
    return Stale(fence, epoch, owner);
  }
  if (e[0].integer() != 1 || e.size() != 2 || !e[1].IsArray()) {
    return absl::InternalError(
        absl::StrCat("fenced write: unexpected reply ", reply.DebugString()));
  }
  return e[1].elements();
}

}  // namespace reverser::redisstore
