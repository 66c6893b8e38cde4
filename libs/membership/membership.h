#pragma once

// What a service sees of its replicas: the live members, and the interface it reads them
// through (MemberView, member_view.h, is the Lease-backed implementation; tests may supply
// their own).

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"

namespace reverser::membership {

struct Member {
  std::string replica_id;  // the Lease's holderIdentity
  std::string address;     // its gRPC address ("" if the Lease has none)
  std::string lease_name;
  // The last renewTime seen (the member's own clock) and when this observer will count the
  // member gone unless it sees another renewal (the observer's clock).
  std::optional<absl::Time> renew_time;
  absl::Time expires_at;

  // The identity part (what a membership change is): replica, address, Lease.
  bool SameMember(const Member& other) const {
    return replica_id == other.replica_id && address == other.address &&
           lease_name == other.lease_name;
  }
};

struct Membership {
  // Live members, sorted by replica id, one per replica id.
  std::vector<Member> members;
  // False until the first complete listing of the Leases was read: an unsynced view knows
  // nothing yet (not "no members").
  bool synced = false;
  // Counts membership changes (a change of the set of members or of an address).
  int64_t generation = 0;

  std::vector<std::string> ReplicaIds() const;
  const Member* Find(const std::string& replica_id) const;
};

// Where a service reads its membership from.
class MembershipSource {
 public:
  virtual ~MembershipSource() = default;
  // The membership as last computed (thread-safe).
  virtual Membership Current() const = 0;
};

// Called after each change, serialized, in generation order, on the source's own threads: it
// must not block (post to an actor).
using MembershipCallback = std::function<void(const Membership&)>;

}  // namespace reverser::membership
