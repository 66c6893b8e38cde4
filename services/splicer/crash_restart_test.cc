// The splicer binary SIGKILLed at random points while a burst of changes streams through it (and
// once while the materializer compacts the stream past its cursor): after every restart it
// resumes from its persisted cursor (or splices again), so every change reaches the gitworker at
// least once and the state the gitworker ends with is exactly the cluster's. The gitworker is a
// recording peer over real gRPC that acks each delivery as pushed the moment it arrives.
// The same binary and peer also serve the SplicerAdmin calls' test (ListStreams, Resplice).

#include <grpcpp/grpcpp.h>

#include <condition_variable>
#include <iostream>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "libs/core/proto_convert.h"
#include "libs/redisstore/delivery_cursor_store.h"
#include "libs/redisstore/materialization_store.h"
#include "libs/redisstore/test_redis.h"
#include "nlohmann/json.hpp"
#include "proto/reverser/v1/gitworker.grpc.pb.h"
#include "proto/reverser/v1/splicer.grpc.pb.h"
#include "services/splicer/test_support.h"
#include "tests/fixtures/process.h"
#include "tests/fixtures/redis_server.h"
#include "tests/fixtures/service_process.h"
#include "tests/fixtures/temp_dir.h"

namespace reverser::splicer {
namespace {

using nlohmann::json;

// Records every delivery in arrival order, across connections, and acks it as pushed at once.
class RecordingGitWorker final : public reverser::v1::GitWorker::Service {
 public:
  grpc::Status Deliver(grpc::ServerContext* /*context*/,
                       grpc::ServerReaderWriter<reverser::v1::DeliveryFeedback,
                                                reverser::v1::DeliveryMessage>* stream) override {
    reverser::v1::DeliveryMessage message;
    while (stream->Read(&message)) {
      reverser::v1::DeliveryFeedback accepted;
      accepted.set_accepted_sequence(message.sequence());
      stream->Write(accepted);
      if (!message.has_resync() && !message.has_event()) continue;  // a target config
      {
        std::lock_guard lock(mu_);
        received_.push_back(message);
      }
      cv_.notify_all();
      stream->Write(*testutil::PushedAck(message));
    }
    return grpc::Status::OK;
  }

  size_t count() {
    std::lock_guard lock(mu_);
    return received_.size();
  }
  // Waits until at least `n` deliveries have arrived.
  bool WaitForCount(size_t n, absl::Duration timeout) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, absl::ToChronoMilliseconds(timeout),
                        [&] { return received_.size() >= n; });
  }
  // Waits until a delivery reaches `position`: an event at or past it, or a resync covering it
  // (a re-splice after a restart may fold much of a burst into one resync, so counting
  // deliveries would depend on when it came).
  bool WaitForCoverage(const core::StreamPosition& position, absl::Duration timeout) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, absl::ToChronoMilliseconds(timeout), [&] {
      for (const auto& message : received_) {
        const core::StreamPosition reached =
            message.has_resync()  ? core::FromProto(message.resync().coverage_head())
            : message.has_event() ? core::FromProto(message.event().position())
                                  : core::StreamPosition::Zero();
        if (!(reached < position)) return true;
      }
      return false;
    });
  }
  std::vector<reverser::v1::DeliveryMessage> received() {
    std::lock_guard lock(mu_);
    return received_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<reverser::v1::DeliveryMessage> received_;
};

// Names of its own (not splice_stream_test's `team`/`target-uid`), so the two never meet even if
// they ever shared a Redis.
constexpr char kTargetsJson[] = R"({"upserted": [{
  "target": {"namespace": "crash", "name": "mirror", "uid": "crash-target"},
  "types": [{
    "type": {"gvk": {"version": "v1", "kind": "ConfigMap"},
             "gvr": {"version": "v1", "resource": "configmaps"},
             "scope": "RESOURCE_SCOPE_NAMESPACED"},
    "namespaces": {"crash": {"all": true}}}]}]})";

std::string ConfigMap(const std::string& name, const std::string& value, uint64_t rv) {
  return testutil::ConfigMapJson("crash", name, value, rv, "v");
}

// The value a delivered ConfigMap carries in Git.
std::string ValueOf(const reverser::v1::ObjectBody& body) {
  json object = json::parse(body.sanitized_json(), nullptr, false);
  if (!object.is_object() || !object.contains("data")) return "<no data>";
  return object["data"].value("v", "<no v>");
}

class SplicerCrashRestartTest : public ::testing::Test {
 protected:
  using Model = std::map<std::string, std::string>;  // name -> data.v

