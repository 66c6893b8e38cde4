// A splice stream against a real Redis and a gitworker peer over real gRPC. The peer is a
// recording GitWorker (the real gitworker is covered by its own and the end-to-end tests): it
// buffers what it receives and acks when the test says the push happened.

#include "services/splicer/splice_stream.h"

#include <grpcpp/grpcpp.h>

#include <condition_variable>
#include <deque>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "libs/core/proto_convert.h"
#include "libs/redisstore/test_redis.h"
#include "nlohmann/json.hpp"
#include "proto/reverser/v1/gitworker.grpc.pb.h"
#include "services/splicer/test_support.h"
#include "tests/fixtures/process.h"
#include "tests/fixtures/redis_server.h"

namespace reverser::splicer {
namespace {

using nlohmann::json;

class RecordingGitWorker final : public reverser::v1::GitWorker::Service {
 public:
  grpc::Status Deliver(grpc::ServerContext* context,
                       grpc::ServerReaderWriter<reverser::v1::DeliveryFeedback,
                                                reverser::v1::DeliveryMessage>* stream) override {
    {
      std::lock_guard lock(mu_);
      stream_ = stream;
      ++connections_;
    }
    reverser::v1::DeliveryMessage message;
    while (!drop_ && stream->Read(&message)) {
      reverser::v1::DeliveryFeedback accepted;
      accepted.set_accepted_sequence(message.sequence());
      {
        std::lock_guard lock(mu_);
        stream->Write(accepted);
        received_.push_back(message);
      }
      cv_.notify_all();
    }
    std::lock_guard lock(mu_);
    stream_ = nullptr;
    drop_ = false;
    return grpc::Status::OK;
  }

  // Acks a received resync or event as pushed.
  void Ack(const reverser::v1::DeliveryMessage& message) {
    std::optional<reverser::v1::DeliveryFeedback> feedback = testutil::PushedAck(message);
    std::lock_guard lock(mu_);
    if (stream_ && feedback) stream_->Write(*feedback);
  }

  // Waits for the next received message (in arrival order).
  std::optional<reverser::v1::DeliveryMessage> Next(absl::Duration timeout = absl::Seconds(10)) {
    std::unique_lock lock(mu_);
    if (!cv_.wait_for(lock, absl::ToChronoMilliseconds(timeout),
                      [&] { return !received_.empty(); })) {
      return std::nullopt;
    }
    auto message = received_.front();
    received_.pop_front();
    return message;
  }
  bool Idle(absl::Duration quiet) {
    std::unique_lock lock(mu_);
    return !cv_.wait_for(lock, absl::ToChronoMilliseconds(quiet),
                         [&] { return !received_.empty(); });
  }
  void DropStream() { drop_ = true; }
  int connections() {
    std::lock_guard lock(mu_);
    return connections_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<reverser::v1::DeliveryMessage> received_;
  grpc::ServerReaderWriter<reverser::v1::DeliveryFeedback, reverser::v1::DeliveryMessage>* stream_ =
      nullptr;
  std::atomic<bool> drop_{false};
  int connections_ = 0;
};

using testutil::ConfigMapEntry;
using testutil::ConfigMapJson;

redisstore::StreamEntry Entry(const std::string& name, const std::string& value, int rv,
                              redisstore::ChangeOp op = redisstore::ChangeOp::kModified) {
  return ConfigMapEntry("team", name, value, rv, op);
}

class SpliceStreamTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto redis = testing::RedisServer::Start();
    ASSERT_TRUE(redis.ok()) << redis.status();
    redis_ = std::move(*redis);
    options_ = redisstore::RedisOptionsFor(*redis_);
    auto conn = redisstore::RedisConnection::Connect(options_);
    ASSERT_TRUE(conn.ok());
    conn_ = std::move(*conn);
    store_ = std::make_unique<redisstore::MaterializationStore>(
        conn_.get(), redisstore::KeyPrefix::Default(), gvr_, core::WatchScope::Namespace("team"));
    facts_ = std::make_unique<redisstore::AuthorFactStore>(conn_.get(),
                                                           redisstore::KeyPrefix::Default());
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(&peer_);
    server_ = builder.BuildAndStart();
    delivery_ = std::make_unique<DeliveryClient>("127.0.0.1:" + std::to_string(port_), 100,
                                                 grpc::InsecureChannelCredentials());
    delivery_->Start();
  }
  void TearDown() override {
    stream_.reset();
    delivery_->Stop();
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(100));
  }

  void StartStream(absl::Duration grace = absl::Seconds(3), bool audit_facts = true,
                   bool admission_facts = false) {
    SpliceStreamOptions o;
    o.audit_facts = audit_facts;
    o.admission_facts = admission_facts;
    o.target.set_namespace_("team");
    o.target.set_name("mirror");
    o.target.set_uid("target-uid");
    *o.claim.mutable_type()->mutable_gvr() = core::ToProto(gvr_);
    o.claim.mutable_type()->mutable_gvk()->set_version("v1");
    o.claim.mutable_type()->mutable_gvk()->set_kind("ConfigMap");
    o.claim.mutable_scope()->set_namespace_("team");
    reverser::v1::OperationSet all;
    all.set_all(true);
    o.scope.namespaces["team"] = all;
    o.redis = options_;
    o.attribution_grace = grace;
    o.refusals = &refusals_;
    stream_ = std::make_unique<SpliceStream>(o, delivery_.get(), &metrics_);
    stream_->Start();
  }

