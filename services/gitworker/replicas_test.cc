// Two gitworker replicas in one process sharing the branches (--membership): their Leases on
// one kube-sim, one stand-in catalog publishing 10 GitTargets on 10 branches of one real bare
// remote, splicer-like clients on each replica's Deliver stream and the git CLI as judge.
//   (a) each owns its share (sum 10, neither empty); a delivery to the replica that does not
//       own the branch is answered not_owner (naming the owner) and commits nothing, the same
//       delivery to the owner is committed and acked;
//   (b) one leaves gracefully: the other owns all 10 and commits for a branch it refused.

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "libs/kube/reflector.h"
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

    auto sim = kubesim::KubeSim::Start(kubesim::KubeSimOptions{});
    ASSERT_TRUE(sim.ok()) << sim.status();
    sim_ = std::move(*sim);
    auto admin = membership::testing::ClientFor(*sim_);
    ASSERT_TRUE(admin.ok()) << admin.status();
    nlohmann::json ns = {
        {"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", kNamespace}}}};
    ASSERT_TRUE((*admin)->Create({"", "v1", "namespaces"}, "", ns).ok());

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
  ASSERT_TRUE(testing::WaitFor(
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
      kWait));
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

}  // namespace
}  // namespace reverser::gitworker
