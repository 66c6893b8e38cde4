#pragma once

// The materializer's supervisor actor: owns one TypeMaterializer per claimed (type, scope),
// starting workers for new claims and stopping (and releasing) them for withdrawn ones. Claim
// sets arrive as full replacements (catalog WatchClaims, or --static_claims). Its messages are
// supervisor_protocol.h.
//
// It runs detached (a thread of its own) because what it does blocks: stopping a worker joins
// its threads, releasing a claim deletes its keys, and `list` and `compact` go to Redis for
// every claim in turn. Callers on gRPC threads ask it without waiting (runtime::AskActor).

#include <caf/all.hpp>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "absl/time/time.h"
#include "libs/kube/rest_client.h"
#include "libs/membership/ownership.h"
#include "libs/redisstore/ownership_store.h"
#include "libs/rules/claim_syntax.h"
#include "libs/runtime/metrics.h"
#include "proto/reverser/v1/catalog.pb.h"
#include "proto/reverser/v1/materializer.pb.h"
#include "services/materializer/claim_registry.h"
#include "services/materializer/supervisor_protocol.h"
#include "services/materializer/type_materializer.h"

namespace reverser::materializer {

// Builds a worker for a claim (injectable for tests).
using WorkerFactory = std::function<std::unique_ptr<TypeMaterializer>(
    const core::GroupVersionResource&, const core::WatchScope&, bool sensitive)>;

// With membership: what a worker of an owned unit carries besides its claim.
struct WorkerOwnership {
  redisstore::Fence fence;          // from the supervisor's TakeOver of the unit
  std::function<bool()> may_write;  // Replica::Held
  std::function<void()> on_fenced;  // tells the supervisor (posts fenced_atom)
};
using OwnedWorkerFactory = std::function<std::unique_ptr<TypeMaterializer>(
    const core::GroupVersionResource&, const core::WatchScope&, bool sensitive,
    const WorkerOwnership&)>;

// Membership (--membership): the replicas of the materializer share the units out
// (libs/membership/ownership.h); this replica runs only the claims of the units it owns.
struct SupervisorMembership {
  std::string replica_id;
  // Whether this replica may act as an owner now (Replica::Held): no takeover while not, and
  // every worker's writes wait for it.
  std::function<bool()> held;
  OwnedWorkerFactory make_worker;
  // Where the unit epochs live (ownership_store.h): the materialization's Redis.
  redisstore::RedisOptions redis;
  redisstore::KeyPrefix prefix = redisstore::KeyPrefix::Default();
  // A takeover that failed (Redis down, Lease not held) or a unit still owned after its worker
  // was fenced is tried again after this long.
  absl::Duration retry_after = absl::Seconds(2);
  // The gauge reverser_materializer_owned_units; may be null.
  runtime::MetricsRegistry* metrics = nullptr;
};

struct SupervisorOptions {
  WorkerFactory make_worker;
  // Delete Redis keys of withdrawn claims (off keeps them for a later re-claim to resume).
  bool release_withdrawn = true;
  // Called after every applied claim set with the number of active workers.
  std::function<void(size_t workers)> on_applied;
  // Kept equal to the applied claim set (the audit intake routes by it); may be null.
  ClaimRegistry* registry = nullptr;
  // Set: run only the owned units' claims (make_worker is then not used).
  std::optional<SupervisorMembership> membership;
};

// What the supervisor owns: one worker per claim. Destroyed when the actor ends, which stops
// every worker.
struct SupervisorState {
  ~SupervisorState();
  void StopAll();
  std::map<ClaimKey, std::unique_ptr<TypeMaterializer>> workers;
  // The last claim set: claim -> sensitive.
  std::map<ClaimKey, bool> wanted;
  bool claims_applied = false;
  bool stopped = false;  // stop_atom: nothing starts any more
  // Membership only: the owned units, the fence of each unit taken over, the connection the
  // takeovers use, whether a retry is scheduled.
  std::optional<membership::OwnershipTable> table;
  std::map<std::string, redisstore::Fence> fences;
  std::unique_ptr<redisstore::RedisConnection> redis;
  bool retry_scheduled = false;
  static inline const char* name = "materializer-supervisor";
};

// The unit (libs/membership/units.h) a claim belongs to; claims of one type and scope in two
// versions share it (and their Redis keys).
std::string UnitOf(const ClaimKey& claim);

SupervisorActor::behavior_type Supervisor(SupervisorActor::stateful_pointer<SupervisorState> self,
                                          SupervisorOptions options);

// Spawns the supervisor on its own thread.
SupervisorActor SpawnSupervisor(caf::actor_system& system, SupervisorOptions options);

}  // namespace reverser::materializer