  void SetUp() override {
    auto redis = testing::RedisServer::Start();
    ASSERT_TRUE(redis.ok()) << redis.status();
    redis_ = std::move(*redis);
    auto conn = redisstore::ConnectTo(*redis_);
    ASSERT_TRUE(conn.ok()) << conn.status();
    conn_ = std::move(*conn);
    store_ = std::make_unique<redisstore::MaterializationStore>(
        conn_.get(), redisstore::KeyPrefix::Default(), gvr_, scope_);
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &peer_port_);
    builder.RegisterService(&peer_);
    server_ = builder.BuildAndStart();
    ASSERT_TRUE(server_);
    targets_file_ = dir_.path() + "/targets.json";
    ASSERT_TRUE(testing::WriteFile(targets_file_, kTargetsJson).ok());
  }

  void TearDown() override {
    splicer_.reset();
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(200));
  }

  void StartSplicer() {
    auto splicer = testing::ServiceProcess::Start(
        "splicer", testing::RunfilePath("services/splicer/splicer"),
        {"--redis_address=" + redis_->address(),
         absl::StrCat("--gitworker_address=127.0.0.1:", peer_port_),
         "--targets_file=" + targets_file_, "--attribution_grace=0s"});
    ASSERT_TRUE(splicer.ok()) << splicer.status();
    splicer_ = std::move(*splicer);
  }

  // One change as the materializer appends it; the truth follows it.
  void Change(std::mt19937& rng) {
    std::string name = absl::StrCat("cm-", rng() % 40);
    ++rv_;
    redisstore::StreamEntry entry;
    entry.uid = "uid-" + name;
    entry.namespace_ = "crash";
    entry.name = name;
    entry.resource_version = std::to_string(rv_);
    auto it = truth_.find(name);
    if (it != truth_.end() && rng() % 4 == 0) {
      entry.op = redisstore::ChangeOp::kDeleted;
      entry.object_json = ConfigMap(name, it->second, rv_);
      truth_.erase(it);
    } else {
      // Every value is new: no change is a no-op the dedup may drop.
      std::string value = absl::StrCat("v", rv_);
      entry.op =
          it == truth_.end() ? redisstore::ChangeOp::kAdded : redisstore::ChangeOp::kModified;
      entry.object_json = ConfigMap(name, value, rv_);
      truth_[name] = value;
    }
    auto appended = store_->Append(entry);
    ASSERT_TRUE(appended.ok() && appended->appended) << appended.status();
    positions_.push_back(appended->position);
  }

  std::string LogTail() {
    std::string log = splicer_ ? splicer_->Logs() : "";
    return log.size() > 4000 ? log.substr(log.size() - 4000) : log;
  }

  std::optional<core::StreamPosition> Cursor() {
    redisstore::DeliveryCursorStore cursors(conn_.get(), redisstore::KeyPrefix::Default());
    auto cursor = cursors.Read("crash-target", gvr_, scope_);
    return cursor.ok() ? *cursor : std::nullopt;
  }

  const core::GroupVersionResource gvr_{"", "v1", "configmaps"};
  const core::WatchScope scope_ = core::WatchScope::Namespace("crash");
  testing::ScopedTempDir dir_{"splicer-crash"};
  std::unique_ptr<testing::RedisServer> redis_;
  std::unique_ptr<redisstore::RedisConnection> conn_;
  std::unique_ptr<redisstore::MaterializationStore> store_;
  RecordingGitWorker peer_;
  int peer_port_ = 0;
  std::unique_ptr<grpc::Server> server_;
  std::string targets_file_;
  std::unique_ptr<testing::ServiceProcess> splicer_;
  uint64_t rv_ = 0;
  Model truth_;
  std::vector<core::StreamPosition> positions_;  // every appended change
};

TEST_F(SplicerCrashRestartTest, EveryChangeArrivesAtLeastOnceAndTheFinalStateIsExact) {
  std::mt19937 rng(20261129);
  // The checkpoint a replay left: 20 ConfigMaps.
  redisstore::ObjectMap items;
  for (int i = 0; i < 20; ++i) {
    std::string name = absl::StrCat("cm-", i);
    truth_[name] = "initial";
    items[redisstore::ObjectIdentity("crash", name)] = ConfigMap(name, "initial", ++rv_);
  }
  ASSERT_TRUE(store_->ReplaceCheckpoint(items, core::StreamPosition::EndOf(rv_)).ok());

  StartSplicer();
  constexpr int kRounds = 6;
  for (int round = 0; round < kRounds; ++round) {
    // A burst the splicer is draining when it is killed, once it has delivered up to a random
    // change of it.
    const size_t burst_start = positions_.size();
    for (int i = 0; i < 300; ++i) Change(rng);
    const core::StreamPosition kill_at = positions_[burst_start + rng() % 250];
    ASSERT_TRUE(peer_.WaitForCoverage(kill_at, absl::Seconds(60)))
        << "round " << round << ", " << peer_.count() << " deliveries, none at or past "
        << kill_at.ToString() << "; splicer log:\n"
        << LogTail();
    splicer_->process().Kill();
    splicer_.reset();
    // Changes keep coming while it is down; once, the materializer also compacts the stream
    // past the splicer's cursor (so the restart must splice again instead of tailing).
    for (int i = 0; i < 50; ++i) Change(rng);
    if (round == kRounds / 2) {
      auto compacted = store_->Compact();
      ASSERT_TRUE(compacted.ok() && compacted->compacted) << compacted.status();
    }
    StartSplicer();
  }
  for (int i = 0; i < 200; ++i) Change(rng);
  const core::StreamPosition last = positions_.back();
  ASSERT_TRUE(testing::WaitFor([&] { return Cursor() >= last; }, absl::Seconds(60)))
      << "the cursor never covered the last change; it is at "
      << (Cursor() ? Cursor()->ToString() : "none");

  // Replay what the gitworker received, in arrival order, as it would apply it.
  Model delivered;
  std::set<core::StreamPosition> evented;
  std::vector<core::StreamPosition> resync_heads;
  int redelivered = 0;
  for (const auto& message : peer_.received()) {
    if (message.has_resync()) {
      delivered.clear();  // type-scoped mark-and-sweep
      for (const auto& body : message.resync().desired())
        delivered[body.ref().name()] = ValueOf(body);
      resync_heads.push_back(core::FromProto(message.resync().coverage_head()));
      continue;
    }
    const auto& event = message.event();
    if (!evented.insert(core::FromProto(event.position())).second) ++redelivered;
    if (event.operation() == reverser::v1::OPERATION_DELETE) {
      delivered.erase(event.object().ref().name());
    } else {
      delivered[event.object().ref().name()] = ValueOf(event.object());
    }
  }
  std::cout << positions_.size() << " changes, " << peer_.count()
            << " deliveries: " << resync_heads.size() << " resyncs, " << evented.size()
            << " distinct events, " << redelivered << " redelivered\n";
  EXPECT_GE(resync_heads.size(), 2u) << "the first start and the compaction both splice";
  // At least once: each change came as its own event, or inside a splice that covers it.
  for (const core::StreamPosition& p : positions_) {
    bool covered = evented.count(p) > 0;
    for (const auto& head : resync_heads) covered = covered || head >= p;
    EXPECT_TRUE(covered) << "change at " << p.ToString() << " never reached the gitworker";
  }
  EXPECT_EQ(delivered, truth_);
}

