#include "libs/core/stream_position.h"

#include <algorithm>
#include <vector>

#include "gtest/gtest.h"

namespace reverser::core {
namespace {

TEST(StreamPositionTest, ComparesNumericallyNotAsStrings) {
  EXPECT_FALSE(StreamPosition(10, 0) < StreamPosition(9, 5));
  EXPECT_TRUE(StreamPosition(9, 5) < StreamPosition(10, 0));
  EXPECT_TRUE(StreamPosition(7, 1) < StreamPosition(7, 2));
  EXPECT_EQ(StreamPosition(7, 2), StreamPosition(7, 2));
  EXPECT_TRUE(StreamPosition(99, 0) < StreamPosition::EndOf(99));
  EXPECT_TRUE(StreamPosition::EndOf(99) < StreamPosition(100, 0));
}

TEST(StreamPositionTest, SameRvEntriesOrderBySequence) {
  // A watermark at R-1: the entry R-2 is after it, R-1 is not.
  StreamPosition watermark(500, 1);
  EXPECT_TRUE(watermark < StreamPosition(500, 2));
  EXPECT_FALSE(watermark < StreamPosition(500, 1));
}

TEST(StreamPositionTest, SortsLikeARedisStream) {
  std::vector<std::string> ids = {"10-0", "9-5", "9-10", "100-0", "9-0"};
  std::vector<StreamPosition> positions;
  for (const auto& id : ids) positions.push_back(*StreamPosition::Parse(id));
  std::sort(positions.begin(), positions.end());
  std::vector<std::string> sorted;
  for (const auto& p : positions) sorted.push_back(p.ToString());
  EXPECT_EQ(sorted, (std::vector<std::string>{"9-0", "9-5", "9-10", "10-0", "100-0"}));
}

TEST(StreamPositionTest, ParsesAndRendersRoundTrip) {
  EXPECT_EQ(StreamPosition::Parse("123-4")->ToString(), "123-4");
  EXPECT_EQ(*StreamPosition::Parse("123"), StreamPosition(123, 0));
  EXPECT_EQ(StreamPosition::Parse("18446744073709551615-18446744073709551615")->seq(),
            UINT64_MAX);
  EXPECT_EQ(StreamPosition::EndOf(5).ToString(), "5-18446744073709551615");
}

TEST(StreamPositionTest, RejectsMalformedText) {
  for (const char* bad : {"", "-", "1-", "-1", "a-1", "1-b", "+1-2", " 1-2", "1-2-3", "1.5-0",
                          "18446744073709551616-0", "1--2"}) {
    auto parsed = StreamPosition::Parse(bad);
    EXPECT_FALSE(parsed.ok()) << "accepted \"" << bad << "\"";
    if (!parsed.ok()) {
      EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
    }
  }
}

TEST(StreamPositionTest, ParsesResourceVersions) {
  EXPECT_EQ(*ParseResourceVersion("121494"), 121494u);
  EXPECT_FALSE(ParseResourceVersion("").ok());
  EXPECT_FALSE(ParseResourceVersion("abc").ok());
}

}  // namespace
}  // namespace reverser::core
