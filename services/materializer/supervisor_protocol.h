#pragma once

// The supervisor's message protocol, checked by the compiler: what the supervisor actor
// (supervisor.h) takes and answers. Replies are structs, not serialized protos: the messages
// stay inside one process, so nothing is encoded or parsed on the way.
//
//   (claims_atom, ClaimSet)            -> void: the full claim set, replacing the last one
//   (list_atom)                        -> MaterializationList: one state per owned claim
//   (compact_atom, CompactRequest)     -> CompactOutcome: one result per compacted claim (none:
//                                         the request named a claim this process does not own)
//   (membership_atom, Membership)      -> void: this service's live replicas (--membership), from
//                                         the Replica's callback; recomputes the owned units
//   (fenced_atom, unit)                -> void: a worker of `unit` was fenced (another replica
//                                         took it over) and has stopped
//   (retry_atom)                       -> void: apply again (a takeover that could not be made)
//   (stop_atom)                        -> bool: stops every worker and starts none from now on
//                                         (graceful shutdown, before the replica leaves)

#include <caf/all.hpp>
#include <string>

#include "libs/membership/membership.h"
#include "proto/reverser/v1/catalog.pb.h"
#include "proto/reverser/v1/materializer.pb.h"

namespace reverser::materializer {

using claims_atom = caf::atom_constant<caf::atom("claims")>;
using list_atom = caf::atom_constant<caf::atom("list")>;
using compact_atom = caf::atom_constant<caf::atom("compact")>;
using membership_atom = caf::atom_constant<caf::atom("members")>;
using fenced_atom = caf::atom_constant<caf::atom("fenced")>;
using retry_atom = caf::atom_constant<caf::atom("retry")>;
using stop_atom = caf::atom_constant<caf::atom("stop")>;

struct MaterializationList {
  reverser::v1::ListMaterializationsResponse response;
};

struct CompactOutcome {
  reverser::v1::CompactResponse response;
};

using SupervisorActor = caf::typed_actor<
    caf::reacts_to<claims_atom, reverser::v1::ClaimSet>,
    caf::replies_to<list_atom>::with<MaterializationList>,
    caf::replies_to<compact_atom, reverser::v1::CompactRequest>::with<CompactOutcome>,
    caf::reacts_to<membership_atom, reverser::membership::Membership>,
    caf::reacts_to<fenced_atom, std::string>, caf::reacts_to<retry_atom>,
    caf::replies_to<stop_atom>::with<bool>>;

}  // namespace reverser::materializer

// Local messages only (never serialized): CAF may carry them without an inspect function.
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(reverser::v1::ClaimSet)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(reverser::v1::CompactRequest)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(reverser::membership::Membership)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(reverser::materializer::MaterializationList)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(reverser::materializer::CompactOutcome)
