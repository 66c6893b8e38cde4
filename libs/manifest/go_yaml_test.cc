#include "libs/manifest/go_yaml.h"

#include <algorithm>
#include <vector>

#include "gtest/gtest.h"

namespace reverser::manifest::goyaml {
namespace {

TEST(GoYamlTest, KeyOrderIsGoYamlNaturalOrder) {
  std::vector<std::string> keys = {"k10", "k9", "B", "_x", "a", "apiVersion", "a1b", "a01b",
                                   "x.y", "x-y", "Z", "", "kind", "data", "binaryData"};
  std::stable_sort(keys.begin(), keys.end(), KeyLess);
  EXPECT_EQ(keys, (std::vector<std::string>{"", "_x", "B", "Z", "a", "a1b", "a01b", "apiVersion",
                                            "binaryData", "data", "k9", "k10", "kind", "x-y",
                                            "x.y"}));
}

TEST(GoYamlTest, ResolvesPlainScalarsAsYaml11) {
  EXPECT_TRUE(std::holds_alternative<Null>(Resolve("")));
  EXPECT_TRUE(std::holds_alternative<Null>(Resolve("~")));
  EXPECT_TRUE(std::holds_alternative<Null>(Resolve("NULL")));
  EXPECT_EQ(std::get<bool>(Resolve("yes")), true);
  EXPECT_EQ(std::get<bool>(Resolve("Off")), false);
  EXPECT_EQ(std::get<bool>(Resolve("y")), true);
  EXPECT_EQ(std::get<int64_t>(Resolve("42")), 42);
  EXPECT_EQ(std::get<int64_t>(Resolve("-0x1F")), -31);
  EXPECT_EQ(std::get<int64_t>(Resolve("0o17")), 15);
  EXPECT_EQ(std::get<int64_t>(Resolve("0777")), 511);
  EXPECT_EQ(std::get<int64_t>(Resolve("0b101")), 5);
  EXPECT_EQ(std::get<int64_t>(Resolve("1_000")), 1000);
  EXPECT_EQ(std::get<uint64_t>(Resolve("18446744073709551615")), UINT64_MAX);
  EXPECT_EQ(std::get<double>(Resolve("08")), 8.0);  // not octal, but a float
  EXPECT_EQ(std::get<double>(Resolve("1.5")), 1.5);
  EXPECT_EQ(std::get<double>(Resolve(".5")), 0.5);
  EXPECT_EQ(std::get<double>(Resolve("-1e3")), -1000.0);
  EXPECT_TRUE(std::holds_alternative<Special>(Resolve(".inf")));
  EXPECT_TRUE(std::holds_alternative<Special>(Resolve("-.Inf")));
  EXPECT_TRUE(std::holds_alternative<Timestamp>(Resolve("2020-01-01")));
  EXPECT_TRUE(std::holds_alternative<Timestamp>(Resolve("2001-12-14t21:59:43.10-05:00")));
  EXPECT_TRUE(std::holds_alternative<BigInt>(Resolve(std::string(400, '9'))));
  for (const char* text : {"plain", "2020-13-01", "1.2.3", "-", "0x", "1e", "Yess", "<<", "a: b",
                           "1e400", "nan", "inf"}) {
    EXPECT_EQ(std::get<std::string>(Resolve(text)), text);
  }
}

TEST(GoYamlTest, QuotesWhatWouldChangeMeaning) {
  for (const char* text : {"", "true", "no", "on", "null", "~", "0123", "1.5", "1:20",
                           "2020-01-01", "-.inf"}) {
    EXPECT_TRUE(NeedsQuoting(text)) << text;
  }
  for (const char* text : {"plain", "a:b", "v1", "2020-13-01", "1.2.3", "--"}) {
    EXPECT_FALSE(NeedsQuoting(text)) << text;
  }
}

TEST(GoYamlTest, FormatsFloatsLikeStrconv) {
  EXPECT_EQ(FormatFloat(0.5), "0.5");
  EXPECT_EQ(FormatFloat(1e6), "1e+06");
  EXPECT_EQ(FormatFloat(123456.5), "123456.5");
  EXPECT_EQ(FormatFloat(1000000.5), "1.0000005e+06");
  EXPECT_EQ(FormatFloat(0.0001), "0.0001");
  EXPECT_EQ(FormatFloat(0.00001), "1e-05");
  EXPECT_EQ(FormatFloat(0.1, 32), "0.1");
  EXPECT_EQ(FormatFloat(1.0 / 0.0), ".inf");
  EXPECT_EQ(FormatFloat(1e39, 32), ".inf");
  EXPECT_EQ(FormatFloat(-1e39, 32), "-.inf");
  EXPECT_EQ(FormatJsonFloat(2.0), "2");
  EXPECT_EQ(FormatJsonFloat(123456789.0), "123456789");
  EXPECT_EQ(FormatJsonFloat(1e20), "1e+20");
  EXPECT_EQ(FormatJsonFloat(-2.5), "-2.5");
}

TEST(GoYamlTest, CoercesInvalidUtf8) {
  EXPECT_EQ(CoerceUtf8("ok ✓"), "ok ✓");
  EXPECT_EQ(CoerceUtf8(std::string("a\xff" "b")), "a\xEF\xBF\xBD" "b");
  EXPECT_EQ(CoerceUtf8(std::string("\xC3")), "\xEF\xBF\xBD");
}

}  // namespace
}  // namespace reverser::manifest::goyaml
