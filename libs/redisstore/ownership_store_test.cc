#include "libs/redisstore/ownership_store.h"

#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "libs/redisstore/test_redis.h"
#include "tests/fixtures/redis_server.h"

namespace reverser::redisstore {
namespace {

constexpr char kUnit[] = "apps/deployments:ns:team-a";
constexpr char kData[] = "reverser:test:data";

class OwnershipStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto server = testing::RedisServer::Start();
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    old_redis_ = Connect();
    new_redis_ = Connect();
    ASSERT_NE(old_redis_, nullptr);
    ASSERT_NE(new_redis_, nullptr);
    // Two replicas, each with its own connection and store.
    old_owner_ = std::make_unique<OwnershipStore>(old_redis_.get(), KeyPrefix::Default());
    new_owner_ = std::make_unique<OwnershipStore>(new_redis_.get(), KeyPrefix::Default());
  }

  std::unique_ptr<RedisConnection> Connect() {
    auto connection = ConnectTo(*server_);
    EXPECT_TRUE(connection.ok()) << connection.status();
    return connection.ok() ? std::move(*connection) : nullptr;
  }

  static FencedCommands Set(const std::string& value) {
    return {{kData},
            {{"SET", kData, value}, {"HINCRBY", std::string(kData) + ":n", "writes", "1"}}};
  }

  std::string Cli(const std::vector<std::string>& args) {
    auto out = server_->Cli(args);
    EXPECT_TRUE(out.ok()) << out.status();
    return out.ok() ? *out : "";
  }

  std::unique_ptr<testing::RedisServer> server_;
  std::unique_ptr<RedisConnection> old_redis_;
  std::unique_ptr<RedisConnection> new_redis_;
  std::unique_ptr<OwnershipStore> old_owner_;
  std::unique_ptr<OwnershipStore> new_owner_;
};

TEST_F(OwnershipStoreTest, EpochsCountTakeoversAndNameTheOwner) {
  auto read = old_owner_->Read(kUnit);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(*read, (Fence{kUnit, 0, ""}));
  auto first = old_owner_->TakeOver(kUnit, "splicer-0");
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(*first, (Fence{kUnit, 1, "splicer-0"}));
  auto second = new_owner_->TakeOver(kUnit, "splicer-1");
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->epoch, 2);
  EXPECT_EQ(*old_owner_->Read(kUnit), (Fence{kUnit, 2, "splicer-1"}));
  // The keys as documented (docs/redis-keys.md).
  EXPECT_EQ(Cli({"GET", "reverser:own:v1:apps/deployments:ns:team-a:epoch"}), "2\n");
  EXPECT_EQ(Cli({"GET", "reverser:own:v1:apps/deployments:ns:team-a:owner"}), "splicer-1\n");
  EXPECT_EQ(Cli({"TTL", "reverser:own:v1:apps/deployments:ns:team-a:epoch"}), "-1\n");
}

