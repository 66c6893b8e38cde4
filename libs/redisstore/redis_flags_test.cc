#include "libs/redisstore/redis_flags.h"

#include <string>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "gtest/gtest.h"

ABSL_DECLARE_FLAG(std::string, redis_key_prefix);
ABSL_DECLARE_FLAG(std::string, reference_key_prefix);

namespace reverser::redisstore {
namespace {

class RedisFlagsTest : public ::testing::Test {
 protected:
  void TearDown() override {
    absl::SetFlag(&FLAGS_redis_key_prefix, "reverser");
    absl::SetFlag(&FLAGS_reference_key_prefix, "");
  }
};

TEST_F(RedisFlagsTest, ByDefaultEveryFamilyIsUnderOurPrefix) {
  auto settings = RedisSettingsFromFlags();
  ASSERT_TRUE(settings.ok()) << settings.status();
  EXPECT_EQ(settings->prefix.value(), "reverser");
  EXPECT_EQ(settings->prefix.reference(), "reverser");
  absl::SetFlag(&FLAGS_redis_key_prefix, "cell-a:");
  settings = RedisSettingsFromFlags();
  ASSERT_TRUE(settings.ok()) << settings.status();
  EXPECT_EQ(settings->prefix.reference(), "cell-a");
}

TEST_F(RedisFlagsTest, TheDocumentedValueSharesTheReferencesKeyspace) {
  absl::SetFlag(&FLAGS_reference_key_prefix, "gitops-reverser");
  auto settings = RedisSettingsFromFlags();
  ASSERT_TRUE(settings.ok()) << settings.status();
  EXPECT_EQ(settings->prefix.value(), "reverser");  // our own default stays
  EXPECT_EQ(settings->prefix.reference(), "gitops-reverser");
}

TEST_F(RedisFlagsTest, AMalformedValueNamesItsFlag) {
  absl::SetFlag(&FLAGS_reference_key_prefix, "team/a");
  auto settings = RedisSettingsFromFlags();
  EXPECT_EQ(settings.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(settings.status().message().find("--reference_key_prefix"), std::string::npos)
      << settings.status();
  absl::SetFlag(&FLAGS_reference_key_prefix, "");
  absl::SetFlag(&FLAGS_redis_key_prefix, "a*");
  settings = RedisSettingsFromFlags();
  EXPECT_NE(settings.status().message().find("--redis_key_prefix"), std::string::npos)
      << settings.status();
}

}  // namespace
}  // namespace reverser::redisstore
