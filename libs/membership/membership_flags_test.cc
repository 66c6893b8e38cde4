#include "libs/membership/membership_flags.h"

#include <gtest/gtest.h>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"

ABSL_DECLARE_FLAG(absl::Duration, membership_lease_duration);
ABSL_DECLARE_FLAG(absl::Duration, membership_renew_deadline);
ABSL_DECLARE_FLAG(absl::Duration, membership_renew_period);
ABSL_DECLARE_FLAG(absl::Duration, membership_grace);

namespace reverser::membership {
namespace {

TEST(MembershipFlagsTest, DefaultsAreClientGos) {
  auto timing = MembershipTimingFromFlags();
  ASSERT_TRUE(timing.ok()) << timing.status();
  EXPECT_EQ(timing->lease_duration, absl::Seconds(15));
  EXPECT_EQ(timing->renew_deadline, absl::Seconds(10));
  EXPECT_EQ(timing->renew_period, absl::Seconds(2));
  EXPECT_EQ(timing->grace, absl::Seconds(2));
}

TEST(MembershipFlagsTest, BrokenOrderingNamesTheFlags) {
  absl::SetFlag(&FLAGS_membership_renew_deadline, absl::Seconds(20));
  auto timing = MembershipTimingFromFlags();
  absl::SetFlag(&FLAGS_membership_renew_deadline, absl::Seconds(10));
  ASSERT_FALSE(timing.ok());
  EXPECT_EQ(timing.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(timing.status().message().find("--membership_renew_deadline"), std::string::npos);
  EXPECT_NE(timing.status().message().find("shorter than the lease duration"), std::string::npos);
}

}  // namespace
}  // namespace reverser::membership
