#pragma once

// The per-GitTarget actor of one delivery stream: a bounded buffer between the stream and the
// target's branch actor. Queued events of the same object are coalesced (the newer replaces the
// older, which it covers); when the buffer is full, messages wait unaccepted, so the splicer runs
// out of credit instead of anything being dropped. At most `max_in_flight` items are handed to
// the branch actor at a time; each one it takes frees a slot.
//
// With several replicas (`ownership`, branch_ownership.h), a target whose branch this replica
// does not accept (not owned, the Lease not held, or leaving) applies nothing: its messages are
// accepted at once (credit keeps flowing for the stream's other targets) and dropped unacked,
// what it buffered is dropped too, and the stream is told `not_owner` once per owner seen
// (again after the branch was owned here meanwhile, or its owner changed).

#include <caf/all.hpp>
#include <functional>
#include <memory>

#include "libs/runtime/metrics.h"
#include "services/gitworker/branch_protocol.h"
#include "services/gitworker/target_stream_protocol.h"
#include "services/gitworker/target_writer.h"
#include "services/gitworker/work_item.h"

namespace reverser::gitworker {

struct TargetStreamOptions {
  size_t capacity = 1000;     // buffered items
  size_t max_in_flight = 32;  // items handed to the branch actor and not yet taken
  // The branch actor an item of these settings goes to (BranchRegistry::Get in the service).
  std::function<BranchItemActor(const TargetSettings&)> branch_for;
  std::shared_ptr<FeedbackSink> sink;
  WriterLimits limits;  // a catalog config becomes settings within these
  // Which branches this replica accepts deliveries for; null: every branch (no --membership).
  const BranchOwnership* ownership = nullptr;
  runtime::MetricsRegistry* metrics = &runtime::MetricsRegistry::Global();
};

// The protocol is in target_stream_protocol.h.
TargetStreamActor SpawnTargetStream(caf::actor_system& system, TargetStreamOptions options);

}  // namespace reverser::gitworker
