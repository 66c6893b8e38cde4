// The gitworker binary following a catalog for its targets' configs (the default,
// --target_config_source=catalog): what a splicer delivers never names where to write. A
// stand-in catalog (an in-process Catalog/WatchTables server) publishes the GitTarget; a
// splicer-like client delivers a config naming another remote; real bare remotes and the git
// CLI judge where commits went.

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>

#include "absl/strings/str_split.h"
#include "proto/reverser/v1/catalog.grpc.pb.h"
#include "services/gitworker/target_configs.h"
#include "services/gitworker/test_support.h"
#include "tests/fixtures/git_repos.h"
#include "tests/fixtures/process.h"
#include "tests/fixtures/service_process.h"
#include "tests/fixtures/temp_dir.h"

namespace reverser::gitworker {
namespace {

using ::reverser::testing::Git;
using namespace ::reverser::gitworker::testsupport;  // NOLINT

// Publishes the tables it is given, in order, to every WatchTables caller.
class TableCatalog final : public reverser::v1::Catalog::Service {
 public:
  void Publish(const reverser::v1::GitTargetConfig& config, uint64_t generation) {
    reverser::v1::TableUpdate update;
    update.set_generation(generation);
    update.set_full(true);
    auto* table = update.add_upserted();
    *table->mutable_target() = config.target();
    *table->mutable_destination() = config.destination();
    *table->mutable_config() = config;
    {
      std::lock_guard lock(mu_);
      updates_.push_back(std::move(update));
    }
    cv_.notify_all();
  }
  grpc::Status WatchTables(grpc::ServerContext* context,
                           const reverser::v1::WatchTablesRequest* /*request*/,
                           grpc::ServerWriter<reverser::v1::TableUpdate>* writer) override {
    size_t sent = 0;
    std::unique_lock lock(mu_);
    while (!context->IsCancelled()) {
      while (sent < updates_.size()) {
        if (!writer->Write(updates_[sent++])) return grpc::Status::OK;
      }
      cv_.wait_for(lock, std::chrono::milliseconds(50));
    }
    return grpc::Status::OK;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<reverser::v1::TableUpdate> updates_;
};

class CatalogConfigsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto remote = testing::CreateBareRemote(dir_.path() + "/owner");
    ASSERT_TRUE(remote.ok()) << remote.status();
    remote_ = *remote;
    auto attacker = testing::CreateBareRemote(dir_.path() + "/attacker");
    ASSERT_TRUE(attacker.ok()) << attacker.status();
    attacker_ = *attacker;
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &catalog_port_);
    builder.RegisterService(&catalog_);
    catalog_server_ = builder.BuildAndStart();
    ASSERT_NE(catalog_port_, 0);
    auto service = testing::ServiceProcess::Start(
        "gitworker", testing::RunfilePath("services/gitworker/gitworker"),
        {"--work_dir=" + dir_.path() + "/work", "--push_cooldown=0s",
         "--catalog_address=127.0.0.1:" + std::to_string(catalog_port_)});
    ASSERT_TRUE(service.ok()) << service.status();
    service_ = std::move(*service);
    ASSERT_EQ(service_->WaitReady(), absl::OkStatus());
  }

  void TearDown() override {
    service_.reset();
    if (catalog_server_) catalog_server_->Shutdown(std::chrono::system_clock::now());
  }

  static size_t Commits(const std::string& remote) {
    auto log = Git(remote, {"log", "--format=%s", "main"});
    if (!log.ok()) return 0;  // no main branch: nothing was ever pushed
    return std::vector<std::string>(absl::StrSplit(*log, '\n', absl::SkipEmpty())).size();
  }

  testing::ScopedTempDir dir_{"catalog-configs"};
  std::string remote_;
  std::string attacker_;
  TableCatalog catalog_;
  int catalog_port_ = 0;
  std::unique_ptr<grpc::Server> catalog_server_;
  std::unique_ptr<testing::ServiceProcess> service_;
};

TEST_F(CatalogConfigsTest, ADeliveredRemoteIsNeverWrittenToOnlyTheCatalogsIs) {
  const auto owner = Config(remote_, 0);
  auto forged = owner;
  forged.set_remote_url(attacker_);  // what a compromised splicer would send
  forged.set_credentials_secret("victim/git-credentials");

  const size_t owner_before = Commits(remote_);
  const size_t attacker_before = Commits(attacker_);
  DeliveryClient client(service_->grpc_target());
  catalog_.Publish(owner, 1);
  client.SendConfig(forged);
  const uint64_t resync = client.SendResync(
      Snapshot(forged, ConfigMaps(), {Object(ConfigMaps(), "default", "a", "1")}, 100));
  // The declaration is taken; what it says disagrees with the catalog, so the resync waits,
  // unaccepted, however long (the stream's credit stays with it).
  ASSERT_TRUE(testing::WaitFor([&] { return client.Accepted().size() == 1; }, absl::Seconds(10)));

  // The genuine config, as the catalog has it: now the resync is written, to the catalog's
  // remote. The forged remote never receives anything.
  client.SendConfig(owner);
  ASSERT_TRUE(testing::WaitFor([&] { return client.AckedRv(ConfigMaps()) == 100; },
                               absl::Seconds(30)))
      << service_->Logs();
  const std::vector<uint64_t> accepted = client.Accepted();
  EXPECT_EQ(accepted, (std::vector<uint64_t>{1, resync, 3}));
  EXPECT_EQ(Commits(remote_), owner_before + 1);
  EXPECT_EQ(Commits(attacker_), attacker_before);
}

TEST_F(CatalogConfigsTest, DeliveriesWaitForTheCatalogToPublishTheirTarget) {
  const auto owner = Config(remote_, 0);
  const size_t before = Commits(remote_);
  DeliveryClient client(service_->grpc_target());
  client.SendConfig(owner);
  client.SendResync(Snapshot(owner, ConfigMaps(), {Object(ConfigMaps(), "default", "a", "1")}, 7));
  ASSERT_TRUE(testing::WaitFor([&] { return client.Accepted().size() == 1; }, absl::Seconds(10)));
  catalog_.Publish(owner, 1);
  ASSERT_TRUE(testing::WaitFor([&] { return client.AckedRv(ConfigMaps()) == 7; },
                               absl::Seconds(30)))
      << service_->Logs();
  EXPECT_EQ(Commits(remote_), before + 1);
}

TEST(TargetConfigBookTest, ListenersSeeEachChangeAndTheRemoval) {
  TargetConfigBook book;
  reverser::v1::GitTargetConfig a;
  a.mutable_target()->set_namespace_("team");
  a.mutable_target()->set_name("a");
  a.set_remote_url("https://git.example/a.git");
  book.Put(a);
  std::vector<std::string> seen;
  const uint64_t id = book.Subscribe("team/a", [&](const reverser::v1::GitTargetConfig* config) {
    seen.push_back(config == nullptr ? "removed" : config->remote_url());
  });
  book.Put(a);  // unchanged: no call
  a.set_remote_url("https://git.example/a2.git");
  book.Put(a);
  reverser::v1::TableUpdate empty_full;
  empty_full.set_full(true);
  book.Apply(empty_full);
  EXPECT_EQ(seen, (std::vector<std::string>{"https://git.example/a.git",
                                            "https://git.example/a2.git", "removed"}));
  EXPECT_EQ(book.size(), 0u);
  book.Unsubscribe(id);
  book.Put(a);
  EXPECT_EQ(seen.size(), 3u);
  EXPECT_EQ(TargetRefKey(a.target()), "team/a");
}

}  // namespace
}  // namespace reverser::gitworker
