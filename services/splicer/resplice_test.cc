// TargetManager's admin side against real parts: a real Redis, the real gitworker binary and a
// bare Git remote. A resplice of an in-sync target sends a fresh resync that commits nothing,
// then tailing goes on; ListStreams' per-stream readiness names each stream's claim and state.

#include <gtest/gtest.h>

#include <atomic>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "libs/core/proto_convert.h"
#include "libs/core/stream_position.h"
#include "libs/redisstore/test_redis.h"
#include "nlohmann/json.hpp"
#include "services/splicer/target_manager.h"
#include "services/splicer/test_support.h"
#include "tests/fixtures/git_repos.h"
#include "tests/fixtures/process.h"
#include "tests/fixtures/redis_server.h"
#include "tests/fixtures/service_process.h"
#include "tests/fixtures/temp_dir.h"

namespace reverser::splicer {
namespace {

using nlohmann::json;

constexpr char kCursorKey[] = "reverser:splice:v1:target-uid:configmaps:ns:team:acked";

redisstore::StreamEntry Entry(const std::string& name, const std::string& value, int rv) {
  return testutil::ConfigMapEntry("team", name, value, rv, redisstore::ChangeOp::kAdded);
}

class RespliceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto redis = testing::RedisServer::Start();
    ASSERT_TRUE(redis.ok()) << redis.status();
    redis_ = std::move(*redis);
    redis_options_ = redisstore::RedisOptionsFor(*redis_);
    auto conn = redisstore::RedisConnection::Connect(redis_options_);
    ASSERT_TRUE(conn.ok()) << conn.status();
    conn_ = std::move(*conn);
    store_ = std::make_unique<redisstore::MaterializationStore>(
        conn_.get(), redisstore::KeyPrefix::Default(), gvr_, core::WatchScope::Namespace("team"));

    auto remote = testing::CreateBareRemote(dir_.path());
    ASSERT_TRUE(remote.ok()) << remote.status();
    remote_ = *remote;
    auto gitworker = testing::ServiceProcess::Start(
        "gitworker", testing::RunfilePath("services/gitworker/gitworker"),
        {"--work_dir=" + dir_.path() + "/work", "--push_cooldown=0s"});
    ASSERT_TRUE(gitworker.ok()) << gitworker.status();
    gitworker_ = std::move(*gitworker);
    ASSERT_EQ(gitworker_->WaitReady(), absl::OkStatus());

    delivery_ = std::make_unique<DeliveryClient>(gitworker_->grpc_target(), 100,
                                                 grpc::InsecureChannelCredentials());
    TargetManagerOptions options;
    options.stream_defaults.redis = redis_options_;
    options.stream_defaults.attribution = false;
    manager_ = std::make_unique<TargetManager>(options, delivery_.get(), &metrics_);
    TargetManager* manager = manager_.get();
    delivery_->SetOnConnected([manager] { manager->SendConfigs(); });
    delivery_->SetOnRefusal([manager](const reverser::v1::DeliveryFeedback& feedback) {
      manager->OnRefusal(feedback);
    });
    delivery_->Start();
  }

  void TearDown() override {
    if (manager_) manager_->StopAll();
    if (delivery_) delivery_->Stop();
  }

  reverser::v1::TableUpdate Tables() {
    reverser::v1::TableUpdate update;
    update.set_full(true);
    auto* table = update.add_upserted();
    table->mutable_target()->set_namespace_("team");
    table->mutable_target()->set_name("mirror");
    table->mutable_target()->set_uid("target-uid");
    auto* config = table->mutable_config();
    *config->mutable_target() = table->target();
    config->mutable_destination()->set_provider_namespace("team");
    config->mutable_destination()->set_provider_name("repo");
    config->mutable_destination()->set_branch("main");
    config->mutable_destination()->set_path("clusters/a");
    config->set_remote_url(remote_);
    config->set_committer_name("reverser");
    config->set_committer_email("reverser@example.com");
    *table->mutable_destination() = config->destination();
    auto* type = table->add_types();
    *type->mutable_type()->mutable_gvr() = core::ToProto(gvr_);
    type->mutable_type()->mutable_gvk()->set_version("v1");
    type->mutable_type()->mutable_gvk()->set_kind("ConfigMap");
    type->mutable_type()->set_scope(reverser::v1::RESOURCE_SCOPE_NAMESPACED);
    (*type->mutable_namespaces())["team"].set_all(true);
    return update;
  }

  std::string Cursor() {
    auto v = redis_->Cli({"GET", kCursorKey});
    if (!v.ok()) return "";
    std::string text(absl::StripTrailingAsciiWhitespace(*v));
    return text.substr(0, text.find('@'));  // the position, without its incarnation
  }
  int Commits() {
    auto count = testing::Git(remote_, {"rev-list", "--count", "main"});
    return count.ok() ? std::stoi(*count) : -1;
  }
  double ResyncsSent() {
    return metrics_
        .GetCounter("reverser_splicer_resyncs_total", "Type-scoped resyncs sent.",
                    {{"gittarget_namespace", "team"},
                     {"gittarget_name", "mirror"},
                     {"group", ""},
                     {"version", "v1"},
                     {"resource", "configmaps"}})
        .Value();
  }

