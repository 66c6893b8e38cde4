#include "libs/core/clock.h"

#include "gtest/gtest.h"

namespace reverser::core {
namespace {

TEST(ClockTest, FakeClockMovesOnlyWhenTold) {
  FakeClock clock;
  absl::Time start = clock.Now();
  EXPECT_EQ(clock.Now(), start);
  clock.Advance(absl::Seconds(5));
  EXPECT_EQ(clock.Now() - start, absl::Seconds(5));
  Clock& as_interface = clock;
  EXPECT_EQ(as_interface.Now(), start + absl::Seconds(5));
}

TEST(ClockTest, RealClockAdvances) {
  absl::Time a = Clock::Real().Now();
  absl::Time b = Clock::Real().Now();
  EXPECT_LE(a, b);
}

}  // namespace
}  // namespace reverser::core
