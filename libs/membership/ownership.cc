#include "libs/membership/ownership.h"

#include <algorithm>

#include "libs/membership/rendezvous.h"

namespace reverser::membership {

OwnershipTable::OwnershipTable(std::string me, double load_factor)
    : me_(std::move(me)), load_factor_(load_factor) {}

OwnershipChange OwnershipTable::SetUnits(std::vector<std::string> units) {
  std::sort(units.begin(), units.end());
  units.erase(std::unique(units.begin(), units.end()), units.end());
  units_ = std::move(units);
  return Recompute();
}

OwnershipChange OwnershipTable::SetMembership(const Membership& membership) {
  membership_ = membership;
  return Recompute();
}

std::optional<std::string> OwnershipTable::OwnerOf(const std::string& unit) const {
  auto it = owners_.find(unit);
  if (it == owners_.end()) return std::nullopt;
  return it->second;
}

std::optional<std::string> OwnershipTable::AddressOf(const std::string& replica_id) const {
  const Member* member = membership_.Find(replica_id);
  if (member == nullptr || member->address.empty()) return std::nullopt;
  return member->address;
}

OwnershipChange OwnershipTable::Recompute() {
  owners_.clear();
  if (membership_.synced) {
    std::vector<std::string> members = membership_.ReplicaIds();
    owners_ = BoundedOwners(units_, members, load_factor_);
  }
  std::set<std::string> owned;
  // Counted in only once its own Lease is seen: otherwise the others do not count it either.
  if (!me_.empty() && membership_.synced && membership_.Find(me_) != nullptr) {
    for (const auto& [unit, owner] : owners_) {
      if (owner == me_) owned.insert(unit);
    }
  }
  OwnershipChange change;
  std::set_difference(owned.begin(), owned.end(), owned_.begin(), owned_.end(),
                      std::back_inserter(change.gained));
  std::set_difference(owned_.begin(), owned_.end(), owned.begin(), owned.end(),
                      std::back_inserter(change.lost));
  owned_ = std::move(owned);
  return change;
}

}  // namespace reverser::membership
