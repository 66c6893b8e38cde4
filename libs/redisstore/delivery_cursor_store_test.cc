#include "libs/redisstore/delivery_cursor_store.h"

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "libs/redisstore/test_redis.h"
#include "tests/fixtures/redis_server.h"

namespace reverser::redisstore {
namespace {

using core::StreamPosition;

const core::GroupVersionResource kDeployments{"apps", "v1", "deployments"};
const core::GroupVersionResource kConfigMaps{"", "v1", "configmaps"};
const core::WatchScope kTeamA = core::WatchScope::Namespace("team-a");

class DeliveryCursorStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto server = testing::RedisServer::Start();
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    redis_ = Connect();
    ASSERT_NE(redis_, nullptr);
    store_ = std::make_unique<DeliveryCursorStore>(redis_.get(), KeyPrefix::Default());
  }

  std::unique_ptr<RedisConnection> Connect() {
    auto connection = ConnectTo(*server_);
    EXPECT_TRUE(connection.ok()) << connection.status();
    return connection.ok() ? std::move(*connection) : nullptr;
  }

  CursorOffer MustOffer(StreamPosition p, absl::string_view target = "t1") {
    auto offer = store_->Offer(target, kDeployments, kTeamA, p);
    EXPECT_TRUE(offer.ok()) << offer.status();
    return offer.ok() ? *offer : CursorOffer{};
  }

  std::unique_ptr<testing::RedisServer> server_;
  std::unique_ptr<RedisConnection> redis_;
  std::unique_ptr<DeliveryCursorStore> store_;
};

TEST_F(DeliveryCursorStoreTest, OffersOnlyMoveForwardByFullPosition) {
  auto none = store_->Read("t1", kDeployments, kTeamA);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());

  EXPECT_TRUE(MustOffer(StreamPosition(9, 5)).advanced);
  // 10-0 > 9-5 although "10-0" < "9-5" as strings.
  EXPECT_TRUE(MustOffer(StreamPosition(10, 0)).advanced);
  // Same RV, lower seq: ignored; equal: ignored.
  auto lower = MustOffer(StreamPosition(9, 18));
  EXPECT_FALSE(lower.advanced);
  EXPECT_EQ(lower.position, StreamPosition(10, 0));
  EXPECT_FALSE(MustOffer(StreamPosition(10, 0)).advanced);
  EXPECT_TRUE(MustOffer(StreamPosition(10, 1)).advanced);
  // Positions beyond 2^53 (where Lua numbers lose precision) still compare exactly.
  EXPECT_TRUE(MustOffer(StreamPosition::EndOf(10)).advanced);
  EXPECT_FALSE(MustOffer(StreamPosition(10, UINT64_MAX - 1)).advanced);
  EXPECT_TRUE(MustOffer(StreamPosition((1ull << 60) + 1, 0)).advanced);
  EXPECT_FALSE(MustOffer(StreamPosition(1ull << 60, 7)).advanced);

  auto stored = redis_->Command({"GET", "reverser:splice:v1:t1:apps/deployments:ns:team-a:acked"});
  ASSERT_TRUE(stored.ok());
  EXPECT_EQ(stored->str(), StreamPosition((1ull << 60) + 1, 0).ToString());
}

// PTTL of `key` in milliseconds (-2: no key, -1: no TTL).
int64_t Pttl(RedisConnection& redis, const std::string& key) {
  auto reply = redis.Command({"PTTL", key});
  EXPECT_TRUE(reply.ok()) << reply.status();
  return reply.ok() ? reply->integer() : -3;
}

