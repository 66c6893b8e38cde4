// Two gitworker replicas in one process sharing the branches (--membership): their Leases on
// one kube-sim, one stand-in catalog publishing 10 GitTargets on 10 branches of one real bare
// remote, splicer-like clients on each replica's Deliver stream and the git CLI as judge.
//   (a) each owns its share (sum 10, neither empty); a delivery to the replica that does not
//       own the branch is answered not_owner (naming the owner) and commits nothing, the same
//       delivery to the owner is committed and acked;
//   (b) one leaves gracefully: the other owns all 10 and commits for a branch it refused;
//   (c) an AttachCommit at the replica that does not own the branch is refused
//       (FAILED_PRECONDITION, the NotOwner naming the owner), at the owner it is taken;
//   (d) ListBranches asked of one replica asks the other live replicas (local_only) and merges
//       their branches, each with its owner; a live Lease that does not answer is listed so.

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "libs/core/clock.h"
#include "libs/kube/reflector.h"
#include "libs/membership/lease_member.h"
#include "libs/membership/test_cluster.h"
#include "libs/runtime/service_host.h"
#include "proto/reverser/v1/catalog.grpc.pb.h"
#include "services/gitworker/gitworker_service.h"
#include "services/gitworker/test_support.h"
#include "tests/fixtures/git_repos.h"
#include "tests/fixtures/process.h"
#include "tests/fixtures/temp_dir.h"

namespace reverser::gitworker {
namespace {

using ::reverser::testing::Git;
using namespace ::reverser::gitworker::testsupport;  // NOLINT

constexpr char kNamespace[] = "reverser";
constexpr int kTargets = 10;
const absl::Duration kWait = absl::Seconds(60);

// Publishes one full table update to every WatchTables caller and keeps the stream open.
class TableCatalog final : public reverser::v1::Catalog::Service {
 public:
  explicit TableCatalog(reverser::v1::TableUpdate update) : update_(std::move(update)) {}
  grpc::Status WatchTables(grpc::ServerContext* context,
                           const reverser::v1::WatchTablesRequest* /*request*/,
                           grpc::ServerWriter<reverser::v1::TableUpdate>* writer) override {
    if (!writer->Write(update_)) return grpc::Status::OK;
    std::unique_lock lock(mu_);
    while (!context->IsCancelled()) cv_.wait_for(lock, std::chrono::milliseconds(50));
    return grpc::Status::OK;
  }

 private:
  const reverser::v1::TableUpdate update_;
  std::mutex mu_;
  std::condition_variable cv_;
};

// A gitworker replica's admin service reporting one branch of its own, b-x, and recording each
// request's local_only.
class StandInAdmin final : public reverser::v1::GitWorkerAdmin::Service {
 public:
  grpc::Status ListBranches(grpc::ServerContext* /*context*/,
                            const reverser::v1::ListBranchesRequest* request,
                            reverser::v1::ListBranchesResponse* response) override {
    {
      std::lock_guard lock(mu_);
      requests_.push_back(request->local_only());
    }
    auto* branch = response->add_branches();
    branch->mutable_destination()->set_provider_namespace("team");
    branch->mutable_destination()->set_provider_name("repo");
    branch->mutable_destination()->set_branch("b-x");
    branch->set_owner_replica("gw-x");
    branch->set_reported_by("gw-x");
    return grpc::Status::OK;
  }
  std::vector<bool> Requests() {
    std::lock_guard lock(mu_);
    return requests_;
  }

 private:
  std::mutex mu_;
  std::vector<bool> requests_;
};

struct ReplicaUnderTest {
  std::unique_ptr<runtime::ServiceHost> host;
  std::unique_ptr<GitWorkerService> service;
  bool stopped = false;

  std::set<std::string> Owned() const { return service->ownership()->Current()->owned; }
  std::string target() const { return absl::StrCat("127.0.0.1:", host->grpc_port()); }
  void Stop() {
    if (stopped) return;
    stopped = true;
    service->Stop();
    host->Shutdown();
  }
};

class GitWorkerReplicasTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto remote = testing::CreateBareRemote(dir_.path() + "/remote");
    ASSERT_TRUE(remote.ok()) << remote.status();
    remote_ = *remote;
    reverser::v1::TableUpdate update;
    update.set_generation(1);
    update.set_full(true);
    for (int i = 0; i < kTargets; ++i) {
      auto config = Config(remote_, 0, "clusters/a", absl::StrCat("t", i));
      config.mutable_destination()->set_branch(absl::StrCat("b", i));
      configs_.push_back(config);
      auto* table = update.add_upserted();
      *table->mutable_target() = config.target();
      *table->mutable_destination() = config.destination();
      *table->mutable_config() = config;
    }
    catalog_ = std::make_unique<TableCatalog>(std::move(update));
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &catalog_port_);
    builder.RegisterService(catalog_.get());
    catalog_server_ = builder.BuildAndStart();
    ASSERT_NE(catalog_port_, 0);

