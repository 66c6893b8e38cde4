// Lost Redis state: the LineageTracker's judgements, and the materialization store's lineage
// record, guarded appends and fail-closed reads against a real redis-server that is flushed
// (FLUSHALL), restarted empty, or restarted from an older snapshot (SAVE, more writes, crash).

#include "libs/redisstore/lineage.h"

#include <memory>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "libs/redisstore/materialization_store.h"
#include "libs/redisstore/test_redis.h"
#include "tests/fixtures/redis_server.h"

namespace reverser::redisstore {
namespace {

using core::StreamPosition;
using Verdict = LineageTracker::Verdict;

LineageMark Mark(std::optional<StreamPosition> checkpoint, std::string incarnation,
                 StreamPosition top = StreamPosition::Zero(), bool damaged = false) {
  LineageMark mark;
  mark.checkpoint = checkpoint;
  mark.incarnation = std::move(incarnation);
  mark.top = top;
  mark.damaged = damaged;
  return mark;
}

TEST(LineageTrackerTest, FirstCheckpointThenSameLineageMovingOn) {
  LineageTracker tracker;
  EXPECT_EQ(tracker.Observe(Mark(std::nullopt, "")).verdict, Verdict::kNone);
  EXPECT_FALSE(tracker.known());
  EXPECT_EQ(tracker.Observe(Mark(StreamPosition::EndOf(10), "a")).verdict, Verdict::kSame);
  EXPECT_EQ(tracker.incarnation(), "a");
  EXPECT_EQ(tracker.Observe(Mark(StreamPosition::EndOf(10), "a", StreamPosition(12, 0))).verdict,
            Verdict::kSame);
  EXPECT_EQ(tracker.head(), StreamPosition(12, 0));
  // A compaction moves the checkpoint up to the top: same lineage, same head.
  EXPECT_EQ(tracker.Observe(Mark(StreamPosition(12, 0), "a", StreamPosition(12, 0))).verdict,
            Verdict::kSame);
  tracker.Advance(StreamPosition(13, 0));
  EXPECT_EQ(tracker.head(), StreamPosition(13, 0));
}

TEST(LineageTrackerTest, VanishedDamagedAndBackwardsAreLossesUntilRebuilt) {
  LineageTracker tracker;
  ASSERT_EQ(tracker.Observe(Mark(StreamPosition::EndOf(10), "a", StreamPosition(20, 0))).verdict,
            Verdict::kSame);

  auto vanished = tracker.Observe(Mark(std::nullopt, ""));
  EXPECT_EQ(vanished.verdict, Verdict::kLost);
  EXPECT_EQ(vanished.loss, StateLoss::kCheckpointVanished);
  // Not remembered: the same look is a loss again.
  EXPECT_EQ(tracker.Observe(Mark(std::nullopt, "")).loss, StateLoss::kCheckpointVanished);

  auto damaged = tracker.Observe(Mark(StreamPosition::EndOf(10), "a", StreamPosition(20, 0), true));
  EXPECT_EQ(damaged.loss, StateLoss::kCheckpointDamaged);

  // An older snapshot of the same lineage.
  auto backwards = tracker.Observe(Mark(StreamPosition::EndOf(10), "a", StreamPosition(15, 0)));
  EXPECT_EQ(backwards.loss, StateLoss::kWentBackwards);
  // An older snapshot of an older lineage: stale, and stays stale even once it catches up.
  EXPECT_EQ(tracker.Observe(Mark(StreamPosition::EndOf(5), "old")).loss, StateLoss::kWentBackwards);
  EXPECT_EQ(tracker.Observe(Mark(StreamPosition::EndOf(30), "old")).loss,
            StateLoss::kWentBackwards);

  // The same lineage caught up again (a resumed watch re-appended the gap): fine.
  EXPECT_EQ(tracker.Observe(Mark(StreamPosition::EndOf(10), "a", StreamPosition(20, 0))).verdict,
            Verdict::kSame);
  // Rebuilt from a LIST after everything seen: renewed.
  auto renewed = tracker.Observe(Mark(StreamPosition::EndOf(25), "b"));
  EXPECT_EQ(renewed.verdict, Verdict::kRenewed);
  EXPECT_EQ(tracker.incarnation(), "b");
  EXPECT_EQ(tracker.head(), StreamPosition::EndOf(25));
}

TEST(LineageTrackerTest, RebaseTakesTheWritersOwnCheckpointAsTheTruth) {
  LineageTracker tracker;
  tracker.Rebase("a", StreamPosition::EndOf(10));
  EXPECT_TRUE(tracker.known());
  tracker.Advance(StreamPosition(40, 0));
  // The writer's own swap, even below what it saw: that is what Redis holds now.
  tracker.Rebase("b", StreamPosition::EndOf(30));
  EXPECT_EQ(tracker.head(), StreamPosition::EndOf(30));
  EXPECT_EQ(tracker.Observe(Mark(StreamPosition::EndOf(30), "b")).verdict, Verdict::kSame);
}

TEST(LineageTrackerTest, AMarkReadBeforeTheWritersOwnSwapIsNotJudged) {
  LineageTracker tracker;
  tracker.Rebase("a", StreamPosition::EndOf(10));
  tracker.Advance(StreamPosition(20, 0));
  const uint64_t epoch = tracker.epoch();
  LineageMark before_swap = Mark(StreamPosition::EndOf(10), "a", StreamPosition(20, 0));
  tracker.Rebase("b", StreamPosition::EndOf(30));  // lands between the read and the judgement
  EXPECT_EQ(tracker.ObserveIfCurrent(before_swap, epoch), std::nullopt);
  EXPECT_EQ(tracker.incarnation(), "b");
  auto current = tracker.ObserveIfCurrent(Mark(StreamPosition::EndOf(30), "b"), tracker.epoch());
  ASSERT_TRUE(current.has_value());
  EXPECT_EQ(current->verdict, Verdict::kSame);
  // Without the epoch the stale mark would have been judged a loss.
  EXPECT_EQ(tracker.Observe(before_swap).loss, StateLoss::kWentBackwards);
}

TEST(LineageTrackerTest, StateLostErrorCarriesItsReason) {
  absl::Status lost = StateLostError(StateLoss::kWentBackwards, "appending to s");
  EXPECT_TRUE(absl::IsDataLoss(lost));
  EXPECT_EQ(StateLossOf(lost), StateLoss::kWentBackwards);
  EXPECT_EQ(StateLossOf(absl::DataLossError("other")), std::nullopt);
  EXPECT_EQ(StateLossOf(absl::UnavailableError("down")), std::nullopt);
  EXPECT_EQ(StateLossName(StateLoss::kCheckpointVanished), "checkpoint_vanished");
}

const core::GroupVersionResource kConfigMaps{"", "v1", "configmaps"};

class StoreLineageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto server = testing::RedisServer::Start();
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    auto redis = ConnectTo(*server_);
    ASSERT_TRUE(redis.ok()) << redis.status();
    redis_ = std::move(*redis);
    store_ = std::make_unique<MaterializationStore>(redis_.get(), KeyPrefix::Default(), kConfigMaps,
                                                    core::WatchScope::Cluster());
  }

