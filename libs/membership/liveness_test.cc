#include "libs/membership/liveness.h"

#include <gtest/gtest.h>

namespace reverser::membership {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1'700'000'000);

LeaseRecord Lease(const std::string& holder, absl::Time renew, int64_t duration = 15) {
  LeaseRecord r;
  r.name = "splicer-" + holder;
  r.holder = holder;
  r.lease_duration_seconds = duration;
  r.renew_time = renew;
  r.renew_time_text = FormatMicroTime(renew);
  r.address = holder + ":9000";
  return r;
}

std::vector<std::string> Ids(const std::vector<Member>& members) {
  std::vector<std::string> ids;
  for (const Member& m : members) ids.push_back(m.replica_id);
  return ids;
}

TEST(LivenessTest, LiveUntilDurationPlusGraceAfterObservation) {
  LivenessTracker t(absl::Seconds(2));
  t.Observe(Lease("a", kT0), kT0);
  EXPECT_EQ(Ids(t.Live(kT0 + absl::Seconds(16))), std::vector<std::string>{"a"});
  EXPECT_TRUE(t.Live(kT0 + absl::Seconds(17)).empty());  // 15 + 2: gone exactly then
  EXPECT_EQ(t.NextExpiry(kT0), kT0 + absl::Seconds(17));
  EXPECT_EQ(t.NextExpiry(kT0 + absl::Seconds(17)), std::nullopt);
}

TEST(LivenessTest, ARenewalIsTimedByTheObserversClockNotTheRenewTime) {
  LivenessTracker t(absl::ZeroDuration());
  t.Observe(Lease("a", kT0), kT0);
  // The member's clock runs an hour behind: its renewTime says "an hour ago", but the observer
  // saw it change now, so it is live for a full duration from now.
  t.Observe(Lease("a", kT0 - absl::Hours(1)), kT0 + absl::Seconds(10));
  EXPECT_EQ(Ids(t.Live(kT0 + absl::Seconds(24))), std::vector<std::string>{"a"});
  EXPECT_TRUE(t.Live(kT0 + absl::Seconds(25)).empty());
  // A clock running ahead gains nothing either.
  t.Observe(Lease("a", kT0 + absl::Hours(1)), kT0 + absl::Seconds(20));
  EXPECT_TRUE(t.Live(kT0 + absl::Seconds(35)).empty());
}

TEST(LivenessTest, TheSameRecordSeenAgainIsNotARenewal) {
  LivenessTracker t(absl::ZeroDuration());
  LeaseRecord a = Lease("a", kT0);
  t.Observe(a, kT0);
  a.resource_version = "99";  // e.g. an annotation changed, or a relist
  t.Observe(a, kT0 + absl::Seconds(14));
  t.Replace({a}, kT0 + absl::Seconds(14));
  EXPECT_TRUE(t.Live(kT0 + absl::Seconds(15)).empty());
}

TEST(LivenessTest, FirstSightUsesTheOlderOfRenewTimeAndNow) {
  LivenessTracker t(absl::Seconds(2));
  // Left behind by a replica that crashed a minute ago: dead on first sight.
  t.Replace({Lease("old", kT0 - absl::Minutes(1)), Lease("fresh", kT0 - absl::Seconds(5)),
             Lease("ahead", kT0 + absl::Minutes(5))},
            kT0);
  EXPECT_EQ(Ids(t.Live(kT0)), (std::vector<std::string>{"ahead", "fresh"}));
  // "fresh" counts from its renewTime (t0-5 + 17), "ahead" from now (t0 + 17).
  EXPECT_EQ(Ids(t.Live(kT0 + absl::Seconds(12))), std::vector<std::string>{"ahead"});
  EXPECT_TRUE(t.Live(kT0 + absl::Seconds(17)).empty());
  // The crashed one's successor renews: seen renewed now, live again.
  t.Observe(Lease("old", kT0 + absl::Seconds(20)), kT0 + absl::Seconds(20));
  EXPECT_EQ(Ids(t.Live(kT0 + absl::Seconds(21))), std::vector<std::string>{"old"});
}

TEST(LivenessTest, ReleasedInvalidAndDeletedLeasesAreNotLive) {
  LivenessTracker t(absl::Seconds(2));
  LeaseRecord released = Lease("a", kT0);
  released.holder = "";
  LeaseRecord no_duration = Lease("b", kT0, 0);
  LeaseRecord no_renew = Lease("c", kT0);
  no_renew.renew_time.reset();
  no_renew.renew_time_text.clear();
  LeaseRecord deleting = Lease("d", kT0);
  deleting.deleting = true;
  t.Replace({released, no_duration, no_renew, deleting, Lease("e", kT0)}, kT0);
  EXPECT_EQ(Ids(t.Live(kT0)), std::vector<std::string>{"e"});
  t.Remove("splicer-e");
  EXPECT_TRUE(t.Live(kT0).empty());
  EXPECT_EQ(t.NextExpiry(kT0), std::nullopt);
}

TEST(LivenessTest, AReleasedThenRetakenLeaseIsAFirstSightAgain) {
  LivenessTracker t(absl::ZeroDuration());
  t.Observe(Lease("a", kT0), kT0);
  LeaseRecord released = Lease("a", kT0);
  released.holder = "";
  t.Observe(released, kT0 + absl::Seconds(1));
  EXPECT_TRUE(t.Live(kT0 + absl::Seconds(1)).empty());
  t.Observe(Lease("a", kT0 + absl::Seconds(2)), kT0 + absl::Seconds(3));
  EXPECT_EQ(t.Live(kT0 + absl::Seconds(3))[0].expires_at, kT0 + absl::Seconds(17));
}

TEST(LivenessTest, ReplaceDropsLeasesNotListedAndKeepsObservations) {
  LivenessTracker t(absl::ZeroDuration());
  t.Observe(Lease("a", kT0), kT0);
  t.Observe(Lease("b", kT0), kT0);
  t.Replace({Lease("a", kT0)}, kT0 + absl::Seconds(10));
  std::vector<Member> live = t.Live(kT0 + absl::Seconds(10));
  ASSERT_EQ(Ids(live), std::vector<std::string>{"a"});
  EXPECT_EQ(live[0].expires_at, kT0 + absl::Seconds(15));
  EXPECT_EQ(live[0].address, "a:9000");
  EXPECT_EQ(live[0].lease_name, "splicer-a");
  EXPECT_EQ(live[0].renew_time, kT0);
}

TEST(LivenessTest, TwoLeasesOfOneHolderCountOnce) {
  LivenessTracker t(absl::ZeroDuration());
  LeaseRecord first = Lease("a", kT0);
  LeaseRecord second = Lease("a", kT0 + absl::Seconds(5));
  second.name = "splicer-a-copy";
  t.Observe(first, kT0);
  t.Observe(second, kT0 + absl::Seconds(5));
  std::vector<Member> live = t.Live(kT0 + absl::Seconds(6));
  ASSERT_EQ(live.size(), 1u);
  EXPECT_EQ(live[0].lease_name, "splicer-a-copy");
}

}  // namespace
}  // namespace reverser::membership