    auto cluster = membership::testing::StartTestCluster(kNamespace);
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    sim_ = std::move(cluster->sim);

    StartReplica(a_, "gw-a");
    StartReplica(b_, "gw-b");
  }

  void TearDown() override {
    a_.Stop();
    b_.Stop();
    if (catalog_server_) catalog_server_->Shutdown(std::chrono::system_clock::now());
    if (sim_) sim_->Stop();
  }

  void StartReplica(ReplicaUnderTest& replica, const std::string& id) {
    runtime::ServiceHostOptions host_options;
    host_options.service = "gitworker";
    host_options.listen_address = "127.0.0.1";
    host_options.grpc_port = 0;
    host_options.http_port = 0;
    host_options.instance = id;
    host_options.grpc_security.insecure = true;  // in-process: the test's own clients
    replica.host = std::make_unique<runtime::ServiceHost>(host_options);
    GitWorkerServiceOptions options;
    options.work_dir = dir_.path() + "/" + id;
    options.push_cooldown = absl::ZeroDuration();
    options.catalog_address = absl::StrCat("127.0.0.1:", catalog_port_);
    options.replica.enabled = true;
    options.replica.namespace_ = kNamespace;
    options.replica.replica_id = id;
    auto client = membership::testing::ClientFor(*sim_);
    ASSERT_TRUE(client.ok()) << client.status();
    options.kube_client = *client;
    options.membership_reflector = membership::testing::TestReflectorOptions();
    replica.service = std::make_unique<GitWorkerService>(*replica.host, options);
    ASSERT_EQ(replica.service->Register(), absl::OkStatus());
    ASSERT_EQ(replica.host->Start(), absl::OkStatus());
    ASSERT_EQ(replica.service->Start(), absl::OkStatus());
  }

  // Both see both members and all 10 units: the shares add up to 10, neither is empty.
  bool WaitForShares() {
    return testing::WaitFor(
        [&] {
          const auto a = a_.Owned(), b = b_.Owned();
          std::set<std::string> all(a.begin(), a.end());
          all.insert(b.begin(), b.end());
          return !a.empty() && !b.empty() && a.size() + b.size() == kTargets &&
                 all.size() == kTargets &&
                 a_.service->ownership()->Current()->owners.size() == kTargets &&
                 b_.service->ownership()->Current()->owners ==
                     a_.service->ownership()->Current()->owners;
        },
        kWait);
  }
  // A CommitRequest for target i, attached at `replica`.
  grpc::Status Attach(const ReplicaUnderTest& replica, int i,
                      reverser::v1::FinalizeResult* result) const {
    auto stub = reverser::v1::GitWorker::NewStub(
        grpc::CreateChannel(replica.target(), grpc::InsecureChannelCredentials()));
    reverser::v1::AttachCommitRequest request;
    request.set_namespace_("default");
    request.set_name(absl::StrCat("cr-", i));
    request.set_uid(absl::StrCat("cr-uid-", i));
    request.mutable_author()->set_username("alice");
    *request.mutable_target() = configs_[i].target();
    request.set_close_delay_seconds(60);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    return stub->AttachCommit(&context, request, result);
  }
  static grpc::Status Branches(const ReplicaUnderTest& replica, bool local_only,
                               reverser::v1::ListBranchesResponse* response) {
    auto stub = reverser::v1::GitWorkerAdmin::NewStub(
        grpc::CreateChannel(replica.target(), grpc::InsecureChannelCredentials()));
    reverser::v1::ListBranchesRequest request;
    request.set_local_only(local_only);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    return stub->ListBranches(&context, request, response);
  }

  std::string UnitOfTarget(int i) const { return UnitOf(configs_[i].destination()); }
  // The first target whose branch `replica` owns.
  int OwnedBy(const ReplicaUnderTest& replica) const {
    const auto owned = replica.Owned();
    for (int i = 0; i < kTargets; ++i) {
      if (owned.contains(UnitOfTarget(i))) return i;
    }
    return -1;
  }
  bool BranchOnRemote(int i) const {
    return Git(remote_, {"rev-parse", "--verify", "--quiet", absl::StrCat("refs/heads/b", i)}).ok();
  }
  static std::vector<reverser::v1::NotOwner> NotOwners(DeliveryClient& client,
                                                       const std::string& target) {
    std::vector<reverser::v1::NotOwner> out;
    for (const auto& f : client.Feedback()) {
      if (f.has_not_owner() && f.not_owner().target().name() == target) {
        out.push_back(f.not_owner());
      }
    }
    return out;
  }
  // A resync of target i writing ConfigMap default/cm-<i> = value, covering `rv`.
  uint64_t SendResync(DeliveryClient& client, int i, const std::string& value, uint64_t rv) {
    return client.SendResync(
        Snapshot(configs_[i], ConfigMaps(), {Object(ConfigMaps(), "default", "cm", value)}, rv));
  }

  testing::ScopedTempDir dir_{"gitworker-replicas"};
  std::string remote_;
  std::vector<reverser::v1::GitTargetConfig> configs_;
  std::unique_ptr<TableCatalog> catalog_;
  int catalog_port_ = 0;
  std::unique_ptr<grpc::Server> catalog_server_;
  std::unique_ptr<kubesim::KubeSim> sim_;
  ReplicaUnderTest a_, b_;
};

