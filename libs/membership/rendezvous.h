#pragma once

// Ownership of units (a materialization, a GitTarget, a branch: any string key) by rendezvous
// (highest-random-weight) hashing over the live members (pure).
//
// weight(unit, member) = XXH64(`<decimal byte length of member>:<member><unit>`, seed 0):
// XXH64 as specified by xxHash (github.com/Cyan4973/xxHash, doc/xxhash_spec.md) over the bytes,
// so it is the same on every platform, build and process (not std::hash); the length prefix makes
// the pair unambiguous. The owner of a unit is the member with the highest weight, ties (never
// seen in practice) going to the smaller replica id.
//
// Properties of Owner: every replica computes the same owner from the same member set; adding a
// member moves only the units that now hash to it; removing one moves only the units it owned.
// Each unit lands on a member independently and uniformly, so loads are binomial: balanced on
// average but without a hard bound — 30 units over 3 members put 15 or more on one member for
// about 13% of name sets (rendezvous_test.cc measures it).
//
// BoundedOwners adds the hard bound (rendezvous with bounded loads): units are placed in a fixed
// order (by their own hash), each on the highest-weight member that still has room under
// ceil(load_factor * units / members). It needs the whole unit set (every replica has it: units
// come from the catalog) and gives up strict minimal movement for the bound: a change of members
// moves about 5% more units than Owner's would, some displaced by the caps (measured in the test).

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace reverser::membership {

// XXH64 of `data` with `seed`.
uint64_t Xxh64(absl::string_view data, uint64_t seed = 0);
// The rendezvous weight of `member` for `unit`.
uint64_t RendezvousWeight(absl::string_view unit_key, absl::string_view member);

// The owner of `unit_key` among `members` (replica ids); nullopt when there are none.
std::optional<std::string> Owner(absl::string_view unit_key, absl::Span<const std::string> members);
// The units of `units` that `member` owns among `members` (in the order given).
std::vector<std::string> OwnedUnits(absl::string_view member, absl::Span<const std::string> units,
                                    absl::Span<const std::string> members);

// Every unit of `units` (duplicates once) mapped to its owner among `members`, no member owning
// more than ceil(load_factor * distinct units / members) (load_factor below 1 counts as 1).
// Empty when there are no members.
std::map<std::string, std::string> BoundedOwners(absl::Span<const std::string> units,
                                                 absl::Span<const std::string> members,
                                                 double load_factor = 1.25);

// A unit whose owner differs between two member sets ("" = no owner: the set was empty).
struct UnitMove {
  std::string unit;
  std::string from;
  std::string to;
  bool operator==(const UnitMove&) const = default;
};
// The units of `units` that change owner from `before` to `after` (in the order given).
std::vector<UnitMove> UnitMoves(absl::Span<const std::string> units,
                                absl::Span<const std::string> before,
                                absl::Span<const std::string> after);

}  // namespace reverser::membership
