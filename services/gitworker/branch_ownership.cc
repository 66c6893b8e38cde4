#include "services/gitworker/branch_ownership.h"

#include <chrono>

#include "absl/strings/str_join.h"
#include "libs/membership/ownership.h"
#include "libs/membership/units.h"
#include "libs/runtime/log.h"

namespace reverser::gitworker {

std::string UnitOf(const BranchKey& key) {
  return membership::BranchUnit(key.provider_namespace, key.provider_name, key.branch);
}

std::string UnitOf(const reverser::v1::GitDestination& destination) {
  return membership::BranchUnit(destination.provider_namespace(), destination.provider_name(),
                                destination.branch());
}

BranchOwnership::BranchOwnership(std::function<bool()> held)
    : held_(std::move(held)), current_(std::make_shared<OwnershipSnapshot>()) {}

std::shared_ptr<const OwnershipSnapshot> BranchOwnership::Current() const {
  absl::MutexLock lock(&mu_);
  return current_;
}

bool BranchOwnership::Accepts(const std::string& unit) const {
  auto snapshot = Current();
  return !snapshot->leaving && snapshot->owned.contains(unit) && Held();
}

bool BranchOwnership::MayWrite(const std::string& unit) const {
  return Current()->owned.contains(unit) && Held();
}

reverser::v1::NotOwner BranchOwnership::NotOwnerFor(const reverser::v1::GitTargetRef& target,
                                                    const std::string& unit) const {
  auto snapshot = Current();
  reverser::v1::NotOwner out;
  *out.mutable_target() = target;
  out.set_branch_unit(unit);
  if (auto owner = snapshot->owners.find(unit); owner != snapshot->owners.end()) {
    out.set_owner_replica(owner->second);
    if (auto address = snapshot->addresses.find(owner->second);
        address != snapshot->addresses.end()) {
      out.set_owner_address(address->second);
    }
  }
  return out;
}

uint64_t BranchOwnership::Subscribe(caf::actor actor) {
  absl::MutexLock lock(&mu_);
  const uint64_t id = next_id_++;
  subscribers_.emplace(id, std::move(actor));
  return id;
}

void BranchOwnership::Unsubscribe(uint64_t id) {
  absl::MutexLock lock(&mu_);
  subscribers_.erase(id);
}

std::shared_ptr<void> BranchOwnership::BeginWrite(const std::string& unit) {
  if (!Held()) return nullptr;
  absl::MutexLock lock(&mu_);
  if (!current_->owned.contains(unit) || revoking_.contains(unit)) return nullptr;
  ++writing_[unit];
  // Non-null (a shared_ptr holding null compares equal to nullptr): the grant's release.
  struct Grant {
    Grant(BranchOwnership* ownership, std::string unit)
        : ownership(ownership), unit(std::move(unit)) {}
    Grant(const Grant&) = delete;
    Grant& operator=(const Grant&) = delete;
    BranchOwnership* const ownership;
    const std::string unit;
    ~Grant() {
      absl::MutexLock lock(&ownership->mu_);
      if (--ownership->writing_[unit] == 0) ownership->writing_.erase(unit);
    }
  };
  return std::make_shared<Grant>(this, unit);
}

bool BranchOwnership::Revoke(const std::vector<std::string>& units, absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  revoking_.insert(units.begin(), units.end());
  auto drained = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (const std::string& unit : units) {
      if (writing_.contains(unit)) return false;
    }
    return true;
  };
  return mu_.AwaitWithTimeout(absl::Condition(&drained), timeout);
}

void BranchOwnership::Publish(std::shared_ptr<const OwnershipSnapshot> snapshot) {
  absl::MutexLock lock(&mu_);
  current_ = std::move(snapshot);
  revoking_.clear();
  for (const auto& [id, actor] : subscribers_) caf::anon_send(actor, ownership_atom::value);
}

