// The pause scenario, with the libraries alone: two replicas' LeaseMembers against kube-sim,
// one observer's MemberView, ownership by rendezvous and Redis epochs (a real redis-server).
// Replica "a" owns a unit and is paused (its renewals stop: a GC pause, SIGSTOP, a VM
// migration) past its lease; the view counts it out; "b" takes the unit over with a new epoch;
// when "a" resumes, its fenced write is refused and it learns it lost the unit; once it renews
// again it rejoins and the unit is handed back under a third epoch.
//
// Every clock is one FakeClock moved by the test; the only waits are for conditions (the
// view having seen a renewal), each with a deadline.

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "libs/core/clock.h"
#include "libs/membership/lease_member.h"
#include "libs/membership/member_view.h"
#include "libs/membership/rendezvous.h"
#include "libs/membership/test_cluster.h"
#include "libs/redisstore/ownership_store.h"
#include "libs/redisstore/test_redis.h"
#include "tests/fixtures/redis_server.h"

namespace reverser::membership {
namespace {

using nlohmann::json;
using redisstore::Fence;
using redisstore::FencedCommands;
using redisstore::OwnershipStore;

constexpr char kNamespace[] = "reverser";
constexpr char kData[] = "reverser:test:unit-data";
const absl::Duration kWait = absl::Seconds(30);

FencedCommands Write(const std::string& value) { return {{kData}, {{"SET", kData, value}}}; }

class PauseScenarioTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto cluster = testing::StartTestCluster(kNamespace);
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    sim_ = std::move(cluster->sim);
    auto redis = reverser::testing::RedisServer::Start();
    ASSERT_TRUE(redis.ok()) << redis.status();
    redis_ = std::move(*redis);
  }
  void TearDown() override {
    view_.reset();
    members_.clear();
    clients_.clear();
    if (sim_) sim_->Stop();
  }

  kube::RestClient& NewClient() {
    auto client = testing::ClientFor(*sim_);
    EXPECT_TRUE(client.ok()) << client.status();
    clients_.push_back(*client);
    return *clients_.back();
  }

  // One replica: its Lease and its own Redis connection.
  struct Replica {
    LeaseMember* member;
    std::unique_ptr<redisstore::RedisConnection> redis;
    std::unique_ptr<OwnershipStore> store;
  };
  Replica NewReplica(const std::string& id) {
    LeaseMemberOptions options;
    options.identity = {"splicer", id, kNamespace, id + ":9000"};
    options.timing = timing_;
    auto member = LeaseMember::Create(NewClient(), options, clock_);
    EXPECT_TRUE(member.ok()) << member.status();
    members_.push_back(std::move(*member));
    auto redis = redisstore::ConnectTo(*redis_);
    EXPECT_TRUE(redis.ok()) << redis.status();
    Replica r{members_.back().get(), std::move(*redis), nullptr};
    r.store = std::make_unique<OwnershipStore>(r.redis.get(), redisstore::KeyPrefix::Default());
    return r;
  }

  // Renews `member` and waits until the view has seen that renewal.
  void RenewSeen(LeaseMember& member) {
    ASSERT_TRUE(member.Renew().ok()) << member.status().last_error;
    const std::string id = member.identity().replica_id;
    const absl::Time renewed = clock_.Now();
    ASSERT_TRUE(view_->WaitFor(
        [&](const Membership& m) { return m.Find(id) && m.Find(id)->renew_time == renewed; },
        kWait))
        << id;
  }

  std::string Data() {
    auto out = redis_->Cli({"GET", kData});
    EXPECT_TRUE(out.ok()) << out.status();
    return out.ok() ? *out : "";
  }

  core::FakeClock clock_;
  MembershipTiming timing_;  // 15 s lease, 10 s renew deadline, 2 s period, 2 s grace
  std::unique_ptr<kubesim::KubeSim> sim_;
  std::unique_ptr<reverser::testing::RedisServer> redis_;
  std::vector<std::shared_ptr<kube::RestClient>> clients_;
  std::vector<std::unique_ptr<LeaseMember>> members_;
  std::unique_ptr<MemberView> view_;
};

