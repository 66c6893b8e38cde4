#pragma once

// The membership flags every scaled-out service shares (--membership_lease_duration,
// --membership_renew_deadline, --membership_renew_period, --membership_grace), parsed once into
// a validated MembershipTiming (timing.h).

#include "absl/status/statusor.h"
#include "libs/membership/timing.h"

namespace reverser::membership {

// InvalidArgument naming the flags when their values break the timing rules.
absl::StatusOr<MembershipTiming> MembershipTimingFromFlags();

}  // namespace reverser::membership
