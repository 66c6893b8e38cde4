// Fenced writes of a materialization (MaterializationStore::FenceWrites): the append chunk, the
// checkpoint swap, compaction, the state record and Release check the unit's epoch and owner in
// the same script as the write; a stale owner's write is refused and writes nothing.

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "gtest/gtest.h"
#include "libs/redisstore/materialization_store.h"
#include "libs/redisstore/ownership_store.h"
#include "libs/redisstore/test_redis.h"
#include "tests/fixtures/redis_server.h"

namespace reverser::redisstore {
namespace {

using core::StreamPosition;

const core::GroupVersionResource kConfigMaps{"", "v1", "configmaps"};
constexpr char kUnit[] = "mat:{configmaps:ns:team}";

class FencedMaterializationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto server = testing::RedisServer::Start();
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    old_redis_ = Connect();
    new_redis_ = Connect();
    ASSERT_NE(old_redis_, nullptr);
    ASSERT_NE(new_redis_, nullptr);
    old_store_ = std::make_unique<MaterializationStore>(
        old_redis_.get(), KeyPrefix::Default(), kConfigMaps, core::WatchScope::Namespace("team"));
    new_store_ = std::make_unique<MaterializationStore>(
        new_redis_.get(), KeyPrefix::Default(), kConfigMaps, core::WatchScope::Namespace("team"));
  }

  std::unique_ptr<RedisConnection> Connect() {
    auto connection = ConnectTo(*server_);
    EXPECT_TRUE(connection.ok()) << connection.status();
    return connection.ok() ? std::move(*connection) : nullptr;
  }

  Fence TakeOver(RedisConnection* redis, const std::string& owner) {
    OwnershipStore own(redis, KeyPrefix::Default());
    auto fence = own.TakeOver(kUnit, owner);
    EXPECT_TRUE(fence.ok()) << fence.status();
    return fence.ok() ? *fence : Fence{};
  }

  static StreamEntry Change(std::string name, std::string rv) {
    StreamEntry entry;
    entry.op = ChangeOp::kAdded;
    entry.uid = "uid-" + name;
    entry.namespace_ = "team";
    entry.name = std::move(name);
    entry.resource_version = std::move(rv);
    entry.object_json = "{\"rv\":\"" + entry.resource_version + "\"}";
    return entry;
  }

  std::string Cli(const std::vector<std::string>& args) {
    auto out = server_->Cli(args);
    EXPECT_TRUE(out.ok()) << out.status();
    if (!out.ok()) return "";
    return std::string(absl::StripTrailingAsciiWhitespace(*out));
  }
  std::string StreamLength() { return Cli({"XLEN", old_store_->keys().stream}); }
  std::string CheckpointRv() { return Cli({"GET", old_store_->keys().checkpoint_rv}); }

  std::unique_ptr<testing::RedisServer> server_;
  std::unique_ptr<RedisConnection> old_redis_;
  std::unique_ptr<RedisConnection> new_redis_;
  std::unique_ptr<MaterializationStore> old_store_;
  std::unique_ptr<MaterializationStore> new_store_;
};

