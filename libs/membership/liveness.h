#pragma once

// Which Leases are live, judged by an observer with its own clock (pure; MemberView feeds it).
//
// The rule (client-go's LeaderElector judges another holder the same way): an observer never
// compares a Lease's renewTime with its own clock once it has seen the Lease renewed. It keeps,
// per Lease, the time (its clock) at which it first saw the current renewal — a renewal being
// a change of renewTime or holder — and counts the member live while
//
//   now < observed_at + leaseDurationSeconds + grace
//
// so skew between the member's and the observer's clocks does not matter. The one exception is
// a Lease seen for the first time (at startup or when it appears): the observer has not seen
// it renewed, so `observed_at = min(now, renewTime)`. A Lease a crashed replica left behind
// long ago is thereby dead at once rather than kept for another full duration, while a Lease
// whose writer's clock runs ahead is treated as just observed. A writer whose clock runs behind
// by more than the lease duration plus grace is judged dead on first sight until its next
// renewal is seen (at most a renew period later); `grace` is the skew that is tolerated there.
//
// Not live at all: no holder (released), a non-positive duration, no parseable renewTime, a
// deletionTimestamp. A deleted Lease is gone at once. Two Leases naming one holder count once
// (the later deadline).

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "libs/membership/lease.h"
#include "libs/membership/membership.h"

namespace reverser::membership {

class LivenessTracker {
 public:
  explicit LivenessTracker(absl::Duration grace) : grace_(grace) {}

  // The Lease as read at `now` (an ADDED or MODIFIED event).
  void Observe(const LeaseRecord& lease, absl::Time now);
  // The Lease is gone (DELETED).
  void Remove(absl::string_view lease_name);
  // A complete listing at `now`: Leases not in it are gone; those already known keep their
  // observation unless renewed meanwhile.
  void Replace(const std::vector<LeaseRecord>& leases, absl::Time now);

  // Live members at `now`, sorted by replica id.
  std::vector<Member> Live(absl::Time now) const;
  // The earliest time after `now` at which a live member's Lease expires (when to look again).
  std::optional<absl::Time> NextExpiry(absl::Time now) const;
  size_t size() const { return entries_.size(); }

 private:
  struct Entry {
    LeaseRecord lease;
    absl::Time observed_at;
    absl::Time expires_at;  // InfinitePast when not held
  };
  Entry Judge(const LeaseRecord& lease, const Entry* previous, absl::Time now) const;

  absl::Duration grace_;
  std::map<std::string, Entry> entries_;  // by Lease name
};

}  // namespace reverser::membership
