#pragma once

// Ownership epochs and fenced writes: what keeps a stale owner from doing harm.
//
// Every unit (a materialization, a GitTarget, a branch: any string key) has an epoch,
// `P:own:v1:<unit>:epoch` (keys.h), INCRemented by each takeover, and the owner that took it,
// `P:own:v1:<unit>:owner`. A replica that becomes a unit's owner (libs/membership: rendezvous
// over the live members) calls TakeOver and carries the Fence it returns; every write it makes
// for the unit goes through FencedWrite, a Lua script that runs the write only while the stored
// epoch and owner are still the fence's. Once another replica took over, the old owner's
// writes return FailedPrecondition and write nothing: that is how a replica that was paused
// past its lease (GC, SIGSTOP, a VM migration) learns it lost the unit, whatever its clock says.
//
// The owner is compared too, so a Redis that lost its state (restarted empty: epochs start
// again at 1) does not let an old owner's epoch 1 pass as a new owner's epoch 1. Keys have no
// TTL: an epoch that expired would start again the same way.
//
// Atomicity: a fenced write is one script — no other client's command runs between the check
// and the write. Redis does not roll a script back, though: a command that fails part-way
// leaves the ones before it applied (as MULTI/EXEC does); write commands that cannot fail.
// Redis Cluster: the epoch, owner and written keys must share a slot (docs/redis-keys.md,
// Redis Cluster), which these key shapes do not arrange yet.
//
// Not thread-safe (it borrows one RedisConnection): one store per actor or thread.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "libs/redisstore/keys.h"
#include "libs/redisstore/redis_connection.h"

namespace reverser::redisstore {

// What an owner carries: the unit, the epoch it took and who took it.
struct Fence {
  std::string unit;
  int64_t epoch = 0;
  std::string owner;
  bool operator==(const Fence&) const = default;
};

// A write to fence: the commands (keys named in them as usual) and every key they touch
// (declared to Redis as the script's KEYS).
struct FencedCommands {
  std::vector<std::string> keys;
  std::vector<RedisCommand> commands;
};

class OwnershipStore {
 public:
  OwnershipStore(RedisConnection* redis, KeyPrefix prefix);

  // INCRs the unit's epoch and records `owner` as its holder, atomically. From now on every
  // fence of the unit with an older epoch (or another owner) is refused.
  absl::StatusOr<Fence> TakeOver(absl::string_view unit, absl::string_view owner);
  // The unit's current epoch and owner (epoch 0, owner "": never taken).
  absl::StatusOr<Fence> Read(absl::string_view unit);
  // OK while `fence` is current; FailedPrecondition naming the current epoch and owner if not.
  absl::Status Check(const Fence& fence);
  // Runs `write` only while `fence` is current: the commands' replies, or FailedPrecondition
  // (nothing written). InvalidArgument for an empty unit, no commands or an empty command.
  absl::StatusOr<std::vector<RedisReply>> FencedWrite(const Fence& fence,
                                                      const FencedCommands& write);

 private:
  RedisConnection* redis_;
  KeyPrefix prefix_;
};

// Whether a status is a fencing refusal (the write came from a stale owner).
bool IsFenced(const absl::Status& status);
// The refusal of a stale `fence` (IsFenced holds), naming the unit's current epoch and owner: for
// stores that check a fence inside a script of their own (delivery_cursor_store.h,
// materialization_store.h).
absl::Status FencedError(const Fence& fence, absl::string_view current_epoch,
                         absl::string_view current_owner);

}  // namespace reverser::redisstore