TEST_F(GitWorkerReplicasTest, EachOwnsItsShareTheOtherAnswersNotOwnerAndALeaverHandsOver) {
  // (a) Both see both members and all 10 units: the shares add up to 10, neither is empty.
  ASSERT_TRUE(WaitForShares());
  const int of_b = OwnedBy(b_);
  const int of_a = OwnedBy(a_);
  ASSERT_GE(of_b, 0);
  ASSERT_GE(of_a, 0);
  const std::string target_b = configs_[of_b].target().name();
  const std::string target_a = configs_[of_a].target().name();

  // To the replica that does not own the branch: not_owner naming the owner, credit for every
  // message, no commit, no ack.
  DeliveryClient to_a(a_.target());
  to_a.SendConfig(configs_[of_b]);
  SendResync(to_a, of_b, "1", 100);
  SendResync(to_a, of_b, "2", 101);
  ASSERT_TRUE(testing::WaitFor(
      [&] { return to_a.Accepted().size() == 3 && !NotOwners(to_a, target_b).empty(); }, kWait));
  const auto not_owner = NotOwners(to_a, target_b);
  ASSERT_EQ(not_owner.size(), 1u);  // once per (stream, target), not once per message
  EXPECT_EQ(not_owner[0].branch_unit(), UnitOfTarget(of_b));
  EXPECT_EQ(not_owner[0].owner_replica(), "gw-b");
  EXPECT_EQ(not_owner[0].owner_address(), b_.target());
  EXPECT_EQ(to_a.AckedRv(ConfigMaps(), target_b), 0u);

  // The same delivery to the owner: committed, pushed and acked.
  DeliveryClient to_b(b_.target());
  to_b.SendConfig(configs_[of_b]);
  SendResync(to_b, of_b, "1", 100);
  ASSERT_TRUE(testing::WaitFor([&] { return to_b.AckedRv(ConfigMaps(), target_b) == 100; }, kWait));
  EXPECT_TRUE(BranchOnRemote(of_b));
  EXPECT_TRUE(NotOwners(to_b, target_b).empty());
  // Only the owner wrote: the non-owner's messages are still not acked.
  EXPECT_EQ(to_a.AckedRv(ConfigMaps(), target_b), 0u);

  // B refuses a branch A owns.
  to_b.SendConfig(configs_[of_a]);
  SendResync(to_b, of_a, "1", 200);
  ASSERT_TRUE(testing::WaitFor([&] { return !NotOwners(to_b, target_a).empty(); }, kWait));
  EXPECT_EQ(NotOwners(to_b, target_a)[0].owner_replica(), "gw-a");
  EXPECT_FALSE(BranchOnRemote(of_a));

  // (b) A leaves gracefully (its Lease deleted): B owns all 10 and writes the branch it
  // refused, on the same stream.
  a_.Stop();
  ASSERT_TRUE(testing::WaitFor([&] { return b_.Owned().size() == kTargets; }, kWait));
  SendResync(to_b, of_a, "1", 201);
  ASSERT_TRUE(testing::WaitFor([&] { return to_b.AckedRv(ConfigMaps(), target_a) == 201; }, kWait));
  EXPECT_TRUE(BranchOnRemote(of_a));
  auto file =
      Git(remote_, {"show", absl::StrCat("b", of_a, ":clusters/a/default/configmaps/cm.yaml")});
  EXPECT_TRUE(file.ok()) << file.status();
}

