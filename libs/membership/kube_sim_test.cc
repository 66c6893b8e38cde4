// LeaseMember and MemberView against the test API server (tools/kube-sim) over real HTTP:
// the Lease as written, renewals by resourceVersion with conflicts re-read, release on a
// graceful stop, the view's list+watch, expiry by the injected clock, stale and hostile Leases.

#include <gtest/gtest.h>

#include <vector>

#include "absl/synchronization/mutex.h"
#include "libs/core/clock.h"
#include "libs/kube/api_error.h"
#include "libs/membership/lease_member.h"
#include "libs/membership/member_view.h"
#include "libs/membership/ownership.h"
#include "libs/membership/replica.h"
#include "libs/membership/test_cluster.h"

namespace reverser::membership {
namespace {

using nlohmann::json;

constexpr char kNamespace[] = "reverser";
const absl::Duration kWait = absl::Seconds(30);

class MembershipKubeSimTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto cluster = testing::StartTestCluster(kNamespace);
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    sim_ = std::move(cluster->sim);
    admin_ = cluster->admin;
  }
  void TearDown() override {
    views_.clear();
    members_.clear();
    clients_.clear();
    admin_.reset();
    if (sim_) sim_->Stop();
  }

  kube::RestClient& NewClient() {
    auto client = testing::ClientFor(*sim_);
    EXPECT_TRUE(client.ok()) << client.status();
    clients_.push_back(*client);
    return *clients_.back();
  }

  LeaseMember& NewMember(const std::string& replica, const core::Clock& clock) {
    LeaseMemberOptions options;
    options.identity = {"splicer", replica, kNamespace, replica + ".splicer:9000"};
    options.timing = timing_;
    auto member = LeaseMember::Create(NewClient(), options, clock);
    EXPECT_TRUE(member.ok()) << member.status();
    members_.push_back(std::move(*member));
    return *members_.back();
  }

  MemberView& NewView(const core::Clock& clock, MembershipCallback callback = {}) {
    MemberViewOptions options{.service = "splicer", .namespace_ = kNamespace, .timing = timing_};
    options.reflector = testing::TestReflectorOptions();
    auto view = MemberView::Create(NewClient(), options, clock, std::move(callback));
    EXPECT_TRUE(view.ok()) << view.status();
    views_.push_back(std::move(*view));
    views_.back()->Start();
    return *views_.back();
  }

  absl::StatusOr<json> GetLease(const std::string& name) {
    return admin_->Get(LeasesResource(), kNamespace, name);
  }

  static bool Ids(const Membership& m, const std::vector<std::string>& ids) {
    return m.synced && m.ReplicaIds() == ids;
  }

  MembershipTiming timing_;  // 15 s lease, 10 s deadline, 2 s period, 2 s grace
  std::unique_ptr<kubesim::KubeSim> sim_;
  std::shared_ptr<kube::RestClient> admin_;
  // Stops every view and member now. Their threads read the test body's clock (and a view's
  // callback its locals): a test with a local clock calls this before they go out of scope.
  void StopAll() {
    views_.clear();
    members_.clear();
  }

  std::vector<std::shared_ptr<kube::RestClient>> clients_;
  std::vector<std::unique_ptr<LeaseMember>> members_;
  std::vector<std::unique_ptr<MemberView>> views_;
};

