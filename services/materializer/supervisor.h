#pragma once

// The materializer's supervisor actor: owns one TypeMaterializer per claimed (type, scope),
// starting workers for new claims and stopping (and releasing) them for withdrawn ones. Claim
// sets arrive as full replacements (catalog WatchClaims, or --static_claims).

#include <caf/all.hpp>
#include <functional>
#include <memory>
#include <string>

#include "libs/kube/rest_client.h"
#include "proto/reverser/v1/catalog.pb.h"
#include "proto/reverser/v1/materializer.pb.h"
#include "services/materializer/claim_registry.h"
#include "libs/rules/claim_syntax.h"
#include "services/materializer/type_materializer.h"

namespace reverser::materializer {

using claims_atom = caf::atom_constant<caf::atom("claims")>;
using list_atom = caf::atom_constant<caf::atom("list")>;
using compact_atom = caf::atom_constant<caf::atom("compact")>;

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

// Messages:
//   (claims_atom, std::string serialized reverser.v1.ClaimSet) -> void
//   (list_atom) -> std::string serialized reverser.v1.ListMaterializationsResponse
//   (compact_atom, std::string serialized reverser.v1.CompactRequest)
//       -> std::string serialized reverser.v1.CompactResponse (no results: claim not owned)
caf::behavior Supervisor(caf::blocking_actor* self, SupervisorOptions options);

// Spawns the supervisor on its own thread (it joins worker threads when claims go away).
caf::actor SpawnSupervisor(caf::actor_system& system, SupervisorOptions options);

}  // namespace reverser::materializer
