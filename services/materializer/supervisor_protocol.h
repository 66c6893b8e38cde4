#pragma once

// The supervisor's message protocol, checked by the compiler: what the supervisor actor
// (supervisor.h) takes and answers. Replies are structs, not serialized protos: the messages
// stay inside one process, so nothing is encoded or parsed on the way.
//
//   (claims_atom, ClaimSet)            -> void: the full claim set, replacing the last one
//   (list_atom)                        -> MaterializationList: one state per owned claim
//   (compact_atom, CompactRequest)     -> CompactOutcome: one result per compacted claim (none:
//                                         the request named a claim this process does not own)

#include <caf/all.hpp>

#include "proto/reverser/v1/catalog.pb.h"
#include "proto/reverser/v1/materializer.pb.h"

namespace reverser::materializer {

using claims_atom = caf::atom_constant<caf::atom("claims")>;
using list_atom = caf::atom_constant<caf::atom("list")>;
using compact_atom = caf::atom_constant<caf::atom("compact")>;

struct MaterializationList {
  reverser::v1::ListMaterializationsResponse response;
};

struct CompactOutcome {
  reverser::v1::CompactResponse response;
};

using SupervisorActor = caf::typed_actor<
    caf::reacts_to<claims_atom, reverser::v1::ClaimSet>,
    caf::replies_to<list_atom>::with<MaterializationList>,
    caf::replies_to<compact_atom, reverser::v1::CompactRequest>::with<CompactOutcome>>;

}  // namespace reverser::materializer

// Local messages only (never serialized): CAF may carry them without an inspect function.
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(reverser::v1::ClaimSet)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(reverser::v1::CompactRequest)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(reverser::materializer::MaterializationList)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(reverser::materializer::CompactOutcome)
