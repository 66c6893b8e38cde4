#pragma once

// The target stream actor's protocol (target_stream.h spawns it). One actor per GitTarget of a
// delivery stream, a bounded buffer in front of the target's branch actor.

#include <caf/all.hpp>
#include <cstddef>
#include <memory>
#include <string>

#include "proto/reverser/v1/catalog.pb.h"
#include "services/gitworker/branch_ownership.h"
#include "services/gitworker/branch_protocol.h"

namespace reverser::gitworker {

using TargetConfigPtr = std::shared_ptr<const reverser::v1::GitTargetConfig>;

using config_atom = caf::atom_constant<caf::atom("config")>;
using declare_atom = caf::atom_constant<caf::atom("declare")>;
using catalog_atom = caf::atom_constant<caf::atom("catalog")>;
using deliver_atom = caf::atom_constant<caf::atom("deliver")>;

// The buffer's fill (tests, debugging).
struct TargetStreamStatus {
  size_t queued = 0;     // buffered, not yet handed to the branch actor
  size_t waiting = 0;    // delivered, not accepted yet (buffer full or no settings)
  size_t in_flight = 0;  // handed to the branch actor, not yet taken
  bool operator==(const TargetStreamStatus&) const = default;
  std::string ToString() const;  // "queued=N waiting=N in_flight=N"
};

}  // namespace reverser::gitworker

// In-process messages only (never serialized).
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(reverser::gitworker::TargetConfigPtr)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(reverser::gitworker::TargetStreamStatus)

namespace reverser::gitworker {

// config: the target's settings as delivered (--target_config_source=delivery); items
//   delivered before them wait, unaccepted.
// declare: the config the splicer delivers with; catalog: the catalog's config of the target.
//   With the catalog as the source, the target has settings (from the catalog's config) only
//   while both are equal: a delivered config the catalog does not hold is never written with,
//   and a change waits for the catalog and the splicer to agree on it.
// deliver: an item, buffered (sink->Accepted(sequence)) now or once the buffer has room.
// ownership: a new ownership was published (branch_ownership.h): a target whose branch this
//   replica no longer accepts drops what it has not handed over and tells the stream NotOwner.
using TargetStreamActor = caf::typed_actor<
    caf::reacts_to<config_atom, SettingsPtr>, caf::reacts_to<declare_atom, TargetConfigPtr>,
    caf::reacts_to<catalog_atom, TargetConfigPtr>,
    caf::reacts_to<deliver_atom, uint64_t, WorkItemPtr>, caf::reacts_to<ownership_atom>,
    caf::replies_to<status_atom>::with<TargetStreamStatus>>;

}  // namespace reverser::gitworker