  static StreamEntry Change(const std::string& name, uint64_t rv) {
    StreamEntry entry;
    entry.op = ChangeOp::kModified;
    entry.uid = "uid-" + name;
    entry.namespace_ = "default";
    entry.name = name;
    entry.resource_version = absl::StrCat(rv);
    entry.object_json = absl::StrCat("{\"name\":\"", name, "\",\"rv\":", rv, "}");
    return entry;
  }

  static ObjectMap Items(int n) {
    ObjectMap items;
    for (int i = 0; i < n; ++i)
      items[absl::StrCat("default/o", i)] = absl::StrCat("{\"i\":", i, "}");
    return items;
  }

  std::string Cli(const std::vector<std::string>& args) {
    auto out = server_->Cli(args);
    EXPECT_TRUE(out.ok()) << out.status();
    return out.ok() ? std::string(absl::StripAsciiWhitespace(*out)) : "";
  }

  // Runs `op` until it gets past the dead socket a restart leaves (one Unavailable at most).
  template <typename Op>
  auto AfterReconnect(Op op) -> decltype(op()) {
    auto result = op();
    if (!result.ok() && absl::IsUnavailable(result.status())) result = op();
    return result;
  }

  std::unique_ptr<testing::RedisServer> server_;
  std::unique_ptr<RedisConnection> redis_;
  std::unique_ptr<MaterializationStore> store_;
};

