#include "libs/membership/timing.h"

#include "absl/strings/str_cat.h"

namespace reverser::membership {

absl::Status MembershipTiming::Validate() const {
  if (renew_period <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "membership: renew period must be positive, got ", absl::FormatDuration(renew_period)));
  }
  if (renew_period >= renew_deadline) {
    return absl::InvalidArgumentError(absl::StrCat(
        "membership: renew period (", absl::FormatDuration(renew_period),
        ") must be shorter than the renew deadline (", absl::FormatDuration(renew_deadline), ")"));
  }
  if (renew_deadline >= lease_duration) {
    return absl::InvalidArgumentError(absl::StrCat(
        "membership: renew deadline (", absl::FormatDuration(renew_deadline),
        ") must be shorter than the lease duration (", absl::FormatDuration(lease_duration), ")"));
  }
  if (lease_duration < absl::Seconds(1) ||
      lease_duration != absl::Seconds(absl::ToInt64Seconds(lease_duration))) {
    return absl::InvalidArgumentError(
        absl::StrCat("membership: lease duration must be a whole number of seconds, got ",
                     absl::FormatDuration(lease_duration)));
  }
  if (grace < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("membership: grace must not be negative, got ", absl::FormatDuration(grace)));
  }
  return absl::OkStatus();
}

int64_t MembershipTiming::LeaseDurationSeconds() const {
  return absl::ToInt64Seconds(lease_duration);
}

}  // namespace reverser::membership
