#pragma once

// The timing rules of Lease membership, as client-go's leader election has them:
//
//   renew_period < renew_deadline < lease_duration
//
// A member renews its Lease every `renew_period`. It counts itself a member only while its last
// successful renewal started less than `renew_deadline` ago (its own clock): past that it must
// stop acting as an owner, which it does before any observer can judge its Lease expired
// (`lease_duration`, plus `grace`, after the observer last saw it renewed). `grace` absorbs clock
// skew and the watch's delivery delay; it only ever makes an observer keep a member longer.

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace reverser::membership {

struct MembershipTiming {
  absl::Duration lease_duration = absl::Seconds(15);  // spec.leaseDurationSeconds (whole seconds)
  absl::Duration renew_deadline = absl::Seconds(10);
  absl::Duration renew_period = absl::Seconds(2);
  absl::Duration grace = absl::Seconds(2);

  // InvalidArgument unless 0 < renew_period < renew_deadline < lease_duration, the lease
  // duration is a whole number of seconds (at least 1) and grace >= 0.
  absl::Status Validate() const;
  // lease_duration in whole seconds (spec.leaseDurationSeconds).
  int64_t LeaseDurationSeconds() const;
};

}  // namespace reverser::membership
