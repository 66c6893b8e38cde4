#include "libs/redisstore/redis_flags.h"

#include <string>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "gtest/gtest.h"
#include "tests/fixtures/temp_dir.h"

ABSL_DECLARE_FLAG(std::string, redis_key_prefix);
ABSL_DECLARE_FLAG(std::string, reference_key_prefix);
ABSL_DECLARE_FLAG(std::string, redis_username);
ABSL_DECLARE_FLAG(std::string, redis_password_file);

namespace reverser::redisstore {
namespace {

class RedisFlagsTest : public ::testing::Test {
 protected:
  void TearDown() override {
    absl::SetFlag(&FLAGS_redis_key_prefix, "reverser");
    absl::SetFlag(&FLAGS_reference_key_prefix, "");
    absl::SetFlag(&FLAGS_redis_username, "");
    absl::SetFlag(&FLAGS_redis_password_file, "");
  }
};

TEST_F(RedisFlagsTest, TheAclUserAndThePasswordFromItsFile) {
  testing::ScopedTempDir dir("redis-flags");
  const std::string file = dir.path() + "/password";
  ASSERT_TRUE(testing::WriteFile(file, "s3cret pass\n").ok());
  absl::SetFlag(&FLAGS_redis_username, "reverser");
  absl::SetFlag(&FLAGS_redis_password_file, file);
  auto settings = RedisSettingsFromFlags();
  ASSERT_TRUE(settings.ok()) << settings.status();
  EXPECT_EQ(settings->options.username, "reverser");
  EXPECT_EQ(settings->options.password, "s3cret pass");  // the newline of the file is not in it

  absl::SetFlag(&FLAGS_redis_password_file, dir.path() + "/absent");
  settings = RedisSettingsFromFlags();
  EXPECT_EQ(settings.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(settings.status().message().find("--redis_password_file: cannot read"),
            std::string::npos)
      << settings.status();
  ASSERT_TRUE(testing::WriteFile(file, "\n").ok());
  absl::SetFlag(&FLAGS_redis_password_file, file);
  EXPECT_FALSE(RedisSettingsFromFlags().ok());
  absl::SetFlag(&FLAGS_redis_password_file, "");
  settings = RedisSettingsFromFlags();
  EXPECT_NE(settings.status().message().find("--redis_username needs --redis_password_file"),
            std::string::npos)
      << settings.status();
}

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