TEST_F(FencedMaterializationTest, CurrentFenceWritesAndStaleFenceWritesNothing) {
  old_store_->FenceWrites(WriteFence{TakeOver(old_redis_.get(), "materializer-0"), {}});
  // The current owner: checkpoint swap, appends, state, compaction all land.
  auto swap = old_store_->ReplaceCheckpoint({{"team/a", "{\"a\":1}"}}, StreamPosition::EndOf(10));
  ASSERT_TRUE(swap.ok()) << swap.status();
  EXPECT_TRUE(swap->swapped);
  auto appended = old_store_->AppendAll({Change("b", "11"), Change("c", "12")});
  ASSERT_TRUE(appended.ok()) << appended.status();
  EXPECT_TRUE((*appended)[0].appended);
  EXPECT_TRUE((*appended)[1].appended);
  MaterializationState state;
  state.phase = "Streaming";
  state.gvr = kConfigMaps;
  state.scope = core::WatchScope::Namespace("team");
  ASSERT_TRUE(old_store_->WriteState(state).ok());
  EXPECT_EQ(StreamLength(), "2");
  EXPECT_EQ(CheckpointRv(), StreamPosition::EndOf(10).ToString());
  const std::string state_before = Cli({"GET", old_store_->keys().state});

  // Another replica takes the unit over: every write of the old owner is refused.
  const Fence newer = TakeOver(new_redis_.get(), "materializer-1");
  EXPECT_EQ(newer.epoch, 2);
  auto late_append = old_store_->AppendAll({Change("d", "13")});
  EXPECT_TRUE(IsFenced(late_append.status())) << late_append.status();
  auto late_single = old_store_->Append(Change("e", "14"));
  EXPECT_TRUE(IsFenced(late_single.status())) << late_single.status();
  auto late_swap =
      old_store_->ReplaceCheckpoint({{"team/z", "{\"z\":1}"}}, StreamPosition::EndOf(20));
  EXPECT_TRUE(IsFenced(late_swap.status())) << late_swap.status();
  auto late_compact = old_store_->Compact();
  EXPECT_TRUE(IsFenced(late_compact.status())) << late_compact.status();
  state.phase = "Blocked";
  EXPECT_TRUE(IsFenced(old_store_->WriteState(state)));
  EXPECT_TRUE(IsFenced(old_store_->Release()));

  // Nothing was written: stream, checkpoint, items, counts and state as before, no staging left.
  EXPECT_EQ(StreamLength(), "2");
  EXPECT_EQ(CheckpointRv(), StreamPosition::EndOf(10).ToString());
  EXPECT_EQ(Cli({"HGET", old_store_->keys().checkpoint_items, "team/z"}), "");
  EXPECT_EQ(Cli({"HGET", old_store_->keys().counts, "appended"}), "2");
  EXPECT_EQ(Cli({"GET", old_store_->keys().state}), state_before);
  EXPECT_EQ(Cli({"KEYS", "*ckpt:items:next*"}), "");

  // The new owner writes on.
  new_store_->FenceWrites(WriteFence{newer, {}});
  auto next = new_store_->AppendAll({Change("d", "13")});
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_TRUE((*next)[0].appended);
  auto next_swap = new_store_->Compact();
  ASSERT_TRUE(next_swap.ok()) << next_swap.status();
  EXPECT_TRUE(next_swap->compacted);
  EXPECT_EQ(CheckpointRv(), "13-0");
}

TEST_F(FencedMaterializationTest, TheGateKeepsEveryWriteFromRedis) {
  bool held = false;
  old_store_->FenceWrites(WriteFence{TakeOver(old_redis_.get(), "materializer-0"), [&] {
                                       return held ? absl::OkStatus()
                                                   : absl::UnavailableError("lease not held");
                                     }});
  auto swap = old_store_->ReplaceCheckpoint({{"team/a", "{}"}}, StreamPosition::EndOf(10));
  EXPECT_TRUE(absl::IsUnavailable(swap.status())) << swap.status();
  auto appended = old_store_->AppendAll({Change("b", "11")});
  EXPECT_TRUE(absl::IsUnavailable(appended.status())) << appended.status();
  EXPECT_EQ(StreamLength(), "0");
  EXPECT_EQ(CheckpointRv(), "");
  held = true;
  appended = old_store_->AppendAll({Change("b", "11")});
  ASSERT_TRUE(appended.ok()) << appended.status();
  EXPECT_EQ(StreamLength(), "1");
}

TEST_F(FencedMaterializationTest, AFenceOfAUnitNeverTakenIsRefused) {
  old_store_->FenceWrites(WriteFence{Fence{kUnit, 1, "materializer-0"}, {}});
  auto appended = old_store_->AppendAll({Change("b", "11")});
  EXPECT_TRUE(IsFenced(appended.status())) << appended.status();
  EXPECT_EQ(StreamLength(), "0");
}

}  // namespace
}  // namespace reverser::redisstore