  // The persisted cursor's position ("" when none), without its incarnation.
  std::string Cursor() {
    auto v = redis_->Cli({"GET", "reverser:splice:v1:target-uid:configmaps:ns:team:acked"});
    if (!v.ok()) return "";
    std::string text(absl::StripTrailingAsciiWhitespace(*v));
    return text.substr(0, text.find('@'));
  }
  // The materialization's current incarnation.
  std::string Incarnation() {
    auto v = redis_->Cli({"HGET", "reverser:mat:v1:{configmaps:ns:team}:ckpt:meta", "incarnation"});
    return v.ok() ? std::string(absl::StripTrailingAsciiWhitespace(*v)) : "";
  }

  void RecordFact(const std::string& name, int rv, const std::string& author) {
    redisstore::AuthorFact fact;
    fact.group_resource = "configmaps";
    fact.namespace_ = "team";
    fact.name = name;
    fact.uid = "uid-" + name;
    fact.author = author;
    fact.verb = "update";
    fact.resource_version = std::to_string(rv);
    ASSERT_TRUE(facts_->Record(fact).ok());
  }

  void RecordAdmission(const std::string& name, redisstore::AdmissionChange change,
                       const std::string& author, const std::string& request,
                       const std::string& old_rv = "") {
    redisstore::AdmissionFact admitted;
    admitted.change = change;
    admitted.request_uid = request;
    admitted.old_resource_version = old_rv;
    admitted.fact.group_resource = "configmaps";
    admitted.fact.namespace_ = "team";
    admitted.fact.name = name;
    admitted.fact.uid = "uid-" + name;
    admitted.fact.author = author;
    admitted.fact.verb = "update";
    ASSERT_TRUE(facts_->RecordAdmission(admitted).ok());
  }

  // Runs `op` again when the first try hit the dead socket a Redis restart leaves behind.
  template <typename Op>
  auto AfterReconnect(Op op) -> decltype(op()) {
    auto result = op();
    if (!result.ok() && absl::IsUnavailable(result.status())) result = op();
    return result;
  }

  // Checkpoint {a} at 5, saved as the snapshot a Redis restart will load (no cursor in it yet);
  // then the stream delivers it and `b` at 6-0, both acked.
  void SnapshotThenDeliverB() {
    ASSERT_TRUE(store_
                    ->ReplaceCheckpoint({{"team/a", ConfigMapJson("team", "a", "1", 5)}},
                                        core::StreamPosition::EndOf(5))
                    .ok());
    ASSERT_TRUE(redis_->Cli({"SAVE"}).ok());
    StartStream(absl::ZeroDuration());
    auto resync = peer_.Next();
    ASSERT_TRUE(resync && resync->has_resync());
    peer_.Ack(*resync);
    ASSERT_TRUE(store_->Append(Entry("b", "1", 6, redisstore::ChangeOp::kAdded)).ok());
    auto event = peer_.Next();
    ASSERT_TRUE(event && event->has_event());
    peer_.Ack(*event);
    ASSERT_TRUE(testing::WaitFor([&] { return Cursor() == "6-0"; }, absl::Seconds(10))) << Cursor();
  }

  double StateLost(const std::string& reason) {
    return metrics_
        .GetCounter("reverser_splicer_state_lost_total", "",
                    {{"gittarget_namespace", "team"},
                     {"gittarget_name", "mirror"},
                     {"group", ""},
                     {"version", "v1"},
                     {"resource", "configmaps"},
                     {"reason", reason}})
        .Value();
  }

  const core::GroupVersionResource gvr_{"", "v1", "configmaps"};
  std::unique_ptr<testing::RedisServer> redis_;
  redisstore::RedisOptions options_;
  std::unique_ptr<redisstore::RedisConnection> conn_;
  std::unique_ptr<redisstore::MaterializationStore> store_;
  std::unique_ptr<redisstore::AuthorFactStore> facts_;
  RecordingGitWorker peer_;
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<DeliveryClient> delivery_;
  runtime::MetricsRegistry metrics_;
  RefusalBook refusals_;
  std::unique_ptr<SpliceStream> stream_;
};

TEST_F(SpliceStreamTest, ResyncThenEventsCursorOnlyAfterAck) {
  ASSERT_TRUE(store_
                  ->ReplaceCheckpoint({{"team/a", ConfigMapJson("team", "a", "1", 5)}},
                                      core::StreamPosition::EndOf(5))
                  .ok());
  ASSERT_TRUE(store_->Append(Entry("b", "1", 6, redisstore::ChangeOp::kAdded)).ok());
  StartStream(absl::ZeroDuration());
  auto resync = peer_.Next();
  ASSERT_TRUE(resync && resync->has_resync());
  EXPECT_EQ(resync->resync().desired_size(), 2);
  EXPECT_EQ(core::FromProto(resync->resync().coverage_head()).ToString(), "6-0");
  EXPECT_EQ(Cursor(), "") << "no cursor before the push is acked";
  peer_.Ack(*resync);
  ASSERT_TRUE(testing::WaitFor([&] { return Cursor() == "6-0"; }, absl::Seconds(10))) << Cursor();

  ASSERT_TRUE(store_->Append(Entry("a", "2", 7)).ok());
  auto event = peer_.Next();
  ASSERT_TRUE(event && event->has_event());
  EXPECT_EQ(event->event().operation(), reverser::v1::OPERATION_UPDATE);
  EXPECT_EQ(event->event().object().ref().name(), "a");
  EXPECT_FALSE(event->event().has_author());  // no fact: the committer
  peer_.Ack(*event);
  ASSERT_TRUE(testing::WaitFor([&] { return Cursor() == "7-0"; }, absl::Seconds(10)));

  // A restart resumes from the cursor: no resync, only what came after.
  stream_->Stop();
  ASSERT_TRUE(store_->Append(Entry("b", "2", 8)).ok());
  StartStream(absl::ZeroDuration());
  auto resumed = peer_.Next();
  ASSERT_TRUE(resumed && resumed->has_event()) << "a resumed stream must not resync";
  EXPECT_EQ(core::FromProto(resumed->event().position()).ToString(), "8-0");
}