TEST_F(SplicerCrashRestartTest, AdminListsEachStreamsClaimAndResplicesOnRequest) {
  ASSERT_TRUE(
      store_
          ->ReplaceCheckpoint({{redisstore::ObjectIdentity("crash", "a"), ConfigMap("a", "1", 1)}},
                              core::StreamPosition::EndOf(1))
          .ok());
  StartSplicer();
  ASSERT_TRUE(peer_.WaitForCount(1, absl::Seconds(30))) << LogTail();
  auto admin = reverser::v1::SplicerAdmin::NewStub(
      grpc::CreateChannel(splicer_->grpc_target(), grpc::InsecureChannelCredentials()));

  reverser::v1::ListStreamsResponse streams;
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        grpc::ClientContext context;
        streams.Clear();
        return admin->ListStreams(&context, {}, &streams).ok() && streams.summaries_size() == 1 &&
               streams.summaries(0).ready() == 1;
      },
      absl::Seconds(30)))
      << streams.DebugString();
  const auto& stream = streams.summaries(0).streams(0);
  EXPECT_EQ(stream.claim().type().gvr().resource(), "configmaps");
  EXPECT_EQ(stream.claim().scope().namespace_(), "crash");
  EXPECT_EQ(stream.state(), reverser::v1::STREAM_STATE_STREAMING);
  EXPECT_EQ(stream.reason(), "AllStreamsReady");
  EXPECT_EQ(stream.message().find('|'), std::string::npos) << stream.message();

  // By namespace/name with the listed claim: that stream splices again and sends a resync.
  reverser::v1::RespliceRequest request;
  request.mutable_target()->set_namespace_("crash");
  request.mutable_target()->set_name("mirror");
  *request.mutable_claim() = stream.claim();
  reverser::v1::RespliceResponse response;
  {
    grpc::ClientContext context;
    grpc::Status status = admin->Resplice(&context, request, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
  }
  EXPECT_EQ(response.streams(), 1u);
  ASSERT_EQ(response.claims_size(), 1);
  EXPECT_EQ(response.claims(0).scope().namespace_(), "crash");
  ASSERT_TRUE(peer_.WaitForCount(2, absl::Seconds(30))) << LogTail();
  auto received = peer_.received();
  ASSERT_TRUE(received[1].has_resync());
  EXPECT_EQ(received[1].resync().desired_size(), 1);

  // Unknown target, unknown type: NOT_FOUND naming what exists.
  request.mutable_target()->set_name("nope");
  {
    grpc::ClientContext context;
    grpc::Status status = admin->Resplice(&context, request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
    EXPECT_NE(status.error_message().find("crash/mirror"), std::string::npos)
        << status.error_message();
  }
  request.mutable_target()->set_name("mirror");
  request.mutable_claim()->mutable_type()->mutable_gvr()->set_resource("secrets");
  {
    grpc::ClientContext context;
    grpc::Status status = admin->Resplice(&context, request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
    EXPECT_NE(status.error_message().find("v1/secrets crash"), std::string::npos)
        << status.error_message();
  }
  request.clear_target();
  {
    grpc::ClientContext context;
    EXPECT_EQ(admin->Resplice(&context, request, &response).error_code(),
              grpc::StatusCode::INVALID_ARGUMENT);
  }
}

}  // namespace
}  // namespace reverser::splicer
