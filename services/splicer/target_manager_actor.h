#pragma once

// The TargetManager actor: the one owner of the splicer's TargetManager (tables, streams, the
// materialization readers, refusals). Table updates, gitworker refusals, config re-sends,
// resplices and readiness questions arrive as messages and are handled one at a time, in order;
// the gRPC handlers ask it with runtime::AskActor and never wait for it.
//
// Spawned detached (a thread of its own): stopping a stream waits for its reader's round, a
// config send for gitworker credit, and deleting a removed target's cursors for Redis. None of
// that may hold a CAF worker that answers gRPC calls.

#include <caf/all.hpp>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "libs/membership/membership.h"
#include "proto/reverser/v1/catalog.pb.h"
#include "proto/reverser/v1/gitworker.pb.h"
#include "services/splicer/target_manager.h"

namespace reverser::splicer {

// Resplice: the target (by uid, else namespace/name), and a claim to narrow it to one type.
struct RespliceAsk {
  reverser::v1::GitTargetRef target;
  std::optional<reverser::v1::Claim> claim;
};

// TargetManager::Resplice's answer: the claims asked to resplice, or why none (code, message).
struct RespliceOutcome {
  absl::StatusCode code = absl::StatusCode::kOk;
  std::string message;
  std::vector<reverser::v1::Claim> claims;
};

// Per-target readiness roll-ups (TargetManager::Summaries).
struct SummariesReply {
  std::vector<reverser::v1::StreamSummary> summaries;
};

// The streams running after a table update.
struct AppliedReply {
  uint64_t streams = 0;
};

// What this replica splices (TargetManager::ActiveTargets) and where (Routes).
struct OwnedReply {
  std::set<std::string> targets;
  std::map<std::string, std::string> routes;
};

}  // namespace reverser::splicer

// Messages travel inside the process only: no serialization needed.
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(reverser::v1::TableUpdate)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(reverser::v1::DeliveryFeedback)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(reverser::splicer::RespliceAsk)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(reverser::splicer::RespliceOutcome)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(reverser::splicer::SummariesReply)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(reverser::splicer::AppliedReply)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(reverser::splicer::OwnedReply)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(reverser::membership::Membership)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(reverser::v1::GitTargetRef)

namespace reverser::splicer {

using apply_atom = caf::atom_constant<caf::atom("apply")>;
using refusal_atom = caf::atom_constant<caf::atom("refusal")>;
using configs_atom = caf::atom_constant<caf::atom("configs")>;
using summaries_atom = caf::atom_constant<caf::atom("summaries")>;
using resplice_atom = caf::atom_constant<caf::atom("resplice")>;
using membership_atom = caf::atom_constant<caf::atom("membership")>;
using gitworkers_atom = caf::atom_constant<caf::atom("gitworkers")>;
using tick_atom = caf::atom_constant<caf::atom("tick")>;
using fenced_atom = caf::atom_constant<caf::atom("fenced")>;
using feedback_atom = caf::atom_constant<caf::atom("feedback")>;
using owned_atom = caf::atom_constant<caf::atom("owned")>;

using TargetManagerActor = caf::typed_actor<
    // A table update (TargetManager::Apply).
    caf::replies_to<apply_atom, reverser::v1::TableUpdate>::with<AppliedReply>,
    // A refusal or refused files from the gitworker.
    caf::reacts_to<refusal_atom, reverser::v1::DeliveryFeedback>,
    // Every target config again (after a gitworker reconnect); answered once sent.
    caf::replies_to<configs_atom>::with<bool>,
    caf::replies_to<summaries_atom>::with<SummariesReply>,
    caf::replies_to<resplice_atom, RespliceAsk>::with<RespliceOutcome>>;

// The service's actor: the admin surface above (what the gRPC handlers see) plus the replicas'
// messages.
using ManagerActor = TargetManagerActor::extend<
    // The splicer members (Replica's view, --membership) and the gitworker members (a
    // MemberView, --gitworker_membership): posted by their callbacks.
    caf::reacts_to<membership_atom, membership::Membership>,
    caf::reacts_to<gitworkers_atom, membership::Membership>,
    // Every `tick` while it lives: the Lease still held? failed takeovers again (Tick).
    caf::reacts_to<tick_atom>,
    // A target's cursor write was fenced (posted by its stream).
    caf::reacts_to<fenced_atom, reverser::v1::GitTargetRef>,
    // Feedback of a routed gitworker client, with its address (NotOwner re-routes).
    caf::reacts_to<feedback_atom, std::string, reverser::v1::DeliveryFeedback>,
    caf::replies_to<owned_atom>::with<OwnedReply>>;

// Only the actor touches `manager` while it lives; its creator keeps it alive until the actor
// ended (then stops it: StopAll). It posts its own fenced/feedback messages (SetPosts) and, with
// a positive `tick`, ticks the manager that often.
ManagerActor SpawnTargetManagerActor(caf::actor_system& system, TargetManager* manager,
                                     absl::Duration tick = absl::ZeroDuration());

}  // namespace reverser::splicer
