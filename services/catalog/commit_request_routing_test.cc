// RoutedCommitAttacher (--gitworker_membership) with real parts: tools/kube-sim holding two
// gitworker replicas' Leases, a MemberView of them (as CatalogService makes it), and two
// stand-in gitworkers over real gRPC that record the AttachCommits reaching them.
//   (a) before any gitworker Lease exists there is no owner: Unavailable (the controller polls
//       again), as for a GitTarget the tables do not have;
//   (b) each request reaches the replica owning its target's branch, computed as the splicer
//       and the gitworkers compute it (OwnershipTable over every target's branch);
//   (c) a replica refusing (FAILED_PRECONDITION, NotOwner in the details) is followed once, to
//       the owner it names; a second refusal is Unavailable.

#include <grpcpp/grpcpp.h>

#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "libs/core/clock.h"
#include "libs/membership/lease_member.h"
#include "libs/membership/member_view.h"
#include "libs/membership/ownership.h"
#include "libs/membership/test_cluster.h"
#include "libs/membership/units.h"
#include "services/catalog/commit_request_clients.h"
#include "tools/kube-sim/kube_sim.h"

namespace reverser::catalog {
namespace {

constexpr char kNamespace[] = "reverser";
constexpr int kTargets = 10;
const absl::Duration kWait = absl::Seconds(60);

// Records each AttachCommit's target; refuses the targets in `refuse` naming (replica, address).
class StandInGitworker final : public reverser::v1::GitWorker::Service {
 public:
  grpc::Status AttachCommit(grpc::ServerContext* /*context*/,
                            const reverser::v1::AttachCommitRequest* request,
                            reverser::v1::FinalizeResult* result) override {
    absl::MutexLock lock(&mu_);
    if (auto it = refuse_.find(request->target().name()); it != refuse_.end()) {
      refused_.push_back(request->target().name());
      reverser::v1::NotOwner not_owner;
      *not_owner.mutable_target() = request->target();
      not_owner.set_owner_replica(it->second.first);
      not_owner.set_owner_address(it->second.second);
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "not the owner",
                          not_owner.SerializeAsString());
    }
    attached_.push_back(request->target().name());
    result->set_resolved(false);
    return grpc::Status::OK;
  }
  void Refuse(const std::string& target, const std::string& owner, const std::string& address) {
    absl::MutexLock lock(&mu_);
    refuse_[target] = {owner, address};
  }
  std::vector<std::string> Attached() const {
    absl::MutexLock lock(&mu_);
    return attached_;
  }
  std::vector<std::string> Refused() const {
    absl::MutexLock lock(&mu_);
    return refused_;
  }
  void Clear() {
    absl::MutexLock lock(&mu_);
    attached_.clear();
    refused_.clear();
  }

 private:
  mutable absl::Mutex mu_;
  std::map<std::string, std::pair<std::string, std::string>> refuse_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> attached_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> refused_ ABSL_GUARDED_BY(mu_);
};

struct StandInServer {
  StandInServer() {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(&gitworker);
    server = builder.BuildAndStart();
  }
  ~StandInServer() { server->Shutdown(std::chrono::system_clock::now()); }
  std::string address() const { return absl::StrCat("127.0.0.1:", port); }
  StandInGitworker gitworker;
  int port = 0;
  std::unique_ptr<grpc::Server> server;
};

class CommitRequestRoutingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto cluster = membership::testing::StartTestCluster(kNamespace);
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    sim_ = std::move(cluster->sim);
    client_ = cluster->admin;

    tables_.set_generation(1);
    tables_.set_full(true);
    for (int i = 0; i < kTargets; ++i) {
      auto* table = tables_.add_upserted();
      auto* config = table->mutable_config();
      config->mutable_target()->set_namespace_("team");
      config->mutable_target()->set_name(absl::StrCat("t", i));
      config->mutable_target()->set_uid(absl::StrCat("uid-", i));
      config->mutable_destination()->set_provider_namespace("team");
      config->mutable_destination()->set_provider_name("repo");
      config->mutable_destination()->set_branch(absl::StrCat("b", i));
      *table->mutable_target() = config->target();
      *table->mutable_destination() = config->destination();
    }

