#pragma once

// The branch actor's protocol (branch_actor.h spawns it). One actor per provider namespace,
// provider and branch; it owns that branch's BranchWorker. Replies are values, never strings
// to parse.

#include <caf/all.hpp>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "services/gitworker/commit_requests.h"
#include "services/gitworker/work_item.h"

namespace reverser::gitworker {

using WorkItemPtr = std::shared_ptr<WorkItem>;
using SettingsPtr = std::shared_ptr<const TargetSettings>;

using item_atom = caf::atom_constant<caf::atom("item")>;
using window_atom = caf::atom_constant<caf::atom("window")>;
using push_atom = caf::atom_constant<caf::atom("push")>;
using status_atom = caf::atom_constant<caf::atom("status")>;
using stop_atom = caf::atom_constant<caf::atom("stop")>;
using attach_atom = caf::atom_constant<caf::atom("attach")>;
using commit_timer_atom = caf::atom_constant<caf::atom("crtimer")>;
using abandon_atom = caf::atom_constant<caf::atom("abandon")>;

}  // namespace reverser::gitworker

// In-process messages only (never serialized).
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(reverser::gitworker::WorkItemPtr)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(reverser::gitworker::SettingsPtr)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(reverser::gitworker::CommitRequestSpec)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(reverser::gitworker::CommitRequestView)

namespace reverser::gitworker {

// What a target stream needs of a branch: it hands items over. The reply (always true) is the
// credit: the item is in a window or a pending write.
using BranchItemActor = caf::typed_actor<caf::replies_to<item_atom, WorkItemPtr>::with<bool>>;

// The whole branch actor. window, push and commit_timer are its own timers (self-sent); status is
// a serialized reverser.v1.BranchStatus, the shape runtime::AskAll gathers for ListBranches;
// stop finalizes the open window (shutdown), pushes and quits. abandon: the branch is no longer
// this replica's (branch_ownership.h): a commit or push in progress has finished (messages are
// handled one at a time); the open window and every write not yet pushed are dropped unacked
// (the new owner gets them redelivered), and the worker starts over from the remote if the
// branch comes back.
using BranchActor = BranchItemActor::extend<
    caf::reacts_to<window_atom, uint64_t>,  // silence timer of window generation N
    caf::reacts_to<push_atom>,              // push timer
    caf::replies_to<status_atom>::with<std::string>,
    // Registers a CommitRequest (idempotent) and answers where it stands.
    caf::replies_to<attach_atom, CommitRequestSpec>::with<CommitRequestView>,
    caf::reacts_to<commit_timer_atom>,  // a CommitRequest's close delay or retention ends
    caf::reacts_to<abandon_atom>,       // the branch is no longer owned
    caf::replies_to<stop_atom>::with<bool>>;

}  // namespace reverser::gitworker