TEST_F(SpliceStreamTest, SameRvEntriesAreComparedAsFullPositions) {
  ASSERT_TRUE(store_->ReplaceCheckpoint({}, core::StreamPosition::EndOf(1)).ok());
  ASSERT_TRUE(store_->Append(Entry("a", "1", 9, redisstore::ChangeOp::kAdded)).ok());  // 9-0
  // A different object's entry sharing the RV (e.g. an audit-intake entry) gets 9-1.
  ASSERT_TRUE(store_->Append(Entry("b", "1", 9, redisstore::ChangeOp::kAdded)).ok());
  // Delivered up to 9-0: the entry at 9-1 is still due, 9-0 is not.
  ASSERT_TRUE(redis_
                  ->Cli({"SET", "reverser:splice:v1:target-uid:configmaps:ns:team:acked",
                         "9-0@" + Incarnation()})
                  .ok());
  StartStream(absl::ZeroDuration());
  auto event = peer_.Next();
  ASSERT_TRUE(event && event->has_event());
  EXPECT_EQ(event->event().object().ref().name(), "b");
  EXPECT_EQ(core::FromProto(event->event().position()).ToString(), "9-1");
  EXPECT_TRUE(peer_.Idle(absl::Milliseconds(300)));
}

TEST_F(SpliceStreamTest, AuthorFactsNameTheAuthorAndAWaitDoesNotStallOtherObjects) {
  ASSERT_TRUE(store_->ReplaceCheckpoint({}, core::StreamPosition::EndOf(1)).ok());
  StartStream(absl::Seconds(3));
  auto resync = peer_.Next();
  ASSERT_TRUE(resync && resync->has_resync());
  peer_.Ack(*resync);
  // x has no fact yet (its author arrives late); y's fact is there.
  ASSERT_TRUE(store_->Append(Entry("x", "1", 10, redisstore::ChangeOp::kAdded)).ok());
  RecordFact("y", 11, "bob");
  ASSERT_TRUE(store_->Append(Entry("y", "1", 11, redisstore::ChangeOp::kAdded)).ok());
  auto first = peer_.Next(absl::Seconds(2));
  ASSERT_TRUE(first && first->has_event());
  EXPECT_EQ(first->event().object().ref().name(), "y") << "y must not wait behind x";
  EXPECT_EQ(first->event().author().username(), "bob");
  EXPECT_EQ(first->event().author().resolution(), "exact_user");
  RecordFact("x", 10, "alice");  // within the grace
  auto second = peer_.Next(absl::Seconds(5));
  ASSERT_TRUE(second && second->has_event());
  EXPECT_EQ(second->event().object().ref().name(), "x");
  EXPECT_EQ(second->event().author().username(), "alice");
  // Acks arrive in send order (y then x): the cursor covers both only once x is acked.
  peer_.Ack(*first);
  peer_.Ack(*second);
  ASSERT_TRUE(testing::WaitFor([&] { return Cursor() == "11-0"; }, absl::Seconds(10))) << Cursor();
}

TEST_F(SpliceStreamTest, FactsBeforeDuringAndAfterTheGrace) {
  ASSERT_TRUE(store_->ReplaceCheckpoint({}, core::StreamPosition::EndOf(1)).ok());
  StartStream(absl::Milliseconds(600));
  auto resync = peer_.Next();
  ASSERT_TRUE(resync && resync->has_resync());
  // Before: the fact is there when the event is read.
  RecordFact("before", 20, "alice");
  ASSERT_TRUE(store_->Append(Entry("before", "1", 20, redisstore::ChangeOp::kAdded)).ok());
  auto before = peer_.Next();
  ASSERT_TRUE(before && before->has_event());
  EXPECT_EQ(before->event().author().username(), "alice");
  // During: the fact arrives while the event waits.
  ASSERT_TRUE(store_->Append(Entry("during", "1", 21, redisstore::ChangeOp::kAdded)).ok());
  RecordFact("during", 21, "bob");
  auto during = peer_.Next();
  ASSERT_TRUE(during && during->has_event());
  EXPECT_EQ(during->event().author().username(), "bob");
  // After: the grace ends first; the committer is used and the late fact changes nothing.
  ASSERT_TRUE(store_->Append(Entry("after", "1", 22, redisstore::ChangeOp::kAdded)).ok());
  auto after = peer_.Next();
  ASSERT_TRUE(after && after->has_event());
  EXPECT_FALSE(after->event().has_author());
  RecordFact("after", 22, "carol");
  EXPECT_TRUE(peer_.Idle(absl::Milliseconds(800))) << "a late fact never re-sends the event";
  // An ADDED/MODIFIED event never takes `:last` (it may name an older author): only the exact
  // uid:rv fact counts.
  ASSERT_TRUE(store_->Append(Entry("after", "2", 23)).ok());
  auto modified = peer_.Next();
  ASSERT_TRUE(modified && modified->has_event());
  EXPECT_FALSE(modified->event().has_author());
}

