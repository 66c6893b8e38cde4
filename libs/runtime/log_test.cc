#include "libs/runtime/log.h"

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace reverser::runtime {
namespace {

TEST(LogTest, FormatsOneJsonObjectPerLine) {
  std::string line = FormatLogLine(LogLevel::kWarning, "catalog", "listening",
                                   {{"grpc_port", 4000}, {"tls", false}, {"addr", "0.0.0.0"}});
  auto doc = nlohmann::json::parse(line);
  EXPECT_EQ(doc["level"], "warning");
  EXPECT_EQ(doc["service"], "catalog");
  EXPECT_EQ(doc["msg"], "listening");
  EXPECT_EQ(doc["grpc_port"], 4000);
  EXPECT_EQ(doc["tls"], false);
  EXPECT_EQ(doc["addr"], "0.0.0.0");
  EXPECT_EQ(line.find('\n'), std::string::npos);
}

TEST(LogTest, InvalidUtf8AndNewlinesStayOnOneLine) {
  std::string line = FormatLogLine(LogLevel::kInfo, "x", "bad \xff\xfe input\nsecond", {});
  EXPECT_EQ(line.find('\n'), std::string::npos);
  EXPECT_NO_THROW((void)nlohmann::json::parse(line));
}

TEST(LogTest, ParsesLevels) {
  LogLevel level;
  EXPECT_TRUE(ParseLogLevel("debug", &level));
  EXPECT_EQ(level, LogLevel::kDebug);
  EXPECT_FALSE(ParseLogLevel("verbose", &level));
}

}  // namespace
}  // namespace reverser::runtime
