#pragma once

// Which units one replica owns, recomputed from the unit set and the live members (pure; one
// actor owns it).
//
// Owners are BoundedOwners(units, members, load_factor) (rendezvous.h): every replica that sees
// the same units and members computes the same table, and no member owns more than
// ceil(load_factor · units / members). A replica owns nothing until its view is synced and it
// sees itself among the members (its own Lease is written and read back), so a replica that has
// just started, or that its view counts out, never acts as an owner.
//
// A router (the splicer choosing a gitworker) uses the same table with an empty `me`: OwnerOf
// answers for every unit.

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "libs/membership/membership.h"

namespace reverser::membership {

struct OwnershipChange {
  std::vector<std::string> gained;  // units this replica owns now and did not before
  std::vector<std::string> lost;    // units it owned and no longer does
  bool empty() const { return gained.empty() && lost.empty(); }
};

class OwnershipTable {
 public:
  // `me`: this replica's id ("" for a router, which owns nothing).
  explicit OwnershipTable(std::string me, double load_factor = 1.25);

  // A new unit set (duplicates count once) and/or membership; what this replica gained and lost.
  OwnershipChange SetUnits(std::vector<std::string> units);
  OwnershipChange SetMembership(const Membership& membership);

  bool Owns(const std::string& unit) const { return owned_.contains(unit); }
  // The unit's owner (replica id) and its address; nullopt without a synced view with members,
  // or for a unit not in the set.
  std::optional<std::string> OwnerOf(const std::string& unit) const;
  std::optional<std::string> AddressOf(const std::string& replica_id) const;
  const std::set<std::string>& owned() const { return owned_; }
  const std::map<std::string, std::string>& owners() const { return owners_; }
  const Membership& membership() const { return membership_; }
  const std::string& me() const { return me_; }

 private:
  OwnershipChange Recompute();

  const std::string me_;
  const double load_factor_;
  std::vector<std::string> units_;
  Membership membership_;
  std::map<std::string, std::string> owners_;  // unit → replica id
  std::set<std::string> owned_;
};

}  // namespace reverser::membership