TEST_F(SpliceStreamTest, AdmissionFactsNameWhoAskedAndNeverGuess) {
  // Admission only (no audit access): a is in the checkpoint at 5.
  ASSERT_TRUE(store_
                  ->ReplaceCheckpoint({{"team/a", ConfigMapJson("team", "a", "1", 5)}},
                                      core::StreamPosition::EndOf(5))
                  .ok());
  StartStream(absl::Seconds(3), /*audit_facts=*/false, /*admission_facts=*/true);
  auto resync = peer_.Next();
  ASSERT_TRUE(resync && resync->has_resync());
  // An update is matched by the version it was admitted against: the resync's 5.
  RecordAdmission("a", redisstore::AdmissionChange::kUpdate, "alice", "r1", "5");
  ASSERT_TRUE(store_->Append(Entry("a", "2", 6)).ok());
  auto update = peer_.Next();
  ASSERT_TRUE(update && update->has_event());
  EXPECT_EQ(update->event().author().username(), "alice");
  EXPECT_EQ(update->event().author().resolution(), "admission");
  // A create by its uid.
  RecordAdmission("b", redisstore::AdmissionChange::kCreate, "bob", "r2");
  ASSERT_TRUE(store_->Append(Entry("b", "1", 7, redisstore::ChangeOp::kAdded)).ok());
  auto create = peer_.Next();
  ASSERT_TRUE(create && create->has_event());
  EXPECT_EQ(create->event().author().username(), "bob");
  // Two users admitted against 6 (one of them lost a race): the committer, at once.
  RecordAdmission("a", redisstore::AdmissionChange::kUpdate, "carol", "r3", "6");
  RecordAdmission("a", redisstore::AdmissionChange::kUpdate, "dave", "r4", "6");
  ASSERT_TRUE(store_->Append(Entry("a", "3", 8)).ok());
  auto raced = peer_.Next(absl::Seconds(2));
  ASSERT_TRUE(raced && raced->has_event());
  EXPECT_FALSE(raced->event().has_author());
  // A status-only entry (no event) still moves the version: the next update is matched at 9.
  ASSERT_TRUE(store_->Append(Entry("a", "3", 9)).ok());
  RecordAdmission("a", redisstore::AdmissionChange::kUpdate, "erin", "r5", "9");
  ASSERT_TRUE(store_->Append(Entry("a", "4", 10)).ok());
  auto after_status = peer_.Next();
  ASSERT_TRUE(after_status && after_status->has_event());
  EXPECT_EQ(after_status->event().author().username(), "erin");
  // A delete by uid.
  RecordAdmission("b", redisstore::AdmissionChange::kDelete, "frank", "r6");
  ASSERT_TRUE(store_->Append(Entry("b", "1", 11, redisstore::ChangeOp::kDeleted)).ok());
  auto removal = peer_.Next();
  ASSERT_TRUE(removal && removal->has_event());
  EXPECT_EQ(removal->event().author().username(), "frank");
  EXPECT_EQ(metrics_
                .GetCounter("gitopsreverser_attribution_resolutions_total", "",
                            {{"result", "ambiguous"},
                             {"group", ""},
                             {"version", "v1"},
                             {"resource", "configmaps"}})
                .Value(),
            1);
}

TEST_F(SpliceStreamTest, WithBothSourcesTheAuditFactWinsAndAdmissionFillsIn) {
  ASSERT_TRUE(store_
                  ->ReplaceCheckpoint({{"team/a", ConfigMapJson("team", "a", "1", 5)}},
                                      core::StreamPosition::EndOf(5))
                  .ok());
  StartStream(absl::Milliseconds(300), /*audit_facts=*/true, /*admission_facts=*/true);
  auto resync = peer_.Next();
  ASSERT_TRUE(resync && resync->has_resync());
  // Both: the audit fact (which arrives after the admission one) names the author.
  RecordAdmission("a", redisstore::AdmissionChange::kUpdate, "mallory", "r1", "5");
  ASSERT_TRUE(store_->Append(Entry("a", "2", 6)).ok());
  RecordFact("a", 6, "erin");
  auto audited = peer_.Next();
  ASSERT_TRUE(audited && audited->has_event());
  EXPECT_EQ(audited->event().author().username(), "erin");
  EXPECT_EQ(audited->event().author().resolution(), "exact_user");
  // No audit fact within the grace: the admission fact is taken.
  RecordAdmission("a", redisstore::AdmissionChange::kUpdate, "grace", "r2", "6");
  ASSERT_TRUE(store_->Append(Entry("a", "3", 7)).ok());
  auto admitted = peer_.Next();
  ASSERT_TRUE(admitted && admitted->has_event());
  EXPECT_EQ(admitted->event().author().username(), "grace");
  EXPECT_EQ(admitted->event().author().resolution(), "admission");
}

