// BranchOwnership's write fence: a publication that loses a branch waits for the push in flight
// (BeginWrite's grant), and no new push of that branch begins meanwhile.

#include "services/gitworker/branch_ownership.h"

#include <gtest/gtest.h>

#include <future>
#include <thread>

namespace reverser::gitworker {
namespace {

constexpr char kUnit[] = "branch:team/repo/main";
constexpr char kOther[] = "branch:team/repo/other";

std::shared_ptr<const OwnershipSnapshot> Owning(std::set<std::string> owned) {
  auto snapshot = std::make_shared<OwnershipSnapshot>();
  snapshot->owned = std::move(owned);
  return snapshot;
}

TEST(BranchOwnershipTest, APushIsGrantedOnlyForAnOwnedBranchWhileTheLeaseIsHeld) {
  bool held = true;
  BranchOwnership ownership([&] { return held; });
  EXPECT_EQ(ownership.BeginWrite(kUnit), nullptr);
  ownership.Publish(Owning({kUnit}));
  EXPECT_NE(ownership.BeginWrite(kUnit), nullptr);
  EXPECT_EQ(ownership.BeginWrite(kOther), nullptr);
  held = false;
  EXPECT_EQ(ownership.BeginWrite(kUnit), nullptr);
}

TEST(BranchOwnershipTest, ALossWaitsForThePushInFlightAndRefusesNewOnesMeanwhile) {
  BranchOwnership ownership;
  ownership.Publish(Owning({kUnit, kOther}));
  std::shared_ptr<void> in_flight = ownership.BeginWrite(kUnit);
  ASSERT_NE(in_flight, nullptr);

  // The ownership actor's side: revoke, then publish the loss.
  std::promise<bool> revoked;
  std::thread publisher([&] {
    revoked.set_value(ownership.Revoke({kUnit}, absl::Minutes(5)));
    ownership.Publish(Owning({kOther}));
  });
  // Once the revocation began no new push of the branch starts; the others are not held up.
  while (ownership.BeginWrite(kUnit) != nullptr) std::this_thread::yield();
  EXPECT_NE(ownership.BeginWrite(kOther), nullptr);
  // The loss is not published while the push runs.
  EXPECT_TRUE(ownership.MayWrite(kUnit));
  in_flight.reset();  // the push (and its log line) is done
  EXPECT_TRUE(revoked.get_future().get());
  publisher.join();
  EXPECT_FALSE(ownership.MayWrite(kUnit));
  EXPECT_EQ(ownership.BeginWrite(kUnit), nullptr);
}

TEST(BranchOwnershipTest, ARevocationGivesUpAfterItsTimeoutAndPublishingEndsIt) {
  BranchOwnership ownership;
  ownership.Publish(Owning({kUnit}));
  std::shared_ptr<void> stuck = ownership.BeginWrite(kUnit);
  EXPECT_FALSE(ownership.Revoke({kUnit}, absl::ZeroDuration()));
  EXPECT_EQ(ownership.BeginWrite(kUnit), nullptr);  // refused while revoking
  ownership.Publish(Owning({kUnit}));               // owned again: the refusal ends
  EXPECT_NE(ownership.BeginWrite(kUnit), nullptr);
}

}  // namespace
}  // namespace reverser::gitworker
