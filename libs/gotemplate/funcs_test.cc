#include "libs/gotemplate/funcs.h"

#include "gtest/gtest.h"

namespace reverser::gotemplate {
namespace {

// Expected strings are what Go's fmt.Sprintf / fmt.Sprint print for the same operands.
TEST(FuncsTest, SprintfVerbsFlagsAndWidth) {
  EXPECT_EQ(Sprintf("%s/%d/%v/%t", {"a", 42, Value::List{"x", 1}, true}), "a/42/[x 1]/true");
  EXPECT_EQ(Sprintf("%q", {"a\"b\n"}), "\"a\\\"b\\n\"");
  EXPECT_EQ(Sprintf("[%5s][%-5s][%05d][%-4d][%+d][%05d]", {"ab", "ab", 42, 7, 3, -42}),
            "[   ab][ab   ][00042][7   ][+3][-0042]");
  EXPECT_EQ(Sprintf("100%%", {}), "100%");
  EXPECT_EQ(Sprintf("%x|%X|%x|%x", {"Hi", 255, -255, true}), "4869|FF|-ff|%!x(bool=true)");
  EXPECT_EQ(Sprintf("%v", {Value::Map{{"b", 2}, {"a", 1}}}), "map[a:1 b:2]");
}

TEST(FuncsTest, SprintfMismatchesRenderLikeGo) {
  EXPECT_EQ(Sprintf("%d", {"abc"}), "%!d(string=abc)");
  EXPECT_EQ(Sprintf("%s", {5}), "%!s(int=5)");
  EXPECT_EQ(Sprintf("%s %s", {"a"}), "a %!s(MISSING)");
  EXPECT_EQ(Sprintf("%s", {"a", 1, "b"}), "a%!(EXTRA int=1, string=b)");
  EXPECT_EQ(Sprintf("%y", {1}), "%!y(int=1)");
  EXPECT_EQ(Sprintf("%v %s", {Value(), Value()}), "<nil> %!s(<nil>)");
  EXPECT_EQ(Sprintf("tail %", {}), "tail %!(NOVERB)");
}

TEST(FuncsTest, Sprint) {
  EXPECT_EQ(Sprint({1, 2, "a", "b", 3, true}), "1 2ab3 true");
}

TEST(FuncsTest, CallBuiltinErrors) {
  EXPECT_EQ(CallBuiltin("len", {}).status().message(), "wrong number of args for len: want 1 got 0");
  EXPECT_EQ(CallBuiltin("index", {Value::List{1}, 3}).status().message(),
            "error calling index: index out of range: 3");
  EXPECT_TRUE(CallBuiltin("index", {Value::Map{}, "missing"})->is_null());
  EXPECT_EQ(CallBuiltin("nope", {}).status().message(), "function \"nope\" not defined");
  EXPECT_TRUE(IsBuiltinFunction("printf"));
  EXPECT_FALSE(IsBuiltinFunction("upper"));
}

}  // namespace
}  // namespace reverser::gotemplate