TEST_F(DeliveryCursorStoreTest, EveryOfferSetsTheCursorTtlAgain) {
  const std::string key = "reverser:splice:v1:t1:apps/deployments:ns:team-a:acked";
  const int64_t week_ms = absl::ToInt64Milliseconds(kDefaultDeliveryCursorTtl);
  EXPECT_TRUE(MustOffer(StreamPosition(9, 0)).advanced);
  int64_t ttl = Pttl(*redis_, key);
  EXPECT_GT(ttl, week_ms - 60'000);
  EXPECT_LE(ttl, week_ms);

  // A stale offer advances nothing but keeps the cursor alive: the idle refresh.
  ASSERT_TRUE(redis_->Command({"PEXPIRE", key, "5000"}).ok());
  EXPECT_FALSE(MustOffer(StreamPosition(9, 0)).advanced);
  EXPECT_GT(Pttl(*redis_, key), week_ms - 60'000);
  ASSERT_TRUE(redis_->Command({"PEXPIRE", key, "5000"}).ok());
  EXPECT_FALSE(MustOffer(StreamPosition(3, 0)).advanced);
  EXPECT_GT(Pttl(*redis_, key), week_ms - 60'000);
  EXPECT_EQ(**store_->Read("t1", kDeployments, kTeamA), StreamPosition(9, 0));

  // The TTL is the store's.
  DeliveryCursorStore short_lived(redis_.get(), KeyPrefix::Default(), absl::Minutes(10));
  ASSERT_TRUE(short_lived.Offer("t1", kDeployments, kTeamA, StreamPosition(10, 0)).ok());
  ttl = Pttl(*redis_, key);
  EXPECT_GT(ttl, 0);
  EXPECT_LE(ttl, 600'000);
}

TEST_F(DeliveryCursorStoreTest, WritesTheReferenceWatchCursorWithTheStoredRv) {
  const std::string ns_key =
      "reverser:watch:v1:target:t1:apps/deployments:namespace:team-a:last-rv";
  const std::string cluster_key = "reverser:watch:v1:target:t1:apps/deployments:cluster:last-rv";
  const std::vector<core::WatchScope> both = {kTeamA, core::WatchScope::Cluster()};
  auto offer = [&](StreamPosition p, const std::vector<core::WatchScope>& scopes) {
    auto offered = store_->Offer("t1", kDeployments, kTeamA, p, "inc1", scopes);
    EXPECT_TRUE(offered.ok()) << offered.status();
  };
  offer(StreamPosition(41, 3), both);
  EXPECT_EQ(redis_->Command({"GET", ns_key})->str(), "41");
  EXPECT_EQ(redis_->Command({"GET", cluster_key})->str(), "41");
  for (const std::string& key : {ns_key, cluster_key}) {
    auto ttl = redis_->Command({"TTL", key});
    EXPECT_GT(ttl->integer(), 3600 - 60) << key;
    EXPECT_LE(ttl->integer(), 3600) << key;
  }
  // A stale offer writes the stored position's RV (never an older one), refreshing the TTL.
  ASSERT_TRUE(redis_->Command({"EXPIRE", ns_key, "5"}).ok());
  offer(StreamPosition(12, 0), {kTeamA});
  EXPECT_EQ(redis_->Command({"GET", ns_key})->str(), "41");
  EXPECT_GT(redis_->Command({"TTL", ns_key})->integer(), 3600 - 60);
  // A LIST checkpoint's position (all of R) is RV R.
  offer(StreamPosition::EndOf(50), {kTeamA});
  EXPECT_EQ(redis_->Command({"GET", ns_key})->str(), "50");
  // No scopes: no watch cursor.
  offer(StreamPosition(60, 0), {});
  EXPECT_EQ(redis_->Command({"GET", ns_key})->str(), "50");
  EXPECT_EQ(redis_->Command({"GET", cluster_key})->str(), "41");

  // Under the reference prefix when one is set; the cursor itself stays under ours.
  auto shared = KeyPrefix::Parse("reverser", "gitops-reverser");
  ASSERT_TRUE(shared.ok());
  DeliveryCursorStore store(redis_.get(), *shared);
  ASSERT_TRUE(store
                  .Offer("t2", kConfigMaps, core::WatchScope::Cluster(), StreamPosition(7, 0), "",
                         {core::WatchScope::Namespace("web")})
                  .ok());
  EXPECT_EQ(
      redis_
          ->Command({"GET", "gitops-reverser:watch:v1:target:t2:configmaps:namespace:web:last-rv"})
          ->str(),
      "7");
  EXPECT_EQ(redis_->Command({"GET", "reverser:splice:v1:t2:configmaps:cluster:acked"})->str(),
            "7-0");

  // Deleted with the target's cursors; another target's stay.
  auto deleted = store_->DeleteTarget("t1");
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_EQ(*deleted, 3);
  EXPECT_EQ(Pttl(*redis_, ns_key), -2);
  EXPECT_EQ(Pttl(*redis_, cluster_key), -2);
  deleted = store.DeleteTarget("t2");
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_EQ(*deleted, 2);
  auto left = redis_->Command({"DBSIZE"});
  EXPECT_EQ(left->integer(), 0);
}

TEST_F(DeliveryCursorStoreTest, CursorsAreKeyedByTargetTypeAndScope) {
  MustOffer(StreamPosition(5, 0), "t1");
  MustOffer(StreamPosition(7, 0), "t2");
  ASSERT_TRUE(
      store_->Offer("t1", kConfigMaps, core::WatchScope::Cluster(), StreamPosition(3, 0)).ok());
  EXPECT_EQ(**store_->Read("t1", kDeployments, kTeamA), StreamPosition(5, 0));
  EXPECT_EQ(**store_->Read("t2", kDeployments, kTeamA), StreamPosition(7, 0));
  EXPECT_EQ(**store_->Read("t1", kConfigMaps, core::WatchScope::Cluster()), StreamPosition(3, 0));
  EXPECT_FALSE(store_->Read("t1", kConfigMaps, kTeamA)->has_value());

  ASSERT_TRUE(store_->Delete("t2", kDeployments, kTeamA).ok());
  EXPECT_FALSE(store_->Read("t2", kDeployments, kTeamA)->has_value());
  auto deleted = store_->DeleteTarget("t1");
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_EQ(*deleted, 2);
  EXPECT_FALSE(store_->Read("t1", kDeployments, kTeamA)->has_value());
  EXPECT_EQ(store_->Offer("", kDeployments, kTeamA, StreamPosition(1, 0)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(DeliveryCursorStoreTest, GarbageIsReportedOnReadAndReplacedOnOffer) {
  const std::string key = "reverser:splice:v1:t1:apps/deployments:ns:team-a:acked";
  ASSERT_TRUE(redis_->Command({"SET", key, "not-a-position"}).ok());
  EXPECT_EQ(store_->Read("t1", kDeployments, kTeamA).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(MustOffer(StreamPosition(1, 0)).advanced);
  EXPECT_EQ(**store_->Read("t1", kDeployments, kTeamA), StreamPosition(1, 0));
}

TEST_F(DeliveryCursorStoreTest, ACursorBelongsToOneIncarnation) {
  const std::string key = "reverser:splice:v1:t1:apps/deployments:ns:team-a:acked";
  auto offer = [&](StreamPosition p, absl::string_view incarnation) {
    auto offered = store_->Offer("t1", kDeployments, kTeamA, p, incarnation);
    EXPECT_TRUE(offered.ok()) << offered.status();
    return offered.ok() ? *offered : CursorOffer{};
  };
  EXPECT_TRUE(offer(StreamPosition(20, 0), "aaaa").advanced);
  EXPECT_EQ(redis_->Command({"GET", key})->str(), "20-0@aaaa");
  // Monotonic within the incarnation.
  auto lower = offer(StreamPosition(19, 0), "aaaa");
  EXPECT_FALSE(lower.advanced);
  EXPECT_EQ(lower.position, StreamPosition(20, 0));
  EXPECT_EQ(lower.incarnation, "aaaa");
  // Another incarnation replaces it, even lower: the resync onto a rebuilt materialization.
  auto rebuilt = offer(StreamPosition(15, 0), "bbbb");
  EXPECT_TRUE(rebuilt.advanced);
  EXPECT_EQ(rebuilt.incarnation, "bbbb");
  auto read = store_->ReadCursor("t1", kDeployments, kTeamA);
  ASSERT_TRUE(read.ok() && read->has_value());
  EXPECT_EQ((*read)->position, StreamPosition(15, 0));
  EXPECT_EQ((*read)->incarnation, "bbbb");
  EXPECT_EQ(**store_->Read("t1", kDeployments, kTeamA), StreamPosition(15, 0));

  // A cursor written before incarnations existed is incarnation "".
  ASSERT_TRUE(redis_->Command({"SET", key, "30-1"}).ok());
  read = store_->ReadCursor("t1", kDeployments, kTeamA);
  ASSERT_TRUE(read.ok() && read->has_value());
  EXPECT_EQ((*read)->incarnation, "");
  EXPECT_FALSE(offer(StreamPosition(30, 0), "").advanced);
  EXPECT_TRUE(offer(StreamPosition(30, 0), "cccc").advanced);
  EXPECT_EQ(store_->Offer("t1", kDeployments, kTeamA, StreamPosition(31, 0), "x@y").status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(DeliveryCursorStoreTest, ConcurrentOffersKeepTheMaximum) {
  constexpr int kThreads = 4;
  constexpr int kOffers = 200;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto connection = Connect();
      ASSERT_NE(connection, nullptr);
      DeliveryCursorStore store(connection.get(), KeyPrefix::Default());
      // Interleaved, non-monotonic offers from every thread.
      for (int i = 0; i < kOffers; ++i) {
        uint64_t rv = (i * 7919 + t * 31) % 1000;
        auto offer = store.Offer("t1", kDeployments, kTeamA, StreamPosition(rv, t));
        ASSERT_TRUE(offer.ok()) << offer.status();
      }
    });
  }
  for (auto& thread : threads) thread.join();
  uint64_t expected_rv = 0;
  int expected_seq = 0;
  for (int t = 0; t < kThreads; ++t) {
    for (int i = 0; i < kOffers; ++i) {
      StreamPosition p((i * 7919 + t * 31) % 1000, t);
      if (p > StreamPosition(expected_rv, expected_seq)) {
        expected_rv = p.rv();
        expected_seq = t;
      }
    }
  }
  EXPECT_EQ(**store_->Read("t1", kDeployments, kTeamA), StreamPosition(expected_rv, expected_seq));
}

// A fenced store writes only while its fence is current: once another owner took the unit over,
// the stale owner's offer (and the reference watch cursor with it) and its delete are refused
// (IsFenced) and the stored cursor is the new owner's.
TEST_F(DeliveryCursorStoreTest, AStaleOwnersFencedOfferIsRefused) {
  OwnershipStore ownership(redis_.get(), KeyPrefix::Default());
  auto a = ownership.TakeOver("target:team/t1", "a");
  ASSERT_TRUE(a.ok()) << a.status();
  DeliveryCursorStore as_a(redis_.get(), KeyPrefix::Default(), kDefaultDeliveryCursorTtl, *a);
  ASSERT_TRUE(as_a.Offer("t1", kDeployments, kTeamA, StreamPosition(5, 0)).ok());

  auto b = ownership.TakeOver("target:team/t1", "b");
  ASSERT_TRUE(b.ok()) << b.status();
  DeliveryCursorStore as_b(redis_.get(), KeyPrefix::Default(), kDefaultDeliveryCursorTtl, *b);
  ASSERT_TRUE(as_b.Offer("t1", kDeployments, kTeamA, StreamPosition(6, 0)).ok());

  auto stale = as_a.Offer("t1", kDeployments, kTeamA, StreamPosition(9, 0), "", {kTeamA});
  EXPECT_TRUE(IsFenced(stale.status())) << stale.status();
  EXPECT_TRUE(IsFenced(as_a.Delete("t1", kDeployments, kTeamA)));
  EXPECT_TRUE(IsFenced(as_a.DeleteTarget("t1").status()));
  EXPECT_EQ(**store_->Read("t1", kDeployments, kTeamA), StreamPosition(6, 0));
  auto watch =
      redis_->Command({"EXISTS", WatchCursorKey(KeyPrefix::Default(), "t1", kDeployments, kTeamA)});
  ASSERT_TRUE(watch.ok());
  EXPECT_EQ(watch->integer(), 0);
}

}  // namespace
}  // namespace reverser::redisstore