// A CommitRequest attached at the replica that does not own its target's branch is refused
// (FAILED_PRECONDITION, the NotOwner naming the owner in the details); at the owner it is taken.
// ListBranches asked of one replica lists both replicas' branches, each with its owner; with
// local_only only its own.
TEST_F(GitWorkerReplicasTest, AttachCommitAtANonOwnerIsRefusedAndBranchesListsEveryReplica) {
  ASSERT_TRUE(WaitForShares());
  const int of_a = OwnedBy(a_);
  const int of_b = OwnedBy(b_);
  ASSERT_GE(of_a, 0);
  ASSERT_GE(of_b, 0);

  reverser::v1::FinalizeResult result;
  grpc::Status refused = Attach(a_, of_b, &result);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << refused.error_message();
  EXPECT_NE(refused.error_message().find("gw-b"), std::string::npos) << refused.error_message();
  reverser::v1::NotOwner not_owner;
  ASSERT_TRUE(not_owner.ParseFromString(refused.error_details()));
  EXPECT_EQ(not_owner.branch_unit(), UnitOfTarget(of_b));
  EXPECT_EQ(not_owner.owner_replica(), "gw-b");
  EXPECT_EQ(not_owner.owner_address(), b_.target());
  grpc::Status taken = Attach(b_, of_b, &result);
  EXPECT_TRUE(taken.ok()) << taken.error_message();
  EXPECT_FALSE(result.resolved());
}

// ListBranches asked of one replica asks every other live replica (local_only) and merges:
// here the other real replica and a stand-in replica (its Lease names a server that reports one
// branch), each branch with its owner; a live Lease whose replica does not answer is listed as
// such. (The replicas write no branch here: a replica stopped in-process while one of its branch
// actors lives does not finish its shutdown, with or without ListBranches.)
TEST_F(GitWorkerReplicasTest, BranchesAskedOfOneReplicaListEveryReplicasBranches) {
  ASSERT_TRUE(WaitForShares());
  StandInAdmin stand_in;
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&stand_in);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(port, 0);
  auto client = membership::testing::ClientFor(*sim_);
  ASSERT_TRUE(client.ok()) << client.status();
  std::vector<std::unique_ptr<membership::LeaseMember>> leases;
  for (const auto& [id, address] : std::vector<std::pair<std::string, std::string>>{
           {"gw-x", absl::StrCat("127.0.0.1:", port)}, {"gw-c", "127.0.0.1:1"}}) {
    membership::LeaseMemberOptions options;
    options.identity = {"gitworker", id, kNamespace, address};
    auto member = membership::LeaseMember::Create(**client, options, core::Clock::Real());
    ASSERT_TRUE(member.ok()) << member.status();
    ASSERT_TRUE((*member)->Renew().ok());
    (*member)->Start();
    leases.push_back(std::move(*member));
  }
  ASSERT_TRUE(a_.service->replica()->view().WaitFor(
      [](const membership::Membership& m) { return m.members.size() == 4; }, kWait));

  reverser::v1::ListBranchesResponse all;
  ASSERT_TRUE(Branches(a_, /*local_only=*/false, &all).ok());
  ASSERT_EQ(all.branches_size(), 1) << all.DebugString();
  EXPECT_EQ(all.branches(0).destination().branch(), "b-x");
  EXPECT_EQ(all.branches(0).owner_replica(), "gw-x");
  EXPECT_EQ(all.branches(0).reported_by(), "gw-x");
  std::map<std::string, bool> answered;
  for (const auto& r : all.replicas()) {
    answered[r.replica()] = r.answered();
    if (r.replica() == "gw-c") {
      EXPECT_FALSE(r.error().empty()) << r.DebugString();
    }
    if (r.replica() == "gw-x") {
      EXPECT_EQ(r.branches(), 1u) << r.DebugString();
    }
  }
  ASSERT_GT(all.replicas_size(), 0);
  EXPECT_EQ(all.replicas(0).replica(), "gw-a");  // the one asked, first
  EXPECT_EQ(answered, (std::map<std::string, bool>{
                          {"gw-a", true}, {"gw-b", true}, {"gw-c", false}, {"gw-x", true}}))
      << all.DebugString();
  // The others were asked for their own branches only (no fan-out from them).
  EXPECT_EQ(stand_in.Requests(), (std::vector<bool>{true}));

  // local_only: this replica's own (none), nobody else asked.
  reverser::v1::ListBranchesResponse local;
  ASSERT_TRUE(Branches(a_, /*local_only=*/true, &local).ok());
  EXPECT_EQ(local.branches_size(), 0) << local.DebugString();
  EXPECT_EQ(local.replicas_size(), 0);
  EXPECT_EQ(stand_in.Requests().size(), 1u);

  for (auto& lease : leases) lease->Stop(/*release=*/true).IgnoreError();
  server->Shutdown(std::chrono::system_clock::now());
}

}  // namespace
}  // namespace reverser::gitworker
