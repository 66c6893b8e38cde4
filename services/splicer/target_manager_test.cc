// The target manager against a real Redis and a gitworker peer over real gRPC that acks every
// delivery as pushed: delivery cursors (and the reference watch cursors written with them) carry
// their TTLs, stay alive while the target exists, survive the full update a reconnect or a
// restarted catalog sends, and are deleted with a GitTarget that leaves the tables.

#include "services/splicer/target_manager.h"

#include <grpcpp/grpcpp.h>

#include <map>
#include <mutex>

#include "absl/strings/ascii.h"
#include "gtest/gtest.h"
#include "libs/core/proto_convert.h"
#include "libs/redisstore/test_redis.h"
#include "services/splicer/test_support.h"
#include "tests/fixtures/process.h"
#include "tests/fixtures/redis_server.h"

namespace reverser::splicer {
namespace {

reverser::v1::TableUpdate Full(uint64_t generation, const std::vector<std::string>& uids) {
  return testutil::FullConfigMapTables(generation, uids, "team");
}

class TargetManagerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto redis = testing::RedisServer::Start();
    ASSERT_TRUE(redis.ok()) << redis.status();
    redis_ = std::move(*redis);
    auto conn = redisstore::ConnectTo(*redis_);
    ASSERT_TRUE(conn.ok());
    conn_ = std::move(*conn);
    ASSERT_TRUE(testutil::SeedTeamConfigMapCheckpoint(conn_.get()).ok());
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(&peer_);
    server_ = builder.BuildAndStart();
    delivery_ = std::make_unique<DeliveryClient>("127.0.0.1:" + std::to_string(port_), 100,
                                                 grpc::InsecureChannelCredentials());
    delivery_->Start();

    TargetManagerOptions options;
    options.stream_defaults.redis = redisstore::RedisOptionsFor(*redis_);
    // Our keys under `reverser`, the reference's watch cursors under its default prefix.
    auto prefix = redisstore::KeyPrefix::Parse("reverser", "gitops-reverser");
    ASSERT_TRUE(prefix.ok());
    options.stream_defaults.prefix = *prefix;
    options.stream_defaults.attribution = false;
    options.stream_defaults.cursor_ttl = absl::Hours(24);
    options.stream_defaults.cursor_refresh = absl::Milliseconds(100);
    options.stream_defaults.materialization_state_poll = absl::Milliseconds(50);
    manager_ = std::make_unique<TargetManager>(options, delivery_.get(), &metrics_);
  }
  void TearDown() override {
    manager_.reset();
    delivery_->Stop();
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(100));
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
  int64_t Pttl(const std::string& key) {
    auto v = conn_->Command({"PTTL", key});
    return v.ok() ? v->integer() : -3;
  }
  bool Exists(const std::string& key) { return Pttl(key) != -2; }
  // Both cursors of `uid` written: the resync (coverage head 5-max) was acked.
  bool Delivered(const std::string& uid) {
    return Get(AckedKey(uid)).rfind("5-18446744073709551615@", 0) == 0 && Get(WatchKey(uid)) == "5";
  }
  // The summary of target `uid` (an empty one when there is none).
  reverser::v1::StreamSummary SummaryOf(const std::string& uid) {
    for (auto& summary : manager_->Summaries()) {
      if (summary.target().uid() == uid) return summary;
    }
    return {};
  }
  double Deleted() {
    return metrics_.GetCounter("reverser_splicer_cursors_deleted_total", "").Value();
  }

  std::unique_ptr<testing::RedisServer> redis_;
  std::unique_ptr<redisstore::RedisConnection> conn_;
  testutil::AckingGitWorker peer_;
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<DeliveryClient> delivery_;
  runtime::MetricsRegistry metrics_;
  std::unique_ptr<TargetManager> manager_;
};