TEST_F(StoreLineageTest, EveryListCheckpointStartsAnIncarnationAndCompactionKeepsIt) {
  auto first = store_->ReplaceCheckpoint(Items(3), StreamPosition::EndOf(10));
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->incarnation.size(), 16u);
  EXPECT_EQ(Cli({"HGET", "reverser:mat:v1:{configmaps:cluster}:ckpt:meta", "incarnation"}),
            first->incarnation);
  EXPECT_EQ(Cli({"HGET", "reverser:mat:v1:{configmaps:cluster}:ckpt:meta", "items"}), "3");
  ASSERT_TRUE(store_->Append(Change("o9", 11)).ok());
  auto compacted = store_->Compact();
  ASSERT_TRUE(compacted.ok() && compacted->compacted) << compacted.status();
  auto mark = store_->ReadMark();
  ASSERT_TRUE(mark.ok()) << mark.status();
  EXPECT_EQ(mark->incarnation, first->incarnation);
  EXPECT_EQ(mark->checkpoint, StreamPosition(11, 0));
  EXPECT_EQ(mark->top, StreamPosition(11, 0));
  EXPECT_FALSE(mark->damaged);
  EXPECT_EQ(Cli({"HGET", "reverser:mat:v1:{configmaps:cluster}:ckpt:meta", "items"}), "4");

  auto second = store_->ReplaceCheckpoint(Items(2), StreamPosition::EndOf(12));
  ASSERT_TRUE(second.ok() && second->swapped);
  EXPECT_NE(second->incarnation, first->incarnation);
  // A compaction folded from the first incarnation no longer lands (even at the same position).
  MaterializationView old_view;
  old_view.checkpoint = StreamPosition::EndOf(12);
  old_view.mark.incarnation = first->incarnation;
  old_view.tail.push_back(Change("o8", 13));
  old_view.tail.back().position = StreamPosition(13, 0);
  auto refused = store_->CompactView(old_view);
  ASSERT_TRUE(refused.ok()) << refused.status();
  EXPECT_FALSE(refused->compacted);
}

TEST_F(StoreLineageTest, GuardedAppendsWriteNothingOntoAFlushedMaterialization) {
  LineageTracker tracker;
  store_->GuardAppends(&tracker);
  ASSERT_TRUE(store_->ReplaceCheckpoint(Items(2), StreamPosition::EndOf(10)).ok());
  ASSERT_TRUE(store_->Append(Change("o0", 11)).ok());
  EXPECT_EQ(tracker.head(), StreamPosition(11, 0));

  ASSERT_EQ(Cli({"FLUSHALL"}), "OK");
  auto refused = store_->AppendAll({Change("o1", 12), Change("o0", 13)});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(StateLossOf(refused.status()), StateLoss::kCheckpointVanished) << refused.status();
  EXPECT_EQ(Cli({"EXISTS", "reverser:mat:v1:{configmaps:cluster}:stream"}), "0");
  EXPECT_EQ(Cli({"DBSIZE"}), "0");
  // An unguarded writer (the audit intake) still appends, as before.
  MaterializationStore unguarded(redis_.get(), KeyPrefix::Default(), kConfigMaps,
                                 core::WatchScope::Cluster());
  ASSERT_TRUE(unguarded.Append(Change("o1", 12)).ok());
  EXPECT_EQ(StateLossOf(store_->Append(Change("o0", 13)).status()), StateLoss::kCheckpointVanished);

  // The writer relists: a new incarnation, and appends go on.
  auto rebuilt = store_->ReplaceCheckpoint(Items(3), StreamPosition::EndOf(13));
  ASSERT_TRUE(rebuilt.ok() && rebuilt->swapped);
  EXPECT_EQ(tracker.incarnation(), rebuilt->incarnation);
  auto appended = store_->Append(Change("o0", 14));
  ASSERT_TRUE(appended.ok()) << appended.status();
  EXPECT_TRUE(appended->appended);
  auto view = store_->Load();
  ASSERT_TRUE(view.ok() && view->checkpoint.has_value());
  EXPECT_EQ(view->Fold().size(), 3u);
  EXPECT_EQ(view->tail.size(), 1u);  // the entry at 12 was covered by the new checkpoint
}

TEST_F(StoreLineageTest, AServerRestartedEmptyIsNoticedThroughTheReconnect) {
  LineageTracker tracker;
  store_->GuardAppends(&tracker);
  ASSERT_TRUE(store_->ReplaceCheckpoint(Items(2), StreamPosition::EndOf(10)).ok());
  ASSERT_TRUE(server_->Restart().ok());  // nothing was SAVEd: it comes back empty
  auto refused = AfterReconnect([&] { return store_->Append(Change("o0", 11)); });
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(StateLossOf(refused.status()), StateLoss::kCheckpointVanished) << refused.status();
  auto view = store_->Load();
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_FALSE(view->checkpoint.has_value());
}

