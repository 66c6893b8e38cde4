#pragma once

// Which branches this gitworker replica owns, when several replicas share them (--membership;
// libs/membership: Leases, rendezvous over the live members, issue #17).
//
//   ownership actor (scheduled; one per service): owns the OwnershipTable. Its inputs are
//     posted: the unit set (BranchUnit of the destination of every GitTarget config the catalog
//     publishes, owned or not: the splicer routes with the same set), each Membership the
//     Replica's view reports, and its own tick, which looks at Replica::Held(). It publishes
//     what this replica owns (nothing while the Lease is not held) into BranchOwnership, logs
//     gained/lost units, sets reverser_gitworker_owned_branches, stops the lost branches'
//     actors (BranchRegistry::Abandon) and tells every target stream actor (ownership_atom).
//   BranchOwnership (thread-safe, read by target streams and branch actors): the last
//     publication, and the target stream actors to tell of the next one.
//
// Without --membership no ownership exists and every branch is this replica's (as before).

#include <caf/all.hpp>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "libs/membership/membership.h"
#include "libs/runtime/metrics.h"
#include "proto/reverser/v1/gitworker.pb.h"
#include "services/gitworker/branch_worker.h"

namespace reverser::gitworker {

// membership::BranchUnit of a branch.
std::string UnitOf(const BranchKey& key);
std::string UnitOf(const reverser::v1::GitDestination& destination);

// One publication of the ownership actor (immutable once published).
struct OwnershipSnapshot {
  std::set<std::string> owned;                   // branch units this replica writes
  std::map<std::string, std::string> owners;     // unit → replica id (what NotOwner names)
  std::map<std::string, std::string> addresses;  // replica id → its gRPC address
  bool leaving = false;                          // the graceful stop began: nothing new is accepted
  uint64_t epoch = 0;                            // counts publications
};

class BranchOwnership {
 public:
  // `held`: whether this replica may still act as an owner (Replica::Held); null: always.
  explicit BranchOwnership(std::function<bool()> held = {});

  std::shared_ptr<const OwnershipSnapshot> Current() const;
  // A delivery for the branch may be taken: owned, the Lease held, not leaving.
  bool Accepts(const std::string& unit) const;
  // The branch may be written (committed, pushed): owned and the Lease held.
  bool MayWrite(const std::string& unit) const;
  // A push of the branch may begin: as MayWrite, and the unit is not being revoked. While the
  // returned grant lives, a publication that loses the unit waits for it (Revoke), so a push
  // (and its "pushed" log line) never lands after this replica published the loss. Null: no.
  std::shared_ptr<void> BeginWrite(const std::string& unit);
  // Refuses new writes of `units` and waits (at most `timeout`) until their grants are gone;
  // false when some are still held then (the compare-and-swap push stays the fence). Publish
  // ends the refusal.
  bool Revoke(const std::vector<std::string>& units, absl::Duration timeout);
  // What a stream is told about a target on a branch this replica does not own.
  reverser::v1::NotOwner NotOwnerFor(const reverser::v1::GitTargetRef& target,
                                     const std::string& unit) const;

  // Target stream actors, told (ownership_atom) after every publication.
  uint64_t Subscribe(caf::actor actor);
  void Unsubscribe(uint64_t id);

  // The ownership actor's only way in: replaces the snapshot, then tells every subscriber.
  void Publish(std::shared_ptr<const OwnershipSnapshot> snapshot);

 private:
  bool Held() const { return !held_ || held_(); }

  const std::function<bool()> held_;
  mutable absl::Mutex mu_;
  std::shared_ptr<const OwnershipSnapshot> current_ ABSL_GUARDED_BY(mu_);
  std::map<uint64_t, caf::actor> subscribers_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, int> writing_ ABSL_GUARDED_BY(mu_);  // unit → grants alive
  std::set<std::string> revoking_ ABSL_GUARDED_BY(mu_);
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
};

using units_atom = caf::atom_constant<caf::atom("units")>;
using members_atom = caf::atom_constant<caf::atom("members")>;
using otick_atom = caf::atom_constant<caf::atom("otick")>;
using leave_atom = caf::atom_constant<caf::atom("leave")>;
// To a target stream actor: a new ownership was published.
using ownership_atom = caf::atom_constant<caf::atom("ownership")>;

}  // namespace reverser::gitworker

// In-process messages only (never serialized).
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(reverser::membership::Membership)

namespace reverser::gitworker {

// units: the whole unit set (duplicates count once); members: a Membership from the view;
// otick: the actor's own tick (Held() looked at again); leave: the graceful stop began (reply
// once published: nothing new is accepted, streams are told who owns their targets without
// this replica).
using OwnershipActor =
    caf::typed_actor<caf::reacts_to<units_atom, std::vector<std::string>>,
                     caf::reacts_to<members_atom, membership::Membership>,
                     caf::reacts_to<otick_atom>, caf::replies_to<leave_atom>::with<bool>>;

struct OwnershipActorOptions {
  std::string me;  // this replica's id
  BranchOwnership* ownership = nullptr;
  std::function<bool()> held;  // Replica::Held; null: always
  // Units no longer owned: their branch actors are stopped (BranchRegistry::Abandon).
  std::function<void(const std::vector<std::string>& lost)> on_lost;
  // After each publication that changed what is owned (the service's admin details).
  std::function<void(const OwnershipSnapshot&)> on_published;
  absl::Duration tick = absl::Seconds(1);  // how often Held() is looked at
  runtime::MetricsRegistry* metrics = &runtime::MetricsRegistry::Global();
};

OwnershipActor SpawnOwnershipActor(caf::actor_system& system, OwnershipActorOptions options);

}  // namespace reverser::gitworker