TEST_F(PauseScenarioTest, APausedOwnerIsCountedOutFencedOffAndLearnsItLostTheUnit) {
  absl::Mutex mu;
  std::vector<std::vector<std::string>> changes;
  MemberViewOptions view_options{.service = "splicer", .namespace_ = kNamespace, .timing = timing_};
  view_options.reflector = testing::TestReflectorOptions();
  auto view = MemberView::Create(NewClient(), view_options, clock_, [&](const Membership& m) {
    absl::MutexLock lock(&mu);
    changes.push_back(m.ReplicaIds());
  });
  ASSERT_TRUE(view.ok()) << view.status();
  view_ = std::move(*view);
  view_->Start();

  Replica a = NewReplica("a");
  Replica b = NewReplica("b");
  RenewSeen(*a.member);
  RenewSeen(*b.member);
  ASSERT_EQ(view_->Current().ReplicaIds(), (std::vector<std::string>{"a", "b"}));

  // A unit "a" owns among {a, b}; it takes it over and writes.
  std::vector<std::string> units;
  for (int i = 0; i < 30; ++i) units.push_back(absl::StrCat("apps/deployments:ns:team-", i));
  std::string unit;
  for (const std::string& u : units) {
    if (Owner(u, view_->Current().ReplicaIds()) == "a") {
      unit = u;
      break;
    }
  }
  ASSERT_FALSE(unit.empty());
  auto fence_a = a.store->TakeOver(unit, "a");
  ASSERT_TRUE(fence_a.ok()) << fence_a.status();
  EXPECT_EQ(fence_a->epoch, 1);
  ASSERT_TRUE(a.store->FencedWrite(*fence_a, Write("a@1")).ok());
  const absl::Time a_last_renewed = clock_.Now();

  // "a" is paused: it renews no more. "b" goes on renewing every period, the view sees each
  // renewal, and looks again after each step of the clock.
  int steps = 0;
  while (view_->Current().Find("a") != nullptr) {
    ASSERT_LT(++steps, 20) << "a was never counted out";
    clock_.Advance(timing_.renew_period);
    RenewSeen(*b.member);
    view_->Recheck();
  }
  EXPECT_EQ(view_->Current().ReplicaIds(), std::vector<std::string>{"b"});
  // Counted out no earlier than lease duration + grace after it was last seen renewing.
  EXPECT_GE(clock_.Now() - a_last_renewed, timing_.lease_duration + timing_.grace);
  // And "a", by its own clock, stopped counting itself in before that (renew deadline).
  EXPECT_FALSE(a.member->HeldAt(clock_.Now()));
  EXPECT_FALSE(a.member->HeldAt(a_last_renewed + timing_.renew_deadline));
  EXPECT_TRUE(b.member->HeldAt(clock_.Now()));

  // "b" sees the unit move to it, takes it over with a new epoch and writes.
  std::vector<UnitMove> moves = UnitMoves(units, {"a", "b"}, view_->Current().ReplicaIds());
  ASSERT_TRUE(std::find(moves.begin(), moves.end(), UnitMove{unit, "a", "b"}) != moves.end());
  for (const UnitMove& move : moves) EXPECT_EQ(move.from, "a");  // only a's units move
  auto fence_b = b.store->TakeOver(unit, "b");
  ASSERT_TRUE(fence_b.ok());
  EXPECT_EQ(fence_b->epoch, 2);
  ASSERT_TRUE(b.store->FencedWrite(*fence_b, Write("b@2")).ok());

  // "a" resumes, still believing it owns the unit: its write is refused and writes nothing.
  absl::Status late = a.store->FencedWrite(*fence_a, Write("a@1 late")).status();
  EXPECT_TRUE(redisstore::IsFenced(late)) << late;
  EXPECT_EQ(Data(), "b@2\n");
  // It learns who owns the unit now.
  auto now_owner = a.store->Read(unit);
  ASSERT_TRUE(now_owner.ok());
  EXPECT_EQ(*now_owner, *fence_b);

  // It renews again and rejoins; the unit hashes to it again, so "b" hands it back: "a" takes
  // it over under a third epoch and "b"'s writes are refused from then on.
  RenewSeen(*a.member);
  ASSERT_EQ(view_->Current().ReplicaIds(), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(Owner(unit, view_->Current().ReplicaIds()), "a");
  auto fence_a3 = a.store->TakeOver(unit, "a");
  ASSERT_TRUE(fence_a3.ok());
  EXPECT_EQ(fence_a3->epoch, 3);
  EXPECT_TRUE(redisstore::IsFenced(b.store->FencedWrite(*fence_b, Write("b@2 late")).status()));
  ASSERT_TRUE(a.store->FencedWrite(*fence_a3, Write("a@3")).ok());
  EXPECT_EQ(Data(), "a@3\n");

  view_->Stop();
  absl::MutexLock lock(&mu);
  ASSERT_GE(changes.size(), 3u);
  EXPECT_EQ(changes[changes.size() - 2], std::vector<std::string>{"b"});
  EXPECT_EQ(changes.back(), (std::vector<std::string>{"a", "b"}));
}

}  // namespace
}  // namespace reverser::membership