TEST_F(SpliceStreamTest, ARecreateNeverOvertakesTheDeleteOfTheSameName) {
  ASSERT_TRUE(store_->ReplaceCheckpoint({}, core::StreamPosition::EndOf(1)).ok());
  StartStream(absl::Milliseconds(500));
  auto resync = peer_.Next();
  ASSERT_TRUE(resync && resync->has_resync());
  // The delete of the first incarnation waits for its author; the re-create (new uid, author
  // known) must still come after it, or the new file would be deleted.
  ASSERT_TRUE(store_->Append(Entry("x", "1", 30, redisstore::ChangeOp::kDeleted)).ok());
  auto recreate = Entry("x", "2", 31, redisstore::ChangeOp::kAdded);
  recreate.uid = "uid-x-2";
  json body = json::parse(recreate.object_json);
  body["metadata"]["uid"] = "uid-x-2";
  recreate.object_json = body.dump();
  RecordFact("x", 31, "alice");
  ASSERT_TRUE(store_->Append(recreate).ok());
  auto first = peer_.Next();
  auto second = peer_.Next();
  ASSERT_TRUE(first && second);
  EXPECT_EQ(first->event().operation(), reverser::v1::OPERATION_DELETE);
  EXPECT_EQ(second->event().operation(), reverser::v1::OPERATION_CREATE);
}

TEST_F(SpliceStreamTest, ResplicingResendsTheDesiredSetWithoutMovingTheCursorBack) {
  ASSERT_TRUE(store_
                  ->ReplaceCheckpoint({{"team/a", ConfigMapJson("team", "a", "1", 5)}},
                                      core::StreamPosition::EndOf(5))
                  .ok());
  StartStream(absl::ZeroDuration());
  auto resync = peer_.Next();
  ASSERT_TRUE(resync && resync->has_resync());
  peer_.Ack(*resync);
  ASSERT_TRUE(store_->Append(Entry("b", "1", 6, redisstore::ChangeOp::kAdded)).ok());
  auto event = peer_.Next();
  ASSERT_TRUE(event && event->has_event());
  peer_.Ack(*event);
  ASSERT_TRUE(testing::WaitFor([&] { return Cursor() == "6-0"; }, absl::Seconds(10))) << Cursor();

  // An event read but not acked yet, then the resplice: the resync covers it.
  ASSERT_TRUE(store_->Append(Entry("c", "1", 7, redisstore::ChangeOp::kAdded)).ok());
  auto pending = peer_.Next();
  ASSERT_TRUE(pending && pending->has_event());
  stream_->Resplice();
  auto again = peer_.Next();
  ASSERT_TRUE(again && again->has_resync()) << "a resplice sends a fresh resync";
  EXPECT_EQ(again->resync().desired_size(), 3);
  EXPECT_EQ(core::FromProto(again->resync().coverage_head()).ToString(), "7-0");
  EXPECT_TRUE(testing::WaitFor([&] { return stream_->Status().reason == "AllStreamsReady"; },
                               absl::Seconds(10)));
  EXPECT_EQ(Cursor(), "6-0") << "the cursor waits for the resync's ack and never goes back";
  peer_.Ack(*again);
  ASSERT_TRUE(testing::WaitFor([&] { return Cursor() == "7-0"; }, absl::Seconds(10))) << Cursor();
  // Tailing goes on after the resync's coverage head: nothing is sent twice or skipped.
  ASSERT_TRUE(store_->Append(Entry("d", "1", 8, redisstore::ChangeOp::kAdded)).ok());
  auto next = peer_.Next();
  ASSERT_TRUE(next && next->has_event());
  EXPECT_EQ(core::FromProto(next->event().position()).ToString(), "8-0");
}

TEST_F(SpliceStreamTest, BrokenDeliveryStreamRestartsFromTheCursor) {
  ASSERT_TRUE(store_->ReplaceCheckpoint({}, core::StreamPosition::EndOf(1)).ok());
  StartStream(absl::ZeroDuration());
  auto resync = peer_.Next();
  ASSERT_TRUE(resync);
  peer_.Ack(*resync);
  ASSERT_TRUE(
      testing::WaitFor([&] { return Cursor() == "1-18446744073709551615"; }, absl::Seconds(10)));
  ASSERT_TRUE(store_->Append(Entry("a", "1", 12, redisstore::ChangeOp::kAdded)).ok());
  auto event = peer_.Next();
  ASSERT_TRUE(event && event->has_event());
  // Not acked, and the stream breaks: the event is delivered again on the new stream.
  peer_.DropStream();
  ASSERT_TRUE(
      store_->Append(Entry("b", "1", 13, redisstore::ChangeOp::kAdded)).ok());  // wakes the reader
  std::set<std::string> redelivered;
  for (int i = 0; i < 4 && redelivered.size() < 2; ++i) {
    auto m = peer_.Next();
    ASSERT_TRUE(m);
    if (m->has_event()) redelivered.insert(m->event().object().ref().name());
  }
  EXPECT_TRUE(redelivered.count("a")) << "an unacked event is delivered again after a break";
  EXPECT_GE(peer_.connections(), 2);
}