namespace {

// How long a publication that loses branches waits for their pushes in flight.
constexpr absl::Duration kRevokeWait = absl::Seconds(10);

struct OwnershipState {
  OwnershipActorOptions options;
  std::unique_ptr<membership::OwnershipTable> table;
  std::vector<std::string> units;
  std::set<std::string> published;  // what the last publication owned
  bool held = true;
  bool leaving = false;
  uint64_t epoch = 0;
  static inline const char* name = "gitworker.ownership";
};

using Self = OwnershipActor::stateful_pointer<OwnershipState>;

std::chrono::microseconds ToChrono(absl::Duration d) {
  return std::chrono::microseconds(absl::ToInt64Microseconds(std::max(d, absl::Milliseconds(10))));
}

// Publishes what this replica owns now: the table's units while the Lease is held (nothing
// otherwise). Once the graceful stop began, what it still owns is only finished (pushed), never
// accepted again, and NotOwner names the owners computed without this replica.
void Publish(Self self, bool force = false) {
  auto& state = self->state;
  auto snapshot = std::make_shared<OwnershipSnapshot>();
  const membership::OwnershipTable* table = state.table.get();
  membership::OwnershipTable without("");  // a router's table: owners only
  if (state.held) snapshot->owned = state.table->owned();
  if (state.leaving) {
    // Who owns each unit once this replica has left: what streams are told from now on.
    membership::Membership rest = state.table->membership();
    std::erase_if(rest.members, [&](const membership::Member& member) {
      return member.replica_id == state.options.me;
    });
    without.SetUnits(state.units);
    without.SetMembership(rest);
    table = &without;
  }
  snapshot->owners = table->owners();
  for (const membership::Member& member : table->membership().members) {
    snapshot->addresses[member.replica_id] = member.address;
  }
  snapshot->leaving = state.leaving;
  snapshot->epoch = ++state.epoch;

  std::vector<std::string> gained, lost;
  std::set_difference(snapshot->owned.begin(), snapshot->owned.end(), state.published.begin(),
                      state.published.end(), std::back_inserter(gained));
  std::set_difference(state.published.begin(), state.published.end(), snapshot->owned.begin(),
                      snapshot->owned.end(), std::back_inserter(lost));
  const bool changed = !gained.empty() || !lost.empty();
  if (!changed && !force) return;
  // A lost branch's push in flight finishes first (its "pushed" line precedes the loss's); the
  // change is logged before it takes effect, so no push of a gained branch precedes the gain's.
  if (!lost.empty() && !state.options.ownership->Revoke(lost, kRevokeWait)) {
    runtime::LogWarning("a lost branch's push still runs; the loss takes effect now",
                        {{"replica", state.options.me}, {"lost", absl::StrJoin(lost, ",")}});
  }
  state.published = snapshot->owned;
  if (changed) {
    runtime::LogInfo("branch ownership changed", {{"replica", state.options.me},
                                                  {"gained", absl::StrJoin(gained, ",")},
                                                  {"lost", absl::StrJoin(lost, ",")},
                                                  {"owned", snapshot->owned.size()},
                                                  {"units", state.units.size()},
                                                  {"members", table->membership().members.size()},
                                                  {"held", state.held},
                                                  {"leaving", state.leaving}});
  }
  state.options.ownership->Publish(snapshot);
  state.options.metrics
      ->GetGauge("reverser_gitworker_owned_branches",
                 "Branches this gitworker replica owns (all it writes without --membership).")
      .Set(static_cast<double>(snapshot->owned.size()));
  if (!lost.empty() && state.options.on_lost) state.options.on_lost(lost);
  if (state.options.on_published) state.options.on_published(*snapshot);
}

OwnershipActor::behavior_type OwnershipBehavior(Self self, OwnershipActorOptions options) {
  self->state.options = std::move(options);
  self->state.table = std::make_unique<membership::OwnershipTable>(self->state.options.me);
  self->state.held = !self->state.options.held || self->state.options.held();
  Publish(self, /*force=*/true);
  self->delayed_send(self, ToChrono(self->state.options.tick), otick_atom::value);
  return {
      [=](units_atom, std::vector<std::string> units) {
        std::sort(units.begin(), units.end());
        units.erase(std::unique(units.begin(), units.end()), units.end());
        if (units == self->state.units) return;
        self->state.units = units;
        self->state.table->SetUnits(std::move(units));
        Publish(self, /*force=*/true);  // owners of new units (NotOwner names them)
      },
      [=](members_atom, const membership::Membership& membership) {
        self->state.table->SetMembership(membership);
        Publish(self, /*force=*/true);
      },
      [=](otick_atom) {
        auto& state = self->state;
        const bool held = !state.options.held || state.options.held();
        if (held != state.held) {
          state.held = held;
          if (!held) {
            runtime::LogWarning(
                "membership Lease not held (renewals fail): every branch is "
                "treated as not owned",
                {{"replica", state.options.me}});
          }
          Publish(self);
        }
        self->delayed_send(self, ToChrono(state.options.tick), otick_atom::value);
      },
      [=](leave_atom) {
        self->state.leaving = true;
        runtime::LogInfo("leaving: deliveries are answered not_owner from now on",
                         {{"replica", self->state.options.me}});
        Publish(self, /*force=*/true);
        return true;
      },
  };
}

}  // namespace

OwnershipActor SpawnOwnershipActor(caf::actor_system& system, OwnershipActorOptions options) {
  return system.spawn(OwnershipBehavior, std::move(options));
}

}  // namespace reverser::gitworker