    membership::MemberViewOptions view;
    view.service = "gitworker";
    view.namespace_ = kNamespace;
    view.reflector = membership::testing::TestReflectorOptions();
    auto gitworkers = membership::MemberView::Create(*client_, view, core::Clock::Real());
    ASSERT_TRUE(gitworkers.ok()) << gitworkers.status();
    view_ = std::move(*gitworkers);
    view_->Start();
    RoutedCommitAttacherOptions options;
    options.credentials = grpc::InsecureChannelCredentials();
    options.timeout = absl::Seconds(10);
    attacher_ = std::make_unique<RoutedCommitAttacher>(
        [this]() -> std::optional<reverser::v1::TableUpdate> { return tables_; }, view_.get(),
        options);
  }

  void TearDown() override {
    attacher_.reset();
    for (auto& lease : leases_) lease->Stop(/*release=*/true).IgnoreError();
    leases_.clear();
    if (view_) view_->Stop();
    if (sim_) sim_->Stop();
  }

  void Lease(const std::string& id, const std::string& address) {
    membership::LeaseMemberOptions options;
    options.identity = {"gitworker", id, kNamespace, address};
    auto member = membership::LeaseMember::Create(*client_, options, core::Clock::Real());
    ASSERT_TRUE(member.ok()) << member.status();
    ASSERT_TRUE((*member)->Renew().ok());
    (*member)->Start();
    leases_.push_back(std::move(*member));
  }

  static reverser::v1::AttachCommitRequest Request(int i) {
    reverser::v1::AttachCommitRequest request;
    request.set_namespace_("team");
    request.set_name(absl::StrCat("cr-", i));
    request.set_uid(absl::StrCat("cr-uid-", i));
    request.mutable_target()->set_namespace_("team");
    request.mutable_target()->set_name(absl::StrCat("t", i));
    return request;
  }

  // Who owns target i's branch with both stand-ins live, as every router computes it.
  std::string ExpectedOwner(int i) const {
    membership::OwnershipTable table("");
    std::vector<std::string> units;
    for (int t = 0; t < kTargets; ++t) {
      units.push_back(membership::BranchUnit("team", "repo", absl::StrCat("b", t)));
    }
    table.SetUnits(units);
    membership::Membership members;
    members.synced = true;
    members.members.push_back({"gw-a", a_.address(), "gitworker-gw-a"});
    members.members.push_back({"gw-b", b_.address(), "gitworker-gw-b"});
    table.SetMembership(members);
    return table.OwnerOf(membership::BranchUnit("team", "repo", absl::StrCat("b", i))).value_or("");
  }

  std::unique_ptr<kubesim::KubeSim> sim_;
  std::shared_ptr<kube::RestClient> client_;
  reverser::v1::TableUpdate tables_;
  std::unique_ptr<membership::MemberView> view_;
  std::unique_ptr<RoutedCommitAttacher> attacher_;
  std::vector<std::unique_ptr<membership::LeaseMember>> leases_;
  StandInServer a_, b_;
};

TEST_F(CommitRequestRoutingTest, EachRequestReachesItsBranchOwner) {
  // (a) No gitworker Lease yet: no owner, Unavailable; nothing is called.
  ASSERT_TRUE(view_->WaitFor([](const membership::Membership& m) { return m.synced; }, kWait));
  auto none = attacher_->Attach(Request(0));
  EXPECT_EQ(none.status().code(), absl::StatusCode::kUnavailable) << none.status();
  EXPECT_TRUE(a_.gitworker.Attached().empty());
  EXPECT_TRUE(b_.gitworker.Attached().empty());

  Lease("gw-a", a_.address());
  Lease("gw-b", b_.address());
  ASSERT_TRUE(view_->WaitFor(
      [](const membership::Membership& m) { return m.synced && m.members.size() == 2; }, kWait));
  // A target the tables do not have: Unavailable too.
  reverser::v1::AttachCommitRequest unknown = Request(0);
  unknown.mutable_target()->set_name("nope");
  EXPECT_EQ(attacher_->Attach(unknown).status().code(), absl::StatusCode::kUnavailable);

  // (b) Every request at its owner, and both replicas own some.
  std::set<std::string> at_a, at_b;
  for (int i = 0; i < kTargets; ++i) {
    auto result = attacher_->Attach(Request(i));
    ASSERT_TRUE(result.ok()) << result.status();
    const std::string owner = ExpectedOwner(i);
    auto route = attacher_->RouteOf(Request(i).target());
    ASSERT_TRUE(route.ok()) << route.status();
    EXPECT_EQ(route->owner, owner);
    EXPECT_EQ(route->unit, membership::BranchUnit("team", "repo", absl::StrCat("b", i)));
    (owner == "gw-a" ? at_a : at_b).insert(absl::StrCat("t", i));
  }
  const auto got_a = a_.gitworker.Attached(), got_b = b_.gitworker.Attached();
  EXPECT_EQ(std::set<std::string>(got_a.begin(), got_a.end()), at_a);
  EXPECT_EQ(std::set<std::string>(got_b.begin(), got_b.end()), at_b);
  EXPECT_EQ(got_a.size() + got_b.size(), static_cast<size_t>(kTargets));
  EXPECT_FALSE(at_a.empty());
  EXPECT_FALSE(at_b.empty());

  // (c) The owner refuses (its view differs): the request goes once more, to the one it names.
  int of_a = -1;
  for (int i = 0; i < kTargets && of_a < 0; ++i) {
    if (ExpectedOwner(i) == "gw-a") of_a = i;
  }
  ASSERT_GE(of_a, 0);
  const std::string target = absl::StrCat("t", of_a);
  a_.gitworker.Clear();
  b_.gitworker.Clear();
  a_.gitworker.Refuse(target, "gw-b", b_.address());
  auto followed = attacher_->Attach(Request(of_a));
  ASSERT_TRUE(followed.ok()) << followed.status();
  EXPECT_EQ(a_.gitworker.Refused(), std::vector<std::string>{target});
  EXPECT_EQ(b_.gitworker.Attached(), std::vector<std::string>{target});

  // Refused there too: Unavailable (the controller polls again), no third call.
  b_.gitworker.Refuse(target, "gw-a", a_.address());
  a_.gitworker.Clear();
  b_.gitworker.Clear();
  auto twice = attacher_->Attach(Request(of_a));
  EXPECT_EQ(twice.status().code(), absl::StatusCode::kUnavailable) << twice.status();
  EXPECT_EQ(a_.gitworker.Refused().size() + b_.gitworker.Refused().size(), 2u);
}

}  // namespace
}  // namespace reverser::catalog
