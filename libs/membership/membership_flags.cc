#include "libs/membership/membership_flags.h"

#include "absl/flags/flag.h"
#include "libs/core/status.h"

ABSL_FLAG(absl::Duration, membership_lease_duration, absl::Seconds(15),
          "How long a replica's Lease stays valid after its last renewal (whole seconds; "
          "spec.leaseDurationSeconds). Longer than --membership_renew_deadline.");
ABSL_FLAG(absl::Duration, membership_renew_deadline, absl::Seconds(10),
          "A replica that could not renew its Lease for this long stops acting as an owner. "
          "Longer than --membership_renew_period, shorter than --membership_lease_duration.");
ABSL_FLAG(absl::Duration, membership_renew_period, absl::Seconds(2),
          "How often a replica renews its Lease.");
ABSL_FLAG(absl::Duration, membership_grace, absl::Seconds(2),
          "Extra time an observer keeps a member past its lease duration (clock skew, watch "
          "delay).");

namespace reverser::membership {

absl::StatusOr<MembershipTiming> MembershipTimingFromFlags() {
  MembershipTiming timing;
  timing.lease_duration = absl::GetFlag(FLAGS_membership_lease_duration);
  timing.renew_deadline = absl::GetFlag(FLAGS_membership_renew_deadline);
  timing.renew_period = absl::GetFlag(FLAGS_membership_renew_period);
  timing.grace = absl::GetFlag(FLAGS_membership_grace);
  if (absl::Status s = timing.Validate(); !s.ok()) {
    return core::Annotate(s,
                          "--membership_lease_duration / --membership_renew_deadline / "
                          "--membership_renew_period / --membership_grace");
  }
  return timing;
}

}  // namespace reverser::membership