TEST_F(TargetManagerTest, CursorsCarryTtlsAndStayAliveWhileTheTargetExists) {
  manager_->Apply(Full(1, {"ta"}));
  ASSERT_TRUE(testing::WaitFor([&] { return Delivered("ta"); }, absl::Seconds(10)))
      << Get(AckedKey("ta")) << " / " << Get(WatchKey("ta"));
  const int64_t day_ms = absl::ToInt64Milliseconds(absl::Hours(24));
  EXPECT_GT(Pttl(AckedKey("ta")), day_ms - 60'000);
  EXPECT_LE(Pttl(AckedKey("ta")), day_ms);
  EXPECT_GT(Pttl(WatchKey("ta")), 3'540'000);
  EXPECT_LE(Pttl(WatchKey("ta")), 3'600'000);

  // Idle (nothing new in the stream): the stream writes both again, and their TTLs with them.
  ASSERT_TRUE(conn_->Command({"PEXPIRE", AckedKey("ta"), "30000"}).ok());
  ASSERT_TRUE(conn_->Command({"PEXPIRE", WatchKey("ta"), "30000"}).ok());
  EXPECT_TRUE(testing::WaitFor(
      [&] { return Pttl(AckedKey("ta")) > 60'000 && Pttl(WatchKey("ta")) > 60'000; },
      absl::Seconds(10)))
      << Pttl(AckedKey("ta")) << " / " << Pttl(WatchKey("ta"));
  // A cursor the stream did not write (Redis lost it) comes back too.
  ASSERT_TRUE(conn_->Command({"DEL", WatchKey("ta")}).ok());
  EXPECT_TRUE(testing::WaitFor([&] { return Get(WatchKey("ta")) == "5"; }, absl::Seconds(10)));
}

TEST_F(TargetManagerTest, ObjectsAreSensitiveExactlyWhenTheCatalogsTableSaysSo) {
  // ConfigMaps are not sensitive by any rule of the splicer's own: only the table decides.
  reverser::v1::TableUpdate update = Full(1, {"plain", "marked"});
  for (auto& table : *update.mutable_upserted()) {
    table.mutable_types(0)->set_sensitive(table.target().uid() == "marked");
  }
  manager_->Apply(update);
  ASSERT_TRUE(testing::WaitFor([&] { return Delivered("plain") && Delivered("marked"); },
                               absl::Seconds(10)));
  std::map<std::string, bool> sensitive_by_target;
  for (const auto& resync : peer_.Resyncs()) {
    ASSERT_EQ(resync.desired_size(), 1) << resync.DebugString();
    sensitive_by_target[resync.target().uid()] = resync.desired(0).sensitive();
  }
  EXPECT_EQ(sensitive_by_target, (std::map<std::string, bool>{{"marked", true}, {"plain", false}}));
}

TEST_F(TargetManagerTest, ARemovedTargetLosesItsCursorsAReconnectOrCatalogRestartDoesNot) {
  manager_->Apply(Full(1, {"ta", "tb"}));
  ASSERT_TRUE(
      testing::WaitFor([&] { return Delivered("ta") && Delivered("tb"); }, absl::Seconds(10)));
  const std::string ta_cursor = Get(AckedKey("ta"));

  // A reconnect (the same generation again) and a restarted catalog (a new epoch: a full update
  // listing every GitTarget once it is primed) change nothing; nor does a delta without removals.
  manager_->Apply(Full(1, {"ta", "tb"}));
  manager_->Apply(Full(1'700'000'000'000'001, {"tb", "ta"}));
  reverser::v1::TableUpdate delta;
  delta.set_generation(1'700'000'000'000'002);
  *delta.add_upserted() = testutil::ConfigMapTable("tb", "team");
  manager_->Apply(delta);
  EXPECT_EQ(manager_->stream_count(), 2u);
  EXPECT_EQ(Deleted(), 0);
  for (const std::string uid : {"ta", "tb"}) {
    EXPECT_TRUE(Exists(AckedKey(uid))) << uid;
    EXPECT_TRUE(Exists(WatchKey(uid))) << uid;
  }
  EXPECT_EQ(Get(AckedKey("ta")), ta_cursor);

  // Named in a delta's `removed`: its streams stop and both its cursors go; the other's stay.
  reverser::v1::TableUpdate removal;
  removal.set_generation(1'700'000'000'000'003);
  *removal.add_removed() = testutil::ConfigMapTable("ta", "team").target();
  manager_->Apply(removal);
  EXPECT_EQ(manager_->stream_count(), 1u);
  EXPECT_FALSE(Exists(AckedKey("ta")));
  EXPECT_FALSE(Exists(WatchKey("ta")));
  EXPECT_TRUE(Exists(AckedKey("tb")));
  EXPECT_EQ(Deleted(), 2);

  // Missing from a full update (which lists every target): removed too. A new target meanwhile
  // gets its cursors; the stopped stream never writes the removed one's again.
  manager_->Apply(Full(1'700'000'000'000'004, {"tc"}));
  EXPECT_FALSE(Exists(AckedKey("tb")));
  EXPECT_FALSE(Exists(WatchKey("tb")));
  EXPECT_EQ(Deleted(), 4);
  ASSERT_TRUE(testing::WaitFor([&] { return Delivered("tc"); }, absl::Seconds(10)));
  EXPECT_FALSE(Exists(AckedKey("ta")));
  EXPECT_FALSE(Exists(AckedKey("tb")));
  EXPECT_FALSE(Exists(WatchKey("tb")));
}

// Targets are isolated: adding one, changing its scope or removing it restarts no stream of
// another target. The untouched target's stream resyncs once, at its start, and then reads a
// later change as a live event.
TEST_F(TargetManagerTest, OneTargetsChangesRestartNoStreamOfAnother) {
  auto resyncs_of = [&](const std::string& uid) {
    int n = 0;
    for (const auto& resync : peer_.Resyncs()) n += resync.target().uid() == uid;
    return n;
  };
  manager_->Apply(Full(1, {"ta"}));
  ASSERT_TRUE(testing::WaitFor([&] { return Delivered("ta"); }, absl::Seconds(10)));

  manager_->Apply(Full(2, {"ta", "tb"}));
  ASSERT_TRUE(testing::WaitFor([&] { return Delivered("tb"); }, absl::Seconds(10)));
  // tb now follows creates only: its stream restarts (from its delivery cursor).
  reverser::v1::TableUpdate narrowed;
  narrowed.set_generation(3);
  reverser::v1::WatchedTypeTable tb = testutil::ConfigMapTable("tb", "team");
  auto& ops = (*tb.mutable_types(0)->mutable_namespaces())["team"];
  ops.set_all(false);
  ops.add_operations(reverser::v1::OPERATION_CREATE);
  *narrowed.add_upserted() = tb;
  manager_->Apply(narrowed);
  auto reason_of = [&](const std::string& uid) {
    reverser::v1::StreamSummary summary = SummaryOf(uid);
    return summary.streams_size() == 1 ? summary.streams(0).reason() : std::string("<none>");
  };
  ASSERT_TRUE(
      testing::WaitFor([&] { return reason_of("tb") == "ResumedFromCursor"; }, absl::Seconds(10)))
      << reason_of("tb");
  reverser::v1::TableUpdate removal;
  removal.set_generation(4);
  *removal.add_removed() = tb.target();
  manager_->Apply(removal);
  EXPECT_EQ(manager_->stream_count(), 1u);

  // A change after all of that reaches ta as a live event, with no second resync before it.
  redisstore::MaterializationStore store(conn_.get(), redisstore::KeyPrefix::Default(),
                                         {"", "v1", "configmaps"},
                                         core::WatchScope::Namespace("team"));
  ASSERT_TRUE(
      store.Append(testutil::ConfigMapEntry("team", "b", "1", 6, redisstore::ChangeOp::kAdded))
          .ok());
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        for (const auto& event : peer_.Events()) {
          if (event.target().uid() == "ta" && event.object().ref().name() == "b") return true;
        }
        return false;
      },
      absl::Seconds(10)));
  EXPECT_EQ(resyncs_of("ta"), 1);
  EXPECT_EQ(reason_of("ta"), "AllStreamsReady") << "ta's stream never restarted";
}

// Targets of one materialization share its reader yet each receives exactly its own events, in
// stream order: one tailing since before the changes, one that joined later (its resync covers
// what came before), one that follows creates only.
TEST_F(TargetManagerTest, TargetsOfOneMaterializationEachReceiveExactlyTheirEvents) {
  redisstore::MaterializationStore store(conn_.get(), redisstore::KeyPrefix::Default(),
                                         {"", "v1", "configmaps"},
                                         core::WatchScope::Namespace("team"));
  auto names_of = [&](const std::string& uid) {
    std::vector<std::string> names;
    core::StreamPosition last;
    for (const auto& event : peer_.Events()) {
      if (event.target().uid() != uid) continue;
      core::StreamPosition position = core::FromProto(event.position());
      if (position <= last) names.push_back("<out of order>");
      last = position;
      names.push_back(event.object().ref().name() + ":" +
                      reverser::v1::Operation_Name(event.operation()));
    }
    return names;
  };
  auto reason_of = [&](const std::string& uid) {
    reverser::v1::StreamSummary summary = SummaryOf(uid);
    return summary.streams_size() == 1 ? summary.streams(0).reason() : std::string("<none>");
  };
  manager_->Apply(Full(1, {"ta"}));
  ASSERT_TRUE(testing::WaitFor([&] { return Delivered("ta"); }, absl::Seconds(10)));
  ASSERT_TRUE(
      store.Append(testutil::ConfigMapEntry("team", "b", "1", 6, redisstore::ChangeOp::kAdded))
          .ok());
  ASSERT_TRUE(
      store.Append(testutil::ConfigMapEntry("team", "a", "2", 7, redisstore::ChangeOp::kModified))
          .ok());
  ASSERT_TRUE(testing::WaitFor([&] { return names_of("ta").size() >= 2; }, absl::Seconds(10)));

  reverser::v1::TableUpdate joined = Full(2, {"ta", "tb"});
  reverser::v1::WatchedTypeTable tc = testutil::ConfigMapTable("tc", "team");
  auto& ops = (*tc.mutable_types(0)->mutable_namespaces())["team"];
  ops.set_all(false);
  ops.add_operations(reverser::v1::OPERATION_CREATE);
  *joined.add_upserted() = tc;
  manager_->Apply(joined);
  ASSERT_TRUE(testing::WaitFor(
      [&] { return reason_of("tb") == "AllStreamsReady" && reason_of("tc") == "AllStreamsReady"; },
      absl::Seconds(10)));
  ASSERT_TRUE(
      store.Append(testutil::ConfigMapEntry("team", "c", "1", 8, redisstore::ChangeOp::kAdded))
          .ok());
  ASSERT_TRUE(
      store.Append(testutil::ConfigMapEntry("team", "a", "3", 9, redisstore::ChangeOp::kModified))
          .ok());
  ASSERT_TRUE(
      store.Append(testutil::ConfigMapEntry("team", "b", "1", 10, redisstore::ChangeOp::kDeleted))
          .ok());
  ASSERT_TRUE(
      store.Append(testutil::ConfigMapEntry("team", "d", "1", 11, redisstore::ChangeOp::kAdded))
          .ok());
  // Each stream delivers in order: once every target has d, everything before it has come.
  auto has_d = [&](const std::string& uid) {
    auto names = names_of(uid);
    return !names.empty() && names.back() == "d:OPERATION_CREATE";
  };
  ASSERT_TRUE(testing::WaitFor([&] { return has_d("ta") && has_d("tb") && has_d("tc"); },
                               absl::Seconds(10)));
  EXPECT_EQ(names_of("ta"), (std::vector<std::string>{"b:OPERATION_CREATE", "a:OPERATION_UPDATE",
                                                      "c:OPERATION_CREATE", "a:OPERATION_UPDATE",
                                                      "b:OPERATION_DELETE", "d:OPERATION_CREATE"}));
  EXPECT_EQ(names_of("tb"), (std::vector<std::string>{"c:OPERATION_CREATE", "a:OPERATION_UPDATE",
                                                      "b:OPERATION_DELETE", "d:OPERATION_CREATE"}));
  EXPECT_EQ(names_of("tc"), (std::vector<std::string>{"c:OPERATION_CREATE", "d:OPERATION_CREATE"}));
  EXPECT_EQ(reason_of("ta"), "AllStreamsReady") << "ta's stream never restarted";
}

// Each target reads the materializations its own rules ask for: another target's cluster-wide
// selection never moves a namespaced one onto the cluster-wide materialization. A forbidden
// cluster-wide list/watch (the materializer's Blocked state) blocks only the target reading it,
// with the materializer's reason, until it streams again; pushes show as the last push time.
TEST_F(TargetManagerTest, EachTargetReadsItsOwnScopeAndABlockedMaterializationBlocksItsReaders) {
  redisstore::MaterializationStore cluster(conn_.get(), redisstore::KeyPrefix::Default(),
                                           {"", "v1", "configmaps"}, core::WatchScope::Cluster());
  redisstore::MaterializationState state;
  state.gvr = {"", "v1", "configmaps"};
  state.scope = core::WatchScope::Cluster();
  state.phase = "Blocked";
  state.reason = "WatchNotPermitted";
  state.message = "list/watch of v1/configmaps cluster forbidden: cannot list resource";
  ASSERT_TRUE(cluster.WriteState(state).ok());

  reverser::v1::TableUpdate update = Full(1, {"ns"});
  reverser::v1::WatchedTypeTable wide = testutil::ConfigMapTable("wide", "team");
  wide.mutable_types(0)->mutable_namespaces()->clear();
  (*wide.mutable_types(0)->mutable_namespaces())[""].set_all(true);
  *update.add_upserted() = wide;
  manager_->Apply(update);
  ASSERT_TRUE(testing::WaitFor([&] { return Delivered("ns"); }, absl::Seconds(10)));
  ASSERT_TRUE(testing::WaitFor([&] { return SummaryOf("wide").blocked() == 1; }, absl::Seconds(10)))
      << SummaryOf("wide").DebugString();

  reverser::v1::StreamSummary ns = SummaryOf("ns");
  ASSERT_EQ(ns.streams_size(), 1);
  EXPECT_EQ(ns.streams(0).claim().scope().namespace_(), "team");
  EXPECT_EQ(ns.reason(), "AllStreamsReady");
  EXPECT_EQ(ns.message(), "1/1 streams running");
  EXPECT_TRUE(ns.has_last_push_time()) << "the resync was acked as pushed";
  reverser::v1::StreamSummary blocked = SummaryOf("wide");
  ASSERT_EQ(blocked.streams_size(), 1);
  EXPECT_TRUE(blocked.streams(0).claim().scope().has_cluster());
  EXPECT_EQ(blocked.streams(0).state(), reverser::v1::STREAM_STATE_BLOCKED);
  EXPECT_EQ(blocked.streams(0).message(), state.message);
  EXPECT_EQ(blocked.reason(), "WatchNotPermitted");
  EXPECT_EQ(blocked.message(), "0/1 streams running; 1 blocked (configmaps)");
  EXPECT_EQ(blocked.pending_sample(0), "configmaps");
  EXPECT_FALSE(blocked.has_last_push_time());

  // Permitted again: the materializer lists, the stream resyncs and runs.
  ASSERT_TRUE(cluster.ReplaceCheckpoint({}, core::StreamPosition::EndOf(7)).ok());
  state.phase = "Streaming";
  state.reason = "AllStreamsReady";
  state.message = "AllStreamsReady";
  ASSERT_TRUE(cluster.WriteState(state).ok());
  ASSERT_TRUE(testing::WaitFor([&] { return SummaryOf("wide").reason() == "AllStreamsReady"; },
                               absl::Seconds(10)))
      << SummaryOf("wide").DebugString();
  EXPECT_TRUE(
      testing::WaitFor([&] { return SummaryOf("wide").has_last_push_time(); }, absl::Seconds(10)));

  // Forbidden again while the stream tails (a resumed watch refused): blocked again, then back.
  state.phase = "Blocked";
  state.reason = "WatchNotPermitted";
  ASSERT_TRUE(cluster.WriteState(state).ok());
  ASSERT_TRUE(testing::WaitFor([&] { return SummaryOf("wide").reason() == "WatchNotPermitted"; },
                               absl::Seconds(10)));
  state.phase = "Streaming";
  state.reason = "ResumedFromCursor";
  ASSERT_TRUE(cluster.WriteState(state).ok());
  EXPECT_TRUE(testing::WaitFor([&] { return SummaryOf("wide").reason() == "AllStreamsReady"; },
                               absl::Seconds(10)))
      << SummaryOf("wide").DebugString();
  EXPECT_EQ(SummaryOf("ns").reason(), "AllStreamsReady");
}

}  // namespace
}  // namespace reverser::splicer
