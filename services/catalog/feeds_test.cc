// Feeds: what a subscriber at a given generation is offered next.

#include "services/catalog/feeds.h"

#include <atomic>

#include "gtest/gtest.h"

namespace reverser::catalog {
namespace {

reverser::v1::TableUpdate Update(uint64_t generation, const std::string& target, bool full) {
  reverser::v1::TableUpdate u;
  u.set_generation(generation);
  u.set_full(full);
  u.add_upserted()->mutable_target()->set_name(target);
  return u;
}

TEST(TableFeedTest, NewSubscribersGetTheFullSetAndFollowersGetDeltas) {
  TableFeed feed;
  EXPECT_FALSE(feed.Next(std::nullopt));  // nothing before the first publish
  feed.Publish(Update(10, "a", true), Update(10, "a", true));
  feed.Publish(Update(11, "b", false), Update(11, "ab", true));
  feed.Publish(Update(12, "c", false), Update(12, "abc", true));

  auto fresh = feed.Next(std::nullopt);
  ASSERT_TRUE(fresh);
  EXPECT_TRUE(fresh->full());
  EXPECT_EQ(fresh->generation(), 12u);
  auto behind = feed.Next(10);
  ASSERT_TRUE(behind);
  EXPECT_FALSE(behind->full());
  EXPECT_EQ(behind->generation(), 11u);
  EXPECT_EQ(behind->upserted(0).target().name(), "b");
  EXPECT_FALSE(feed.Next(12));
  auto stranger = feed.Next(3);  // from an earlier catalog process
  ASSERT_TRUE(stranger);
  EXPECT_TRUE(stranger->full());
}

TEST(TableFeedTest, FarBehindSubscribersGetTheFullSet) {
  TableFeed feed;
  feed.Publish(Update(1, "x", true), Update(1, "x", true));
  for (uint64_t g = 2; g < 2 + TableFeed::kDeltaHistory + 5; ++g) {
    feed.Publish(Update(g, "x", false), Update(g, "x", true));
  }
  auto next = feed.Next(1);
  ASSERT_TRUE(next);
  EXPECT_TRUE(next->full());
}

TEST(ClaimFeedTest, OffersTheLatestSetWhenTheGenerationDiffers) {
  ClaimFeed feed;
  EXPECT_FALSE(feed.Next(std::nullopt));
  reverser::v1::ClaimSet set;
  set.set_generation(7);
  feed.Publish(set);
  EXPECT_TRUE(feed.Next(std::nullopt));
  EXPECT_TRUE(feed.Next(6));
  EXPECT_FALSE(feed.Next(7));
}

TEST(FeedTest, PublishWakesEverySubscriber) {
  struct Counter : FeedListener {
    void Wake() override { ++wakes; }
    std::atomic<int> wakes{0};
  };
  ClaimFeed feed;
  auto a = std::make_shared<Counter>();
  auto b = std::make_shared<Counter>();
  feed.Subscribe(a);
  int id = feed.Subscribe(b);
  feed.Publish({});
  feed.Unsubscribe(id);
  feed.Publish({});
  EXPECT_EQ(a->wakes, 2);
  EXPECT_EQ(b->wakes, 1);
}

}  // namespace
}  // namespace reverser::catalog
