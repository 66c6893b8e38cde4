#pragma once

// The reactor of one GitWorker.Deliver stream (gitworker_grpc.h serves it).
//
// One bidirectional stream per splicer:
//   - every DeliveryMessage carries a sequence; the answer `accepted_sequence` is sent for each
//     message, in the order messages were read, once it is buffered (target_config: at once;
//     resync/event: when its GitTarget's buffer had room). At most `max_unaccepted` messages are
//     read ahead of their acceptance; beyond that the stream is not read (gRPC flow control).
//   - `target_config` declares a GitTarget for the rest of the stream. How it is written comes
//     from the catalog (target_configs.h), now and whenever the catalog changes it; until the
//     catalog has published it, the target's resyncs and events wait unaccepted. Nothing a
//     splicer sends names a remote or a Secret. (With --target_config_source=delivery the
//     delivered config is used as sent.) An unusable config, or a resync/event for a target
//     not declared, is answered `refusal` (reason code and message) and accepted, never acked.
//   - `ack{target, claim, position, commit_sha}` once everything of (target, claim) up to
//     position is pushed; acks per (target, claim) only move forward. Objects that can never be
//     written (e.g. sensitive without encryption) are answered `refusal` (naming the object)
//     and acked in order, so a stream never stalls on them; `refused_files` lists the files
//     under a target's path the gitworker refuses to read.
//   - `not_owner` (with --membership): this replica does not own the target's branch; nothing
//     more of the target is applied or acked here, its messages are still accepted (credit).
//   - when the client half-closes, the stream ends after the feedback queued so far is written;
//     a new stream starts with fresh target buffers (the splicer re-sends from its acked cursor).
//
// Threads: gRPC calls the reactor's On* callbacks; target stream and branch actors call back
// through its FeedbackSink from CAF threads. One lock per stream (StreamShared) serializes both;
// nothing under it blocks or waits for an actor (messages to actors are only posted).

#include <grpcpp/grpcpp.h>

#include <caf/all.hpp>
#include <cstddef>

#include "libs/runtime/metrics.h"
#include "proto/reverser/v1/gitworker.grpc.pb.h"
#include "services/gitworker/branch_actor.h"
#include "services/gitworker/branch_ownership.h"
#include "services/gitworker/target_configs.h"
#include "services/gitworker/target_writer.h"

namespace reverser::gitworker {

struct DeliveryOptions {
  size_t target_buffer = 1000;  // items per GitTarget buffer
  size_t max_unaccepted = 64;   // messages read ahead of their acceptance
  WriterLimits limits;          // templates of a target_config are tried within these
  // The catalog's configs (target_configs.h): a delivered target_config then only declares its
  // GitTarget. Null (--target_config_source=delivery): the delivered config is used as sent.
  TargetConfigBook* trusted_configs = nullptr;
  // With several replicas (branch_ownership.h): a target whose branch this replica does not
  // own is answered `not_owner` (target_stream.h). Null: every branch is this replica's.
  BranchOwnership* ownership = nullptr;
  runtime::MetricsRegistry* metrics = &runtime::MetricsRegistry::Global();
};

// A new stream's reactor; it deletes itself when the stream is done (OnDone).
grpc::ServerBidiReactor<reverser::v1::DeliveryMessage, reverser::v1::DeliveryFeedback>*
NewDeliverReactor(caf::actor_system& system, BranchRegistry* registry,
                  const DeliveryOptions& options);

}  // namespace reverser::gitworker