// Redis restarted empty: nothing is delivered from the empty (or checkpoint-less) state, the
// stream says why, and the rebuilt checkpoint is resynced — with every object that exists.
TEST_F(SpliceStreamTest, RedisRestartedEmptyWaitsForTheRebuildAndResyncsFromIt) {
  ASSERT_TRUE(store_
                  ->ReplaceCheckpoint({{"team/a", ConfigMapJson("team", "a", "1", 5)},
                                       {"team/b", ConfigMapJson("team", "b", "1", 5)}},
                                      core::StreamPosition::EndOf(5))
                  .ok());
  StartStream(absl::ZeroDuration());
  auto resync = peer_.Next();
  ASSERT_TRUE(resync && resync->has_resync());
  peer_.Ack(*resync);
  ASSERT_TRUE(store_->Append(Entry("a", "2", 6)).ok());
  auto event = peer_.Next();
  ASSERT_TRUE(event && event->has_event());
  peer_.Ack(*event);
  ASSERT_TRUE(testing::WaitFor([&] { return Cursor() == "6-0"; }, absl::Seconds(10))) << Cursor();

  ASSERT_TRUE(redis_->Restart().ok());
  ASSERT_TRUE(testing::WaitFor([&] { return stream_->Status().reason == kRedisStateLostReason; },
                               absl::Seconds(10)));
  EXPECT_EQ(stream_->Status().state, reverser::v1::STREAM_STATE_REPLAYING);
  EXPECT_TRUE(absl::StrContains(stream_->Status().message, "Rebuilding after Redis state loss"))
      << stream_->Status().message;
  // Entries without a checkpoint (an audit intake appending on) are not delivered either.
  ASSERT_TRUE(AfterReconnect([&] { return store_->Append(Entry("c", "1", 7)); }).ok());
  EXPECT_TRUE(peer_.Idle(absl::Milliseconds(500))) << "nothing is delivered from a lost state";
  EXPECT_EQ(StateLost("checkpoint_vanished"), 1);

  // The materializer's rebuild: a LIST of everything that exists.
  ASSERT_TRUE(store_
                  ->ReplaceCheckpoint({{"team/a", ConfigMapJson("team", "a", "2", 6)},
                                       {"team/b", ConfigMapJson("team", "b", "1", 5)},
                                       {"team/c", ConfigMapJson("team", "c", "1", 7)}},
                                      core::StreamPosition::EndOf(8))
                  .ok());
  auto rebuilt = peer_.Next();
  ASSERT_TRUE(rebuilt && rebuilt->has_resync());
  EXPECT_EQ(rebuilt->resync().desired_size(), 3) << "the resync holds every object that exists";
  EXPECT_EQ(core::FromProto(rebuilt->resync().coverage_head()), core::StreamPosition::EndOf(8));
  peer_.Ack(*rebuilt);
  ASSERT_TRUE(
      testing::WaitFor([&] { return Cursor() == "8-18446744073709551615"; }, absl::Seconds(10)))
      << Cursor();
  auto stored = redis_->Cli({"GET", "reverser:splice:v1:target-uid:configmaps:ns:team:acked"});
  ASSERT_TRUE(stored.ok());
  EXPECT_TRUE(absl::StrContains(*stored, "@" + Incarnation())) << *stored;
  EXPECT_EQ(stream_->Status().reason, "AllStreamsReady");
  ASSERT_TRUE(store_->Append(Entry("d", "1", 9, redisstore::ChangeOp::kAdded)).ok());
  auto next = peer_.Next();
  ASSERT_TRUE(next && next->has_event());
  EXPECT_EQ(core::FromProto(next->event().position()).ToString(), "9-0");
  EXPECT_EQ(StateLost("checkpoint_vanished"), 1) << "counted once per loss";
}

// Redis came back with an older snapshot (no cursor yet, an older checkpoint): a resync from it
// would sweep `b`, which exists. Nothing is sent until the materializer rebuilt it.
TEST_F(SpliceStreamTest, AnOlderSnapshotIsNeverResyncedFrom) {
  SnapshotThenDeliverB();

  ASSERT_TRUE(redis_->Restart().ok());  // back at the snapshot: checkpoint {a} at 5, no cursor
  ASSERT_TRUE(testing::WaitFor([&] { return stream_->Status().reason == kRedisStateLostReason; },
                               absl::Seconds(10)));
  EXPECT_TRUE(peer_.Idle(absl::Milliseconds(500))) << "no resync from an older snapshot";
  EXPECT_EQ(StateLost("went_backwards"), 1);

  ASSERT_TRUE(AfterReconnect([&] {
                return store_->ReplaceCheckpoint({{"team/a", ConfigMapJson("team", "a", "1", 5)},
                                                  {"team/b", ConfigMapJson("team", "b", "1", 6)}},
                                                 core::StreamPosition::EndOf(7));
              }).ok());
  auto rebuilt = peer_.Next();
  ASSERT_TRUE(rebuilt && rebuilt->has_resync());
  EXPECT_EQ(rebuilt->resync().desired_size(), 2);
}

