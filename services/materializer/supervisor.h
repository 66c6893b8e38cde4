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
#include <string>

#include "libs/kube/rest_client.h"
#include "libs/rules/claim_syntax.h"
#include "proto/reverser/v1/catalog.pb.h"
#include "proto/reverser/v1/materializer.pb.h"
#include "services/materializer/claim_registry.h"
#include "services/materializer/supervisor_protocol.h"
#include "services/materializer/type_materializer.h"

namespace reverser::materializer {

// Builds a worker for a claim (injectable for tests).
using WorkerFactory = std::function<std::unique_ptr<TypeMaterializer>(
    const core::GroupVersionResource&, const core::WatchScope&, bool sensitive)>;

struct SupervisorOptions {
  WorkerFactory make_worker;
  // Delete Redis keys of withdrawn claims (off keeps them for a later re-claim to resume).
  bool release_withdrawn = true;
  // Called after every applied claim set with the number of active workers.
  std::function<void(size_t workers)> on_applied;
  // Kept equal to the applied claim set (the audit intake routes by it); may be null.
  ClaimRegistry* registry = nullptr;
};

// What the supervisor owns: one worker per claim. Destroyed when the actor ends, which stops
// every worker.
struct SupervisorState {
  ~SupervisorState();
  void StopAll();
  std::map<ClaimKey, std::unique_ptr<TypeMaterializer>> workers;
  static inline const char* name = "materializer-supervisor";
};

SupervisorActor::behavior_type Supervisor(SupervisorActor::stateful_pointer<SupervisorState> self,
                                          SupervisorOptions options);

// Spawns the supervisor on its own thread.
SupervisorActor SpawnSupervisor(caf::actor_system& system, SupervisorOptions options);

}  // namespace reverser::materializer
