// The splicer binary following a catalog over real gRPC that goes away and comes back (a catalog
// restart: a new generation epoch, a full update once primed): the GitTargets it lists again keep
// their delivery cursors and the reference watch cursors; one the catalog then removes loses
// them. The catalog is a small in-process peer serving WatchTables; the gitworker peer acks every
// delivery as pushed.

#include <grpcpp/grpcpp.h>

#include <condition_variable>
#include <mutex>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "libs/redisstore/materialization_store.h"
#include "libs/redisstore/test_redis.h"
#include "proto/reverser/v1/catalog.grpc.pb.h"
#include "services/splicer/test_support.h"
#include "tests/fixtures/process.h"
#include "tests/fixtures/redis_server.h"
#include "tests/fixtures/service_process.h"

namespace reverser::splicer {
namespace {

// Streams its table updates, in order, to every WatchTables caller until it is shut down.
class TableCatalog final : public reverser::v1::Catalog::Service {
 public:
  void Push(reverser::v1::TableUpdate update) {
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
  grpc::Status ReportStreamSummary(
      grpc::ServerContext* /*context*/, const reverser::v1::StreamSummary* /*request*/,
      reverser::v1::ReportStreamSummaryResponse* /*response*/) override {
    return grpc::Status::OK;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<reverser::v1::TableUpdate> updates_;
};

reverser::v1::TableUpdate Full(uint64_t generation, const std::vector<std::string>& uids) {
  return testutil::FullConfigMapTables(generation, uids, "team");
}

class SplicerCatalogRestartTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto redis = testing::RedisServer::Start();
    ASSERT_TRUE(redis.ok()) << redis.status();
    redis_ = std::move(*redis);
    auto conn = redisstore::ConnectTo(*redis_);
    ASSERT_TRUE(conn.ok()) << conn.status();
    conn_ = std::move(*conn);
    ASSERT_TRUE(testutil::SeedTeamConfigMapCheckpoint(conn_.get()).ok());
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &gitworker_port_);
    builder.RegisterService(&gitworker_);
    gitworker_server_ = builder.BuildAndStart();
    ASSERT_TRUE(gitworker_server_);
  }
  void TearDown() override {
    splicer_.reset();
    StopCatalog();
    gitworker_server_->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(200));
  }

  // A new catalog (on the same port after the first) serving `first`.
  void StartCatalog(reverser::v1::TableUpdate first) {
    catalog_ = std::make_unique<TableCatalog>();
    catalog_->Push(std::move(first));
    grpc::ServerBuilder builder;
    builder.AddListeningPort(absl::StrCat("127.0.0.1:", catalog_port_),
                             grpc::InsecureServerCredentials(),
                             catalog_port_ == 0 ? &catalog_port_ : nullptr);
    builder.RegisterService(catalog_.get());
    catalog_server_ = builder.BuildAndStart();
    ASSERT_TRUE(catalog_server_);
  }
  void StopCatalog() {
    if (!catalog_server_) return;
    catalog_server_->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(200));
    catalog_server_.reset();
    catalog_.reset();
  }

  static std::string AckedKey(const std::string& uid) {
    return "reverser:splice:v1:" + uid + ":configmaps:ns:team:acked";
  }
  static std::string WatchKey(const std::string& uid) {
    return "gitops-reverser:watch:v1:target:" + uid + ":configmaps:namespace:team:last-rv";
  }
  std::string Get(const std::string& key) {
    auto v = redis_->Cli({"GET", key});
    return v.ok() ? std::string(absl::StripTrailingAsciiWhitespace(*v)) : "<error>";
  }
  bool Exists(const std::string& key) {
    auto v = conn_->Command({"EXISTS", key});
    return v.ok() && v->integer() == 1;
  }
  bool Delivered(const std::string& uid) {
    return Get(AckedKey(uid)).rfind("5-18446744073709551615@", 0) == 0 && Get(WatchKey(uid)) == "5";
  }
  std::string LogTail() {
    std::string log = splicer_ ? splicer_->Logs() : "";
    return log.size() > 4000 ? log.substr(log.size() - 4000) : log;
  }

  std::unique_ptr<testing::RedisServer> redis_;
  std::unique_ptr<redisstore::RedisConnection> conn_;
  testutil::AckingGitWorker gitworker_;
  int gitworker_port_ = 0;
  std::unique_ptr<grpc::Server> gitworker_server_;
  std::unique_ptr<TableCatalog> catalog_;
  int catalog_port_ = 0;
  std::unique_ptr<grpc::Server> catalog_server_;
  std::unique_ptr<testing::ServiceProcess> splicer_;
};

TEST_F(SplicerCatalogRestartTest, ListedTargetsKeepTheirCursorsARemovedOneLosesThem) {
  StartCatalog(Full(1'000'000, {"ta", "tb"}));
  auto splicer = testing::ServiceProcess::Start(
      "splicer", testing::RunfilePath("services/splicer/splicer"),
      {"--redis_address=" + redis_->address(),
       absl::StrCat("--gitworker_address=127.0.0.1:", gitworker_port_),
       absl::StrCat("--catalog_address=127.0.0.1:", catalog_port_), "--attribution=false",
       "--reference_key_prefix=gitops-reverser"});
  ASSERT_TRUE(splicer.ok()) << splicer.status();
  splicer_ = std::move(*splicer);
  ASSERT_TRUE(
      testing::WaitFor([&] { return Delivered("ta") && Delivered("tb"); }, absl::Seconds(20)))
      << LogTail();
  const std::string ta_cursor = Get(AckedKey("ta"));
  const std::string tb_cursor = Get(AckedKey("tb"));

  // The catalog restarts: its stream breaks, and the new one (a later epoch) sends the full set
  // once primed, here with one target more — whose cursors show the update was applied.
  StopCatalog();
  StartCatalog(Full(2'000'000, {"tb", "ta", "tc"}));
  ASSERT_TRUE(testing::WaitFor([&] { return Delivered("tc"); }, absl::Seconds(30))) << LogTail();
  EXPECT_EQ(Get(AckedKey("ta")), ta_cursor);
  EXPECT_EQ(Get(AckedKey("tb")), tb_cursor);
  EXPECT_EQ(Get(WatchKey("ta")), "5");
  EXPECT_EQ(Get(WatchKey("tb")), "5");
  EXPECT_EQ(LogTail().find("delivery cursors deleted"), std::string::npos) << LogTail();

  // The GitTarget is deleted: the catalog's delta removes it, and its cursors go.
  reverser::v1::TableUpdate removal;
  removal.set_generation(2'000'001);
  *removal.add_removed() = testutil::ConfigMapTable("tb", "team").target();
  catalog_->Push(removal);
  EXPECT_TRUE(testing::WaitFor([&] { return !Exists(AckedKey("tb")) && !Exists(WatchKey("tb")); },
                               absl::Seconds(10)))
      << LogTail();
  EXPECT_EQ(Get(AckedKey("ta")), ta_cursor);
  EXPECT_TRUE(Exists(AckedKey("tc")));
}

}  // namespace
}  // namespace reverser::splicer