TEST_F(MembershipKubeSimTest, TheLeaseAsWrittenAndRenewed) {
  core::FakeClock clock(absl::FromUnixMicros(1'700'000'000'250'000));
  LeaseMember& member = NewMember("splicer-0", clock);
  EXPECT_FALSE(member.HeldAt(clock.Now()));
  ASSERT_TRUE(member.Renew().ok()) << member.status().last_error;
  auto lease = GetLease("splicer-splicer-0");
  ASSERT_TRUE(lease.ok()) << lease.status();
  EXPECT_EQ((*lease)["metadata"]["labels"][kMembershipLabel], "splicer");
  EXPECT_EQ((*lease)["metadata"]["annotations"][kAddressAnnotation], "splicer-0.splicer:9000");
  EXPECT_EQ((*lease)["spec"]["holderIdentity"], "splicer-0");
  EXPECT_EQ((*lease)["spec"]["leaseDurationSeconds"], 15);
  EXPECT_EQ((*lease)["spec"]["renewTime"], "2023-11-14T22:13:20.250000Z");
  EXPECT_EQ((*lease)["spec"]["acquireTime"], "2023-11-14T22:13:20.250000Z");
  EXPECT_TRUE(member.HeldAt(clock.Now()));

  clock.Advance(absl::Seconds(2));
  ASSERT_TRUE(member.Renew().ok());
  lease = GetLease("splicer-splicer-0");
  EXPECT_EQ((*lease)["spec"]["renewTime"], "2023-11-14T22:13:22.250000Z");
  EXPECT_EQ((*lease)["spec"]["acquireTime"], "2023-11-14T22:13:20.250000Z");  // kept
  EXPECT_EQ(member.status().renewals, 2);
  EXPECT_EQ(member.status().resource_version, (*lease)["metadata"]["resourceVersion"]);

  // The renew deadline, by the member's own clock.
  clock.Advance(absl::Seconds(10) - absl::Microseconds(1));
  EXPECT_TRUE(member.HeldAt(clock.Now()));
  clock.Advance(absl::Microseconds(1));
  EXPECT_FALSE(member.HeldAt(clock.Now()));
  StopAll();
}

TEST_F(MembershipKubeSimTest, AConflictingWriteIsReReadAndRenewedOver) {
  core::FakeClock clock;
  LeaseMember& member = NewMember("splicer-0", clock);
  ASSERT_TRUE(member.Renew().ok());
  auto lease = GetLease("splicer-splicer-0");
  ASSERT_TRUE(lease.ok());
  const std::string old_rv = (*lease)["metadata"]["resourceVersion"];
  // Someone else writes the Lease (kubectl annotate, another client): the member's cached
  // resourceVersion is stale, and kube-sim says 409 to a write carrying it.
  (*lease)["metadata"]["annotations"]["note"] = "touched";
  ASSERT_TRUE(admin_->Update(LeasesResource(), kNamespace, *lease).ok());
  json stale = *lease;
  stale["metadata"]["resourceVersion"] = old_rv;
  absl::Status conflict = admin_->Update(LeasesResource(), kNamespace, stale).status();
  EXPECT_TRUE(kube::IsApiConflict(conflict)) << conflict;

  clock.Advance(absl::Seconds(2));
  ASSERT_TRUE(member.Renew().ok()) << member.status().last_error;
  lease = GetLease("splicer-splicer-0");
  EXPECT_EQ((*lease)["spec"]["renewTime"], FormatMicroTime(clock.Now()));
  EXPECT_EQ(member.status().failures, 0);

  // Deleted behind its back: created again.
  ASSERT_TRUE(admin_->Delete(LeasesResource(), kNamespace, "splicer-splicer-0").ok());
  clock.Advance(absl::Seconds(2));
  ASSERT_TRUE(member.Renew().ok()) << member.status().last_error;
  EXPECT_TRUE(GetLease("splicer-splicer-0").ok());
  StopAll();
}

TEST_F(MembershipKubeSimTest, TheViewSeesMembersJoinExpireAndLeave) {
  core::FakeClock clock;
  absl::Mutex mu;
  std::vector<std::vector<std::string>> seen;
  std::vector<int64_t> generations;
  MemberView& view = NewView(clock, [&](const Membership& m) {
    absl::MutexLock lock(&mu);
    seen.push_back(m.ReplicaIds());
    generations.push_back(m.generation);
  });
  ASSERT_TRUE(view.WaitFor([](const Membership& m) { return m.synced; }, kWait));
  EXPECT_TRUE(view.Current().members.empty());

  LeaseMember& a = NewMember("a", clock);
  LeaseMember& b = NewMember("b", clock);
  ASSERT_TRUE(a.Renew().ok());
  ASSERT_TRUE(b.Renew().ok());
  ASSERT_TRUE(view.WaitFor([](const Membership& m) { return Ids(m, {"a", "b"}); }, kWait));
  EXPECT_EQ(view.Current().Find("a")->address, "a.splicer:9000");

  // b keeps renewing, a does not: a is gone lease duration + grace after it was last seen.
  for (int i = 0; i < 8; ++i) {
    clock.Advance(absl::Seconds(2));
    ASSERT_TRUE(b.Renew().ok());
    const absl::Time renewed = clock.Now();
    ASSERT_TRUE(view.WaitFor(
        [&](const Membership& m) { return m.Find("b") && m.Find("b")->renew_time == renewed; },
        kWait));
    view.Recheck();
    if (i < 7) {
      EXPECT_TRUE(Ids(view.Current(), {"a", "b"})) << i;  // up to t0+16 < t0+15+2
    }
  }
  clock.Advance(absl::Seconds(1));  // t0 + 17
  view.Recheck();
  EXPECT_TRUE(Ids(view.Current(), {"b"}));

  // a renews again: back.
  ASSERT_TRUE(a.Renew().ok());
  ASSERT_TRUE(view.WaitFor([](const Membership& m) { return Ids(m, {"a", "b"}); }, kWait));

  // b leaves gracefully: gone at once, no clock needed.
  ASSERT_TRUE(b.Stop(/*release=*/true).ok());
  EXPECT_FALSE(GetLease("splicer-b").ok());
  ASSERT_TRUE(view.WaitFor([](const Membership& m) { return Ids(m, {"a"}); }, kWait));
  EXPECT_FALSE(b.HeldAt(clock.Now()));
  {
    // Current() moves before the callback runs: wait for the callback to see the last change
    // too, or Stop() would drop it.
    absl::MutexLock lock(&mu);
    auto saw_last = [](std::vector<std::vector<std::string>>* published) {
      return !published->empty() && published->back() == std::vector<std::string>{"a"};
    };
    EXPECT_TRUE(mu.AwaitWithTimeout(absl::Condition(+saw_last, &seen), kWait));
  }

  view.Stop();
  absl::MutexLock lock(&mu);
  const std::vector<std::vector<std::string>> expected = {{},    {"a"},      {"a", "b"},
                                                          {"b"}, {"a", "b"}, {"a"}};
  // "a" and "b" may join in one step or two (the watch delivers them apart).
  std::vector<std::vector<std::string>> got = seen;
  if (got.size() == expected.size() - 1) got.insert(got.begin() + 1, {"a"});
  EXPECT_EQ(got, expected);
  for (size_t i = 1; i < generations.size(); ++i) EXPECT_GT(generations[i], generations[i - 1]);
}

TEST_F(MembershipKubeSimTest, StaleForeignAndHostileLeasesAreNotMembers) {
  core::FakeClock clock;
  auto lease = [&](const std::string& name, json spec) {
    return json{{"apiVersion", "coordination.k8s.io/v1"},
                {"kind", "Lease"},
                {"metadata", {{"name", name}, {"labels", {{kMembershipLabel, "splicer"}}}}},
                {"spec", std::move(spec)}};
  };
  // Left behind by a replica that died an hour ago (and never released it).
  ASSERT_TRUE(admin_
                  ->Create(LeasesResource(), kNamespace,
                           lease("splicer-dead",
                                 {{"holderIdentity", "dead"},
                                  {"leaseDurationSeconds", 15},
                                  {"renewTime", FormatMicroTime(clock.Now() - absl::Hours(1))}}))
                  .ok());
  // Released (no holder), malformed (a renewTime that is not a time: kube-apiserver would refuse
  // it with 400, kube-sim stores Lease specs unchecked, so the view meets it here).
  ASSERT_TRUE(admin_
                  ->Create(LeasesResource(), kNamespace,
                           lease("splicer-released", {{"leaseDurationSeconds", 15},
                                                      {"renewTime", FormatMicroTime(clock.Now())}}))
                  .ok());
  ASSERT_TRUE(admin_
                  ->Create(LeasesResource(), kNamespace,
                           lease("splicer-odd", {{"holderIdentity", "odd"},
                                                 {"leaseDurationSeconds", 15},
                                                 {"renewTime", "soon"}}))
                  .ok());
  // Another service's member.
  json other = lease("catalog-x", {{"holderIdentity", "x"},
                                   {"leaseDurationSeconds", 15},
                                   {"renewTime", FormatMicroTime(clock.Now())}});
  other["metadata"]["labels"][kMembershipLabel] = "catalog";
  ASSERT_TRUE(admin_->Create(LeasesResource(), kNamespace, other).ok());

  LeaseMember& live = NewMember("live", clock);
  ASSERT_TRUE(live.Renew().ok());
  MemberView& view = NewView(clock);
  ASSERT_TRUE(view.WaitFor([](const Membership& m) { return Ids(m, {"live"}); }, kWait));
  StopAll();
}

// The loop on the real clock: a member that starts is seen; one that stops gracefully is gone
// at once; one that stops without releasing stays until its Lease expires.
TEST_F(MembershipKubeSimTest, TheRenewLoopJoinsAndReleases) {
  timing_.renew_period = absl::Milliseconds(200);
  LeaseMember& a = NewMember("a", core::Clock::Real());
  LeaseMember& b = NewMember("b", core::Clock::Real());
  MemberView& view = NewView(core::Clock::Real());
  a.Start();
  b.Start();
  ASSERT_TRUE(view.WaitFor([](const Membership& m) { return Ids(m, {"a", "b"}); }, kWait));
  ASSERT_TRUE(a.WaitForRenewals(3, kWait));  // it keeps renewing
  EXPECT_TRUE(a.HeldAt(absl::Now()));
  ASSERT_TRUE(a.Stop(/*release=*/true).ok());
  ASSERT_TRUE(view.WaitFor([](const Membership& m) { return Ids(m, {"b"}); }, kWait));
  ASSERT_TRUE(b.Stop(/*release=*/false).ok());
  EXPECT_TRUE(GetLease("splicer-b").ok());
  EXPECT_TRUE(Ids(view.Current(), {"b"}));  // until 17 s after its last renewal
}

TEST_F(MembershipKubeSimTest, ReplicasJoinOwnTheirShareAndLeave) {
  timing_.renew_period = absl::Milliseconds(200);
  std::vector<std::unique_ptr<Replica>> replicas;
  for (const std::string id : {"gitworker-0", "gitworker-1"}) {
    MemberIdentity identity{"gitworker", id, kNamespace, id + ":9090"};
    auto replica = Replica::Join(NewClient(), identity, timing_, core::Clock::Real(), {},
                                 testing::TestReflectorOptions());
    ASSERT_TRUE(replica.ok()) << replica.status();
    replicas.push_back(std::move(*replica));
  }
  auto both = [](const Membership& m) { return Ids(m, {"gitworker-0", "gitworker-1"}); };
  ASSERT_TRUE(replicas[0]->view().WaitFor(both, kWait));
  ASSERT_TRUE(replicas[1]->view().WaitFor(both, kWait));
  EXPECT_TRUE(replicas[0]->Held());
  std::vector<std::string> units;
  for (int i = 0; i < 10; ++i) units.push_back("branch:team/github/b" + std::to_string(i));
  OwnershipTable first("gitworker-0"), second("gitworker-1");
  first.SetUnits(units);
  second.SetUnits(units);
  first.SetMembership(replicas[0]->Current());
  second.SetMembership(replicas[1]->Current());
  EXPECT_EQ(first.owned().size() + second.owned().size(), 10u);
  EXPECT_FALSE(first.owned().empty());
  EXPECT_EQ(first.AddressOf("gitworker-1"), "gitworker-1:9090");
  // A graceful leave: the other sees it go at once and takes every unit.
  ASSERT_TRUE(replicas[1]->Leave().ok());
  ASSERT_TRUE(replicas[0]->view().WaitFor(
      [](const Membership& m) { return Ids(m, {"gitworker-0"}); }, kWait));
  first.SetMembership(replicas[0]->Current());
  EXPECT_EQ(first.owned().size(), 10u);
  EXPECT_EQ(GetLease("gitworker-gitworker-1").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(MembershipKubeSimTest, AReplicaInANamespaceThatDoesNotExistFailsToJoin) {
  MemberIdentity identity{"gitworker", "gitworker-0", "missing", ""};
  auto replica = Replica::Join(NewClient(), identity, timing_, core::Clock::Real(), {},
                               testing::TestReflectorOptions());
  ASSERT_FALSE(replica.ok());
  EXPECT_NE(replica.status().message().find("gitworker-gitworker-0 in missing"), std::string::npos)
      << replica.status();
}

TEST(MembershipOptionsTest, InvalidOptionsAreRefused) {
  kube::RestClient client(nullptr);
  LeaseMemberOptions options;
  options.identity = {"splicer", "", "ns", ""};
  EXPECT_EQ(LeaseMember::Create(client, options, core::Clock::Real()).status().code(),
            absl::StatusCode::kInvalidArgument);
  options.identity.replica_id = "a";
  options.timing.renew_deadline = absl::Seconds(20);
  EXPECT_EQ(LeaseMember::Create(client, options, core::Clock::Real()).status().code(),
            absl::StatusCode::kInvalidArgument);
  MemberViewOptions view{.service = "Bad", .namespace_ = "ns"};
  EXPECT_EQ(MemberView::Create(client, view, core::Clock::Real()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace reverser::membership