// The same lineage caught up again (a resumed watch re-appended what the snapshot lacked) and
// only the cursor is behind: the cursor this process acked is put back; nothing is sent twice.
TEST_F(SpliceStreamTest, ACursorRedisLostIsPutBackFromWhatThisProcessAcked) {
  SnapshotThenDeliverB();

  ASSERT_TRUE(redis_->Restart().ok());
  ASSERT_TRUE(testing::WaitFor([&] { return stream_->Status().reason == kRedisStateLostReason; },
                               absl::Seconds(10)));
  // The watch resumes from the snapshot's top and appends the gap again, then a new change.
  ASSERT_TRUE(AfterReconnect([&] {
                return store_->Append(Entry("b", "1", 6, redisstore::ChangeOp::kAdded));
              }).ok());
  ASSERT_TRUE(store_->Append(Entry("c", "1", 7, redisstore::ChangeOp::kAdded)).ok());
  auto next = peer_.Next();
  ASSERT_TRUE(next && next->has_event()) << "tailing goes on; no resync";
  EXPECT_EQ(next->event().object().ref().name(), "c");
  EXPECT_EQ(core::FromProto(next->event().position()).ToString(), "7-0");
  EXPECT_EQ(StateLost("cursor_vanished"), 1);
  peer_.Ack(*next);
  ASSERT_TRUE(testing::WaitFor([&] { return Cursor() == "7-0"; }, absl::Seconds(10))) << Cursor();
}

// Redis down for a while: the stream says it is retrying (no crash, no busy loop: sessions back
// off), and once Redis is back (empty) it waits for the rebuild and resyncs from it.
TEST_F(SpliceStreamTest, RedisDownForAWhileIsRetriedThenResynced) {
  ASSERT_TRUE(store_
                  ->ReplaceCheckpoint({{"team/a", ConfigMapJson("team", "a", "1", 5)}},
                                      core::StreamPosition::EndOf(5))
                  .ok());
  StartStream(absl::ZeroDuration());
  auto resync = peer_.Next();
  ASSERT_TRUE(resync && resync->has_resync());
  peer_.Ack(*resync);
  redis_->Crash();
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        SpliceStreamStatus status = stream_->Status();
        return status.state == reverser::v1::STREAM_STATE_BLOCKED && status.reason == "WatchError";
      },
      absl::Seconds(10)));
  ASSERT_TRUE(redis_->Revive().ok());
  ASSERT_TRUE(testing::WaitFor([&] { return stream_->Status().reason == kRedisStateLostReason; },
                               absl::Seconds(20)));
  ASSERT_TRUE(AfterReconnect([&] {
                return store_->ReplaceCheckpoint({{"team/a", ConfigMapJson("team", "a", "2", 7)}},
                                                 core::StreamPosition::EndOf(7));
              }).ok());
  auto rebuilt = peer_.Next(absl::Seconds(20));
  ASSERT_TRUE(rebuilt && rebuilt->has_resync());
  EXPECT_EQ(rebuilt->resync().desired_size(), 1);
}

TEST_F(SpliceStreamTest, ACheckpointThatLostItemsIsNotSpliced) {
  ASSERT_TRUE(store_
                  ->ReplaceCheckpoint({{"team/a", ConfigMapJson("team", "a", "1", 5)},
                                       {"team/b", ConfigMapJson("team", "b", "1", 5)}},
                                      core::StreamPosition::EndOf(5))
                  .ok());
  ASSERT_TRUE(
      redis_->Cli({"HDEL", "reverser:mat:v1:{configmaps:ns:team}:ckpt:items", "team/b"}).ok());
  StartStream(absl::ZeroDuration());
  ASSERT_TRUE(testing::WaitFor([&] { return stream_->Status().reason == kRedisStateLostReason; },
                               absl::Seconds(10)));
  EXPECT_TRUE(peer_.Idle(absl::Milliseconds(500))) << "a partial desired set would sweep b";
  EXPECT_EQ(StateLost("checkpoint_damaged"), 1);
  ASSERT_TRUE(store_
                  ->ReplaceCheckpoint({{"team/a", ConfigMapJson("team", "a", "1", 5)},
                                       {"team/b", ConfigMapJson("team", "b", "1", 5)}},
                                      core::StreamPosition::EndOf(6))
                  .ok());
  auto resync = peer_.Next();
  ASSERT_TRUE(resync && resync->has_resync());
  EXPECT_EQ(resync->resync().desired_size(), 2);
}

// The author fact index vanished (facts and the signal stream): events wait at most the grace
// and go out with the committer; nothing stalls.
TEST_F(SpliceStreamTest, AVanishedFactIndexFallsBackToTheCommitterWithinTheGrace) {
  ASSERT_TRUE(store_->ReplaceCheckpoint({}, core::StreamPosition::EndOf(1)).ok());
  StartStream(absl::Milliseconds(300));
  auto resync = peer_.Next();
  ASSERT_TRUE(resync && resync->has_resync());
  RecordFact("a", 10, "alice");
  ASSERT_TRUE(store_->Append(Entry("a", "1", 10, redisstore::ChangeOp::kAdded)).ok());
  auto attributed = peer_.Next();
  ASSERT_TRUE(attributed && attributed->has_event());
  EXPECT_EQ(attributed->event().author().username(), "alice");
  // The fact keys and the signal stream go (a Redis that lost them), the materialization stays.
  RecordFact("b", 11, "bob");
  ASSERT_TRUE(redis_
                  ->Cli({"DEL", "reverser:author:v1:recorded:configmaps",
                         "reverser:author:v1:audit:configmaps:object:uid-b:11",
                         "reverser:author:v1:audit:configmaps:object:uid-b:last"})
                  .ok());
  ASSERT_TRUE(store_->Append(Entry("b", "1", 11, redisstore::ChangeOp::kAdded)).ok());
  auto unattributed = peer_.Next();
  ASSERT_TRUE(unattributed && unattributed->has_event());
  EXPECT_EQ(unattributed->event().object().ref().name(), "b");
  EXPECT_FALSE(unattributed->event().has_author()) << "the committer, after the grace";
  // And facts recorded afterwards are found again (a new signal stream wakes the reader).
  RecordFact("c", 12, "carol");
  ASSERT_TRUE(store_->Append(Entry("c", "1", 12, redisstore::ChangeOp::kAdded)).ok());
  auto again = peer_.Next();
  ASSERT_TRUE(again && again->has_event());
  EXPECT_EQ(again->event().author().username(), "carol");
}

