#pragma once

// The per-GitTarget actor of one delivery stream: a bounded buffer between the stream and the
// target's branch actor. Queued events of the same object are coalesced (the newer replaces the
// older, which it covers); when the buffer is full, messages wait unaccepted, so the splicer runs
// out of credit instead of anything being dropped. At most `max_in_flight` items are handed to
// the branch actor at a time; each one it takes frees a slot.

#include <caf/all.hpp>
#include <functional>
#include <memory>

#include "libs/runtime/metrics.h"
#include "proto/reverser/v1/catalog.pb.h"
#include "services/gitworker/branch_actor.h"

namespace reverser::gitworker {

using TargetConfigPtr = std::shared_ptr<const reverser::v1::GitTargetConfig>;
using declare_atom = caf::atom_constant<caf::atom("declare")>;
using catalog_atom = caf::atom_constant<caf::atom("catalog")>;

}  // namespace reverser::gitworker

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(reverser::gitworker::TargetConfigPtr)

namespace reverser::gitworker {

struct TargetStreamOptions {
  size_t capacity = 1000;     // buffered items
  size_t max_in_flight = 32;  // items handed to the branch actor and not yet taken
  // The branch actor an item of these settings goes to (BranchRegistry::Get in the service).
  std::function<caf::actor(const TargetSettings&)> branch_for;
  std::shared_ptr<FeedbackSink> sink;
  WriterLimits limits;  // a catalog config becomes settings within these
  runtime::MetricsRegistry* metrics = &runtime::MetricsRegistry::Global();
};

// Messages:
//   (config_atom, SettingsPtr) -> void             the target's settings; items delivered
//                                                   before them wait, unaccepted
//   (declare_atom, TargetConfigPtr) -> void        the config the splicer delivers with
//   (catalog_atom, TargetConfigPtr) -> void        the catalog's config of the target
//       With the catalog as the source, the target has settings (from the catalog's config)
//       only while both are equal: a delivered config the catalog does not hold is never
//       written with, and a change waits for the catalog and the splicer to agree on it.
//   (deliver_atom, uint64_t sequence, WorkItemPtr) -> void
//       buffered (sink->Accepted(sequence)) now, or once the buffer has room
//   (status_atom) -> std::string   "queued=N waiting=N in_flight=N" (tests, debugging)
caf::actor SpawnTargetStream(caf::actor_system& system, TargetStreamOptions options);

}  // namespace reverser::gitworker