TEST_F(StoreLineageTest, AnOlderSnapshotIsNoticedByWritersAndReaders) {
  LineageTracker writer;
  store_->GuardAppends(&writer);
  ASSERT_TRUE(store_->ReplaceCheckpoint(Items(2), StreamPosition::EndOf(10)).ok());
  ASSERT_TRUE(store_->Append(Change("o0", 11)).ok());
  ASSERT_EQ(Cli({"SAVE"}), "OK");  // the snapshot a restart will load
  ASSERT_TRUE(store_->AppendAll({Change("o1", 12), Change("o2", 13)}).ok());

  auto reader_redis = ConnectTo(*server_);
  ASSERT_TRUE(reader_redis.ok());
  MaterializationStore reader_store((*reader_redis).get(), KeyPrefix::Default(), kConfigMaps,
                                    core::WatchScope::Cluster());
  LineageTracker reader;
  auto batch = reader_store.ReadAfter(StreamPosition::EndOf(10), 100);
  ASSERT_TRUE(batch.ok()) << batch.status();
  EXPECT_EQ(batch->entries.size(), 3u);
  EXPECT_EQ(batch->mark.top, StreamPosition(13, 0));
  EXPECT_EQ(reader.Observe(batch->mark).verdict, Verdict::kSame);

  ASSERT_TRUE(server_->Restart().ok());  // crash: back at the snapshot (top 11)
  ASSERT_EQ(Cli({"HGET", "reverser:mat:v1:{configmaps:cluster}:counts", "top"}), "11-0");

  auto refused = AfterReconnect([&] { return store_->Append(Change("o3", 14)); });
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(StateLossOf(refused.status()), StateLoss::kWentBackwards) << refused.status();
  EXPECT_EQ(Cli({"XLEN", "reverser:mat:v1:{configmaps:cluster}:stream"}), "1");

  batch = AfterReconnect([&] { return reader_store.ReadAfter(StreamPosition(13, 0), 100); });
  ASSERT_TRUE(batch.ok()) << batch.status();
  EXPECT_FALSE(batch->behind_checkpoint);
  EXPECT_EQ(reader.Observe(batch->mark).loss, StateLoss::kWentBackwards);

  // The writer rebuilds from a LIST; both see the new lineage.
  auto rebuilt = store_->ReplaceCheckpoint(Items(4), StreamPosition::EndOf(14));
  ASSERT_TRUE(rebuilt.ok() && rebuilt->swapped) << rebuilt.status();
  ASSERT_TRUE(store_->Append(Change("o3", 15)).ok());
  batch = reader_store.ReadAfter(StreamPosition(13, 0), 100);
  ASSERT_TRUE(batch.ok());
  EXPECT_TRUE(batch->behind_checkpoint);
  EXPECT_EQ(reader.Observe(batch->mark).verdict, Verdict::kRenewed);
  EXPECT_EQ(reader.incarnation(), rebuilt->incarnation);
}

TEST_F(StoreLineageTest, ACheckpointThatLostItemsIsNeverSpliced) {
  LineageTracker writer;
  store_->GuardAppends(&writer);
  ASSERT_TRUE(store_->ReplaceCheckpoint(Items(3), StreamPosition::EndOf(10)).ok());
  ASSERT_EQ(Cli({"HDEL", "reverser:mat:v1:{configmaps:cluster}:ckpt:items", "default/o1"}), "1");
  auto view = store_->Load();
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_FALSE(view->checkpoint.has_value());  // fail closed: no resync from a partial set
  EXPECT_TRUE(view->checkpoint_items.empty());
  EXPECT_TRUE(view->mark.damaged);
  EXPECT_EQ(store_->Compact().status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(StateLossOf(store_->Append(Change("o0", 11)).status()), StateLoss::kCheckpointDamaged);
  auto mark = store_->ReadMark();
  ASSERT_TRUE(mark.ok());
  EXPECT_TRUE(mark->damaged);
  EXPECT_FALSE(mark->Usable());
}

TEST_F(StoreLineageTest, ACheckpointWithoutMetaIsALegacyIncarnation) {
  // Written before `ckpt:meta` existed: usable, incarnation "".
  ASSERT_EQ(Cli({"SET", "reverser:mat:v1:{configmaps:cluster}:ckpt:rv", "10-18446744073709551615"}),
            "OK");
  ASSERT_EQ(Cli({"HSET", "reverser:mat:v1:{configmaps:cluster}:ckpt:items", "default/a", "{}"}), "1");
  auto view = store_->Load();
  ASSERT_TRUE(view.ok() && view->checkpoint.has_value());
  EXPECT_EQ(view->mark.incarnation, "");
  EXPECT_EQ(view->checkpoint_items.size(), 1u);
  LineageTracker writer;
  store_->GuardAppends(&writer);
  ASSERT_TRUE(store_->Append(Change("a", 11)).ok());
  auto compacted = store_->Compact();
  ASSERT_TRUE(compacted.ok() && compacted->compacted) << compacted.status();
  EXPECT_EQ(Cli({"HGET", "reverser:mat:v1:{configmaps:cluster}:ckpt:meta", "items"}), "1");
}

}  // namespace
}  // namespace reverser::redisstore