// ConfigMapJson with an `extra` field nested `levels` deep, as text (nlohmann would copy it
// recursively). The materializer stores objects up to the API server's 10,000 levels.
std::string DeepConfigMapJson(const std::string& name, int rv, int levels) {
  std::string text = ConfigMapJson("team", name, "deep", rv);
  text.pop_back();
  return text + ",\"extra\":" + std::string(levels, '[') + std::string(levels, ']') + "}";
}

// Too deep to sanitize and write: refused without stalling the stream or losing the others,
// counted, reported on the target's status, listed in the resync (so the gitworker keeps its
// file), and its deletion still delivered.
TEST_F(SpliceStreamTest, DeepObjectsAreRefusedVisiblyAndTheRestFlows) {
  ASSERT_TRUE(store_
                  ->ReplaceCheckpoint({{"team/a", ConfigMapJson("team", "a", "1", 5)},
                                       {"team/deep", DeepConfigMapJson("deep", 5, 10000)}},
                                      core::StreamPosition::EndOf(5))
                  .ok());
  StartStream(absl::ZeroDuration());
  auto resync = peer_.Next();
  ASSERT_TRUE(resync && resync->has_resync());
  ASSERT_EQ(resync->resync().desired_size(), 1);
  EXPECT_EQ(resync->resync().desired(0).ref().name(), "a");
  ASSERT_EQ(resync->resync().refused_size(), 1);
  EXPECT_EQ(resync->resync().refused(0).ref().name(), "deep");
  EXPECT_EQ(resync->resync().refused(0).gvk().kind(), "ConfigMap");
  peer_.Ack(*resync);

  // `a` turns deep: refused; `b` behind it flows and the cursor passes both.
  redisstore::StreamEntry deep_a = Entry("a", "", 7);
  deep_a.object_json = DeepConfigMapJson("a", 7, 10000);
  ASSERT_TRUE(store_->Append(deep_a).ok());
  ASSERT_TRUE(store_->Append(Entry("b", "1", 8, redisstore::ChangeOp::kAdded)).ok());
  auto event = peer_.Next();
  ASSERT_TRUE(event && event->has_event());
  EXPECT_EQ(event->event().object().ref().name(), "b");
  peer_.Ack(*event);
  ASSERT_TRUE(testing::WaitFor([&] { return Cursor() == "8-0"; }, absl::Seconds(10))) << Cursor();

  runtime::Labels refused = {{"gittarget_namespace", "team"},
                             {"gittarget_name", "mirror"},
                             {"group", ""},
                             {"version", "v1"},
                             {"resource", "configmaps"},
                             {"reason", "too_deep"}};
  EXPECT_EQ(metrics_.GetCounter("reverser_splicer_objects_refused_total", "", refused).Value(), 2);
  EXPECT_EQ(metrics_.GetCounter("reverser_splicer_entries_skipped_total", "", refused).Value(), 1);
  reverser::v1::StreamSummary summary;
  summary.mutable_target()->set_uid("target-uid");
  refusals_.Fill(&summary);
  EXPECT_EQ(summary.refused_objects(), 2u);
  std::set<std::string> names;
  for (const auto& refusal : summary.refusals()) {
    names.insert(refusal.object().name());
    EXPECT_EQ(refusal.reason(), reverser::v1::REFUSAL_REASON_LIMIT_EXCEEDED);
    EXPECT_EQ(refusal.kind(), "ConfigMap");
    EXPECT_TRUE(absl::StrContains(refusal.message(), "deeper than 512 levels"))
        << refusal.message();
  }
  EXPECT_EQ(names, (std::set<std::string>{"a", "deep"}));

  // Deleting the deep object goes out by identity; once pushed, its refusal clears.
  redisstore::StreamEntry gone = Entry("deep", "", 9, redisstore::ChangeOp::kDeleted);
  gone.object_json = DeepConfigMapJson("deep", 9, 10000);
  ASSERT_TRUE(store_->Append(gone).ok());
  auto deletion = peer_.Next();
  ASSERT_TRUE(deletion && deletion->has_event());
  EXPECT_EQ(deletion->event().operation(), reverser::v1::OPERATION_DELETE);
  EXPECT_EQ(deletion->event().object().ref().name(), "deep");
  EXPECT_EQ(deletion->event().object().ref().uid(), "uid-deep");
  EXPECT_EQ(deletion->event().object().gvk().kind(), "ConfigMap");
  peer_.Ack(*deletion);
  ASSERT_TRUE(testing::WaitFor([&] { return Cursor() == "9-0"; }, absl::Seconds(10))) << Cursor();
  refusals_.Fill(&summary);
  EXPECT_EQ(summary.refused_objects(), 1u);
}

}  // namespace
}  // namespace reverser::splicer
