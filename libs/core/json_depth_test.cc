#include "libs/core/json_depth.h"

#include <string>

#include "gtest/gtest.h"

namespace reverser::core {
namespace {

std::string Nested(int levels) {
  std::string text;
  for (int i = 0; i < levels; ++i) text += "{\"a\":";
  text += "1";
  for (int i = 0; i < levels; ++i) text += "}";
  return text;
}

TEST(JsonNestingDepthTest, CountsObjectsAndArraysAsTheApiServerDoes) {
  EXPECT_EQ(JsonNestingDepth("1"), 0);
  EXPECT_EQ(JsonNestingDepth("{}"), 1);
  EXPECT_EQ(JsonNestingDepth(R"({"a":[1,{"b":[]}]})"), 4);
  EXPECT_EQ(JsonNestingDepth(Nested(kApiObjectMaxDepth)), kApiObjectMaxDepth);
}

TEST(JsonNestingDepthTest, BracketsInsideStringsDoNotCount) {
  EXPECT_EQ(JsonNestingDepth(R"({"a":"[[[{{{"})"), 1);
  EXPECT_EQ(JsonNestingDepth(R"({"a":"\"[[["})"), 1);
  EXPECT_EQ(JsonNestingDepth(R"({"a":"\\","b":[[]]})"), 3);  // the string ends at \\"
  EXPECT_EQ(JsonNestingDepth(R"({"a":"\\\"[","b":[]})"), 2);
  EXPECT_EQ(JsonNestingDepth(R"({"a":"[)"), 1);  // cut inside a string
}

TEST(JsonNestingDepthTest, StopsOnceTheLimitIsPassed) {
  EXPECT_EQ(JsonNestingDepth(Nested(50), 10), 11);
  EXPECT_EQ(JsonNestingDepth(Nested(10), 10), 10);
  EXPECT_EQ(JsonNestingDepth(std::string(1 << 20, '['), 100), 101);
}

}  // namespace
}  // namespace reverser::core