  const core::GroupVersionResource gvr_{"", "v1", "configmaps"};
  testing::ScopedTempDir dir_{"resplice"};
  std::unique_ptr<testing::RedisServer> redis_;
  redisstore::RedisOptions redis_options_;
  std::unique_ptr<redisstore::RedisConnection> conn_;
  std::unique_ptr<redisstore::MaterializationStore> store_;
  std::string remote_;
  std::unique_ptr<testing::ServiceProcess> gitworker_;
  runtime::MetricsRegistry metrics_;
  std::unique_ptr<DeliveryClient> delivery_;
  std::unique_ptr<TargetManager> manager_;
};

TEST_F(RespliceTest, ResplicingAnInSyncTargetCommitsNothingAndTailingGoesOn) {
  ASSERT_TRUE(store_
                  ->ReplaceCheckpoint({{"team/a", testutil::ConfigMapJson("team", "a", "1", 5)}},
                                      core::StreamPosition::EndOf(5))
                  .ok());
  ASSERT_TRUE(store_->Append(Entry("b", "1", 6)).ok());
  manager_->Apply(Tables());
  ASSERT_TRUE(testing::WaitFor([&] { return Cursor() == "6-0"; }, absl::Seconds(20)))
      << Cursor() << "\n"
      << gitworker_->Logs();
  const int in_sync = Commits();
  ASSERT_GT(in_sync, 1) << "the first resync writes a and b";

  reverser::v1::GitTargetRef by_name;
  by_name.set_namespace_("team");
  by_name.set_name("mirror");
  auto claims = manager_->Resplice(by_name, nullptr);
  ASSERT_TRUE(claims.ok()) << claims.status();
  ASSERT_EQ(claims->size(), 1u);
  EXPECT_EQ((*claims)[0].scope().namespace_(), "team");
  ASSERT_TRUE(testing::WaitFor([&] { return ResyncsSent() == 2; }, absl::Seconds(20)));

  // Tailing goes on after the resync; once the next event is pushed (and so the resync before
  // it), the remote has exactly that event's commit: the resplice committed nothing.
  ASSERT_TRUE(store_->Append(Entry("c", "1", 7)).ok());
  ASSERT_TRUE(testing::WaitFor([&] { return Cursor() == "7-0"; }, absl::Seconds(20)))
      << Cursor() << "\n"
      << gitworker_->Logs();
  EXPECT_EQ(Commits(), in_sync + 1);
  auto changed = testing::Git(remote_, {"show", "--name-only", "--format=", "main"});
  ASSERT_TRUE(changed.ok()) << changed.status();
  std::vector<std::string> files = absl::StrSplit(*changed, '\n', absl::SkipEmpty());
  ASSERT_EQ(files.size(), 1u) << *changed;
  EXPECT_TRUE(absl::StrContains(files[0], "/c.yaml")) << files[0];

  auto summaries = manager_->Summaries();
  ASSERT_EQ(summaries.size(), 1u);
  ASSERT_EQ(summaries[0].streams_size(), 1);
  const auto& stream = summaries[0].streams(0);
  EXPECT_EQ(stream.claim().type().gvr().resource(), "configmaps");
  EXPECT_EQ(stream.claim().scope().namespace_(), "team");
  EXPECT_EQ(stream.state(), reverser::v1::STREAM_STATE_STREAMING);
  EXPECT_EQ(stream.reason(), "AllStreamsReady");
  EXPECT_FALSE(absl::StrContains(stream.message(), "|")) << stream.message();
  EXPECT_TRUE(absl::StrContains(stream.message(), "resync")) << stream.message();
}