TEST_F(OwnershipStoreTest, TheOldOwnersWritesAreRefusedOnceTheNewOneTookOver) {
  auto old_fence = old_owner_->TakeOver(kUnit, "splicer-0");
  ASSERT_TRUE(old_fence.ok());
  auto written = old_owner_->FencedWrite(*old_fence, Set("from-old"));
  ASSERT_TRUE(written.ok()) << written.status();
  ASSERT_EQ(written->size(), 2u);
  EXPECT_EQ((*written)[0].str(), "OK");
  EXPECT_EQ((*written)[1].integer(), 1);
  EXPECT_TRUE(old_owner_->Check(*old_fence).ok());

  auto new_fence = new_owner_->TakeOver(kUnit, "splicer-1");
  ASSERT_TRUE(new_fence.ok());
  ASSERT_TRUE(new_owner_->FencedWrite(*new_fence, Set("from-new")).ok());

  // The old owner, still believing it owns the unit: refused, and nothing of it is written.
  absl::StatusOr<std::vector<RedisReply>> stale = old_owner_->FencedWrite(*old_fence, Set("late"));
  ASSERT_FALSE(stale.ok());
  EXPECT_EQ(stale.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(IsFenced(stale.status()));
  EXPECT_NE(stale.status().message().find("epoch 2 owned by \"splicer-1\""), std::string::npos)
      << stale.status();
  EXPECT_EQ(Cli({"GET", kData}), "from-new\n");
  EXPECT_EQ(Cli({"HGET", std::string(kData) + ":n", "writes"}), "2\n");
  EXPECT_TRUE(IsFenced(old_owner_->Check(*old_fence)));
  // It learns who has it now.
  EXPECT_EQ(*old_owner_->Read(kUnit), *new_fence);
  EXPECT_FALSE(IsFenced(absl::FailedPreconditionError("other")));
}

TEST_F(OwnershipStoreTest, AFenceNeverTakenOrOfAnotherOwnerIsRefused) {
  EXPECT_TRUE(IsFenced(old_owner_->FencedWrite(Fence{kUnit, 0, ""}, Set("x")).status()));
  auto fence = old_owner_->TakeOver(kUnit, "splicer-0");
  ASSERT_TRUE(fence.ok());
  EXPECT_TRUE(IsFenced(new_owner_->FencedWrite(Fence{kUnit, 1, "splicer-1"}, Set("x")).status()));
  EXPECT_EQ(Cli({"EXISTS", kData}), "0\n");
}

// Redis restarted empty: epochs begin again at 1, but an old owner's epoch 1 is not a new
// owner's epoch 1.
TEST_F(OwnershipStoreTest, LostRedisStateDoesNotLetAnOldEpochPass) {
  auto old_fence = old_owner_->TakeOver(kUnit, "splicer-0");
  ASSERT_TRUE(old_fence.ok());
  ASSERT_TRUE(server_->Restart().ok());
  ASSERT_TRUE(old_redis_->Reconnect().ok());
  ASSERT_TRUE(new_redis_->Reconnect().ok());
  EXPECT_TRUE(IsFenced(old_owner_->FencedWrite(*old_fence, Set("x")).status()));
  auto new_fence = new_owner_->TakeOver(kUnit, "splicer-1");
  ASSERT_TRUE(new_fence.ok()) << new_fence.status();
  EXPECT_EQ(new_fence->epoch, old_fence->epoch);
  EXPECT_TRUE(IsFenced(old_owner_->FencedWrite(*old_fence, Set("x")).status()));
  EXPECT_TRUE(new_owner_->FencedWrite(*new_fence, Set("y")).ok());
}

TEST_F(OwnershipStoreTest, BadRequestsAndFailingCommands) {
  EXPECT_EQ(old_owner_->TakeOver("", "a").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(old_owner_->TakeOver(kUnit, "").status().code(), absl::StatusCode::kInvalidArgument);
  auto fence = old_owner_->TakeOver(kUnit, "a");
  ASSERT_TRUE(fence.ok());
  EXPECT_EQ(old_owner_->FencedWrite(*fence, {}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(old_owner_->FencedWrite(*fence, {{kData}, {{}}}).status().code(),
            absl::StatusCode::kInvalidArgument);
  // A command Redis rejects is an error, not a crash (commands before it stay applied).
  ASSERT_TRUE(old_owner_->FencedWrite(*fence, Set("v")).ok());
  absl::Status wrong = old_owner_->FencedWrite(*fence, {{kData}, {{"LPUSH", kData, "x"}}}).status();
  EXPECT_FALSE(wrong.ok());
  EXPECT_FALSE(IsFenced(wrong));
  // Replies of any shape come back (nil included).
  auto replies = old_owner_->FencedWrite(
      *fence, {{"reverser:test:none"}, {{"GET", "reverser:test:none"}, {"GET", kData}}});
  ASSERT_TRUE(replies.ok()) << replies.status();
  ASSERT_EQ(replies->size(), 2u);
  EXPECT_TRUE((*replies)[0].IsNil());
  EXPECT_EQ((*replies)[1].str(), "v");
  // A damaged epoch is reported, not trusted.
  Cli({"SET", OwnershipKeys::For(KeyPrefix::Default(), kUnit).epoch, "many"});
  EXPECT_EQ(old_owner_->Read(kUnit).status().code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE(IsFenced(old_owner_->FencedWrite(*fence, Set("w")).status()));
}

}  // namespace
}  // namespace reverser::redisstore