// The real gitworker refuses an object it can never write ("..": no file can carry it); the
// refusal stands through re-deliveries, rolls up in the target's summary naming the object, and
// clears once a resync no longer carries the object.
TEST_F(RespliceTest, ARefusedObjectIsReportedUntilAResyncNoLongerRefusesIt) {
  ASSERT_TRUE(store_
                  ->ReplaceCheckpoint({{"team/a", testutil::ConfigMapJson("team", "a", "1", 5)},
                                       {"team/..", testutil::ConfigMapJson("team", "..", "1", 5)}},
                                      core::StreamPosition::EndOf(5))
                  .ok());
  manager_->Apply(Tables());
  auto refused = [&]() -> std::optional<reverser::v1::StreamSummary> {
    auto summaries = manager_->Summaries();
    if (summaries.size() != 1 || summaries[0].refused_objects() == 0) return std::nullopt;
    return summaries[0];
  };
  ASSERT_TRUE(
      testing::WaitFor([&] { return Cursor() == "5-18446744073709551615"; }, absl::Seconds(20)))
      << Cursor() << "\n"
      << gitworker_->Logs();
  auto summary = refused();
  ASSERT_TRUE(summary.has_value()) << gitworker_->Logs();
  EXPECT_EQ(summary->refused_objects(), 1u);
  ASSERT_EQ(summary->refusals_size(), 1);
  const auto& refusal = summary->refusals(0);
  EXPECT_EQ(refusal.object().name(), "..");
  EXPECT_EQ(refusal.object().namespace_(), "team");
  EXPECT_EQ(refusal.object().gvr().resource(), "configmaps");
  EXPECT_EQ(refusal.kind(), "ConfigMap");
  EXPECT_EQ(refusal.reason(), reverser::v1::REFUSAL_REASON_UNSAFE_IDENTITY);
  EXPECT_EQ(refusal.target().uid(), "target-uid");
  EXPECT_TRUE(absl::StrContains(gitworker_->Logs(), "\"name\":\"..\"")) << "logged by name";
  EXPECT_TRUE(
      testing::Git(remote_, {"cat-file", "-e", "main:clusters/a/team/configmaps/a.yaml"}).ok())
      << "the rest is mirrored";

  // An update of it is refused again: still one object.
  ASSERT_TRUE(store_->Append(Entry("..", "2", 6)).ok());
  ASSERT_TRUE(testing::WaitFor([&] { return Cursor() == "6-0"; }, absl::Seconds(20))) << Cursor();
  summary = refused();
  ASSERT_TRUE(summary.has_value());
  EXPECT_EQ(summary->refused_objects(), 1u);
  EXPECT_EQ(summary->refusals(0).position().rv(), 6u);

  // It goes from the cluster (its delete cannot be written either); the next resync no longer
  // carries it and clears it.
  ASSERT_TRUE(store_
                  ->ReplaceCheckpoint({{"team/a", testutil::ConfigMapJson("team", "a", "1", 5)}},
                                      core::StreamPosition::EndOf(7))
                  .ok());
  reverser::v1::GitTargetRef by_uid;
  by_uid.set_uid("target-uid");
  ASSERT_TRUE(manager_->Resplice(by_uid, nullptr).ok());
  ASSERT_TRUE(testing::WaitFor([&] { return !refused().has_value(); }, absl::Seconds(20)))
      << manager_->Summaries()[0].DebugString();
}

// A stream that started its session while the configs were being re-sent would carry the old
// generation (and so start over at once) and could reach the gitworker before its target config.
TEST_F(RespliceTest, StreamsMaySendOnlyOnceTheConfigsAreResentAndTheGenerationIsNew) {
  DeliveryClient client(gitworker_->grpc_target(), 100, grpc::InsecureChannelCredentials());
  std::atomic<bool> connected_while_configs_sent{true};
  std::atomic<uint64_t> generation_while_configs_sent{99};
  client.SetOnConnected([&] {
    connected_while_configs_sent = client.connected();
    generation_while_configs_sent = client.generation();
  });
  client.Start();
  ASSERT_TRUE(client.WaitConnected(absl::Seconds(20)));
  EXPECT_FALSE(connected_while_configs_sent.load());
  EXPECT_EQ(generation_while_configs_sent.load(), 0u);
  EXPECT_EQ(client.generation(), 1u);
  client.Stop();
}

TEST_F(RespliceTest, UnknownTargetOrTypeIsNotFoundAndNamesWhatExists) {
  ASSERT_TRUE(store_->ReplaceCheckpoint({}, core::StreamPosition::EndOf(1)).ok());
  manager_->Apply(Tables());
  reverser::v1::GitTargetRef unknown;
  unknown.set_namespace_("team");
  unknown.set_name("other");
  auto missing_target = manager_->Resplice(unknown, nullptr);
  EXPECT_TRUE(absl::IsNotFound(missing_target.status())) << missing_target.status();
  EXPECT_TRUE(absl::StrContains(missing_target.status().message(), "team/other"));
  EXPECT_TRUE(absl::StrContains(missing_target.status().message(), "team/mirror"));

  reverser::v1::GitTargetRef by_uid;
  by_uid.set_uid("target-uid");
  reverser::v1::Claim secrets;
  secrets.mutable_type()->mutable_gvr()->set_version("v1");
  secrets.mutable_type()->mutable_gvr()->set_resource("secrets");
  auto missing_type = manager_->Resplice(by_uid, &secrets);
  EXPECT_TRUE(absl::IsNotFound(missing_type.status())) << missing_type.status();
  EXPECT_TRUE(absl::StrContains(missing_type.status().message(), "v1/secrets"));
  EXPECT_TRUE(absl::StrContains(missing_type.status().message(), "v1/configmaps team"));

  // The stream is namespaced: a cluster-wide claim of the type names no stream; the type alone
  // or with its namespace does.
  reverser::v1::Claim configmaps;
  *configmaps.mutable_type()->mutable_gvr() = core::ToProto(gvr_);
  configmaps.mutable_scope()->set_cluster(true);
  EXPECT_TRUE(absl::IsNotFound(manager_->Resplice(by_uid, &configmaps).status()));
  configmaps.mutable_scope()->set_namespace_("team");
  auto one = manager_->Resplice(by_uid, &configmaps);
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(one->size(), 1u);
  configmaps.clear_scope();
  EXPECT_TRUE(manager_->Resplice(by_uid, &configmaps).ok());
}

}  // namespace
}  // namespace reverser::splicer
