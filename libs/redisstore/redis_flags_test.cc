#include "libs/redisstore/redis_flags.h"

#include <string>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "gtest/gtest.h"
#include "tests/fixtures/certs.h"
#include "tests/fixtures/temp_dir.h"

ABSL_DECLARE_FLAG(std::string, redis_address);
ABSL_DECLARE_FLAG(bool, redis_tls);
ABSL_DECLARE_FLAG(std::string, redis_tls_ca);
ABSL_DECLARE_FLAG(std::string, redis_tls_cert);
ABSL_DECLARE_FLAG(std::string, redis_tls_key);
ABSL_DECLARE_FLAG(std::string, redis_tls_server_name);
ABSL_DECLARE_FLAG(std::string, redis_key_prefix);
ABSL_DECLARE_FLAG(std::string, reference_key_prefix);
ABSL_DECLARE_FLAG(std::string, redis_username);
ABSL_DECLARE_FLAG(std::string, redis_password_file);
ABSL_DECLARE_FLAG(std::string, redis_sentinels);
ABSL_DECLARE_FLAG(std::string, redis_sentinel_master);
ABSL_DECLARE_FLAG(std::string, redis_sentinel_username);
ABSL_DECLARE_FLAG(std::string, redis_sentinel_password_file);

namespace reverser::redisstore {
namespace {

class RedisFlagsTest : public ::testing::Test {
 protected:
  void TearDown() override {
    absl::SetFlag(&FLAGS_redis_key_prefix, "reverser");
    absl::SetFlag(&FLAGS_reference_key_prefix, "");
    absl::SetFlag(&FLAGS_redis_username, "");
    absl::SetFlag(&FLAGS_redis_password_file, "");
    absl::SetFlag(&FLAGS_redis_address, "127.0.0.1:6379");
    absl::SetFlag(&FLAGS_redis_tls, false);
    absl::SetFlag(&FLAGS_redis_tls_ca, "");
    absl::SetFlag(&FLAGS_redis_tls_cert, "");
    absl::SetFlag(&FLAGS_redis_tls_key, "");
    absl::SetFlag(&FLAGS_redis_tls_server_name, "");
    absl::SetFlag(&FLAGS_redis_sentinels, "");
    absl::SetFlag(&FLAGS_redis_sentinel_master, "");
    absl::SetFlag(&FLAGS_redis_sentinel_username, "");
    absl::SetFlag(&FLAGS_redis_sentinel_password_file, "");
  }
};

absl::Status Failure() { return RedisSettingsFromFlags().status(); }

bool Says(const absl::Status& status, absl::string_view text) {
  return status.code() == absl::StatusCode::kInvalidArgument &&
         status.message().find(text) != absl::string_view::npos;
}

TEST_F(RedisFlagsTest, TlsIsOffUnlessAsked) {
  auto settings = RedisSettingsFromFlags();
  ASSERT_TRUE(settings.ok()) << settings.status();
  EXPECT_FALSE(settings->options.tls);
  // The files of TLS without TLS are a mistake, not ignored.
  absl::SetFlag(&FLAGS_redis_tls_server_name, "redis.svc");
  EXPECT_TRUE(Says(Failure(), "--redis_tls_server_name needs --redis_tls or --redis_tls_ca"))
      << Failure();
  absl::SetFlag(&FLAGS_redis_tls_server_name, "");
  absl::SetFlag(&FLAGS_redis_tls_cert, "client.crt");
  EXPECT_TRUE(Says(Failure(), "--redis_tls_cert needs --redis_tls")) << Failure();
}

TEST_F(RedisFlagsTest, TheCaTurnsTlsOnAndTheFilesAreLoaded) {
  testing::ScopedTempDir dir("redis-tls-flags");
  auto pki = testing::MakeTestPki(dir.path());
  ASSERT_TRUE(pki.ok()) << pki.status();
  absl::SetFlag(&FLAGS_redis_address, "redis.reverser.svc:6380");
  absl::SetFlag(&FLAGS_redis_tls_ca, pki->ca_cert);
  auto settings = RedisSettingsFromFlags();
  ASSERT_TRUE(settings.ok()) << settings.status();
  EXPECT_TRUE(settings->options.tls);
  EXPECT_EQ(settings->options.tls_ca_file, pki->ca_cert);
  EXPECT_EQ(settings->options.tls_server_name, "");  // the connection checks the host then
  EXPECT_EQ(settings->options.host, "redis.reverser.svc");

  absl::SetFlag(&FLAGS_redis_tls_server_name, "redis.example.com");
  absl::SetFlag(&FLAGS_redis_tls_cert, pki->client_cert);
  absl::SetFlag(&FLAGS_redis_tls_key, pki->client_key);
  settings = RedisSettingsFromFlags();
  ASSERT_TRUE(settings.ok()) << settings.status();
  EXPECT_EQ(settings->options.tls_server_name, "redis.example.com");
  EXPECT_EQ(settings->options.tls_cert_file, pki->client_cert);
  EXPECT_EQ(settings->options.tls_key_file, pki->client_key);

  // --redis_tls alone: the system's trust store.
  absl::SetFlag(&FLAGS_redis_tls_ca, "");
  absl::SetFlag(&FLAGS_redis_tls, true);
  settings = RedisSettingsFromFlags();
  ASSERT_TRUE(settings.ok()) << settings.status();
  EXPECT_TRUE(settings->options.tls);
  EXPECT_EQ(settings->options.tls_ca_file, "");
}

TEST_F(RedisFlagsTest, AnUnusableTlsFileNamesItsFlag) {
  testing::ScopedTempDir dir("redis-tls-flags");
  auto pki = testing::MakeTestPki(dir.path());
  ASSERT_TRUE(pki.ok()) << pki.status();
  const std::string junk = dir.path() + "/junk.pem";
  ASSERT_TRUE(testing::WriteFile(junk, "-----BEGIN NOTHING-----\n").ok());

  absl::SetFlag(&FLAGS_redis_tls_ca, dir.path() + "/absent.crt");
  EXPECT_TRUE(Says(Failure(), "--redis_tls_ca: redis TLS: cannot read the CA file")) << Failure();
  absl::SetFlag(&FLAGS_redis_tls_ca, junk);
  EXPECT_TRUE(Says(Failure(), "--redis_tls_ca: redis TLS: the CA file")) << Failure();
  EXPECT_TRUE(Says(Failure(), "holds no PEM certificate")) << Failure();

  absl::SetFlag(&FLAGS_redis_tls_ca, pki->ca_cert);
  absl::SetFlag(&FLAGS_redis_tls_cert, pki->client_cert);
  EXPECT_TRUE(Says(Failure(), "--redis_tls_cert and --redis_tls_key go together")) << Failure();
  absl::SetFlag(&FLAGS_redis_tls_key, dir.path() + "/absent.key");
  EXPECT_TRUE(Says(Failure(), "--redis_tls_key: redis TLS: cannot read the client key"))
      << Failure();
  absl::SetFlag(&FLAGS_redis_tls_key, pki->server_key);  // not the certificate's key
  EXPECT_TRUE(Says(Failure(), "--redis_tls_key: ")) << Failure();
  EXPECT_TRUE(Says(Failure(), "does not belong to the certificate")) << Failure();
  absl::SetFlag(&FLAGS_redis_tls_key, pki->client_key);
  absl::SetFlag(&FLAGS_redis_tls_cert, junk);
  EXPECT_TRUE(Says(Failure(), "--redis_tls_cert: redis TLS: the client certificate")) << Failure();
}

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

TEST_F(RedisFlagsTest, SentinelsNeedTheirPrimarysNameAndTheirOwnCredentials) {
  EXPECT_TRUE(RedisSettingsFromFlags()->options.sentinels.empty());
  absl::SetFlag(&FLAGS_redis_sentinel_master, "reverser");
  EXPECT_TRUE(Says(Failure(), "--redis_sentinel_master needs --redis_sentinels"));
  absl::SetFlag(&FLAGS_redis_sentinels, "s-0.sentinel:26379, s-1.sentinel:26379");
  testing::ScopedTempDir dir("redis-flags");
  const std::string file = dir.path() + "/sentinel-password";
  ASSERT_TRUE(testing::WriteFile(file, "watchful\n").ok());
  absl::SetFlag(&FLAGS_redis_sentinel_username, "watcher");
  EXPECT_TRUE(Says(Failure(), "--redis_sentinel_username needs --redis_sentinel_password_file"));
  absl::SetFlag(&FLAGS_redis_sentinel_password_file, file);
  auto settings = RedisSettingsFromFlags();
  ASSERT_TRUE(settings.ok()) << settings.status();
  EXPECT_EQ(settings->options.sentinels,
            (std::vector<std::string>{"s-0.sentinel:26379", "s-1.sentinel:26379"}));
  EXPECT_EQ(settings->options.sentinel_master, "reverser");
  EXPECT_EQ(settings->options.sentinel_username, "watcher");
  EXPECT_EQ(settings->options.sentinel_password, "watchful");
  absl::SetFlag(&FLAGS_redis_sentinel_password_file, dir.path() + "/absent");
  EXPECT_TRUE(Says(Failure(), "--redis_sentinel_password_file: cannot read"));
  absl::SetFlag(&FLAGS_redis_sentinel_password_file, file);
  absl::SetFlag(&FLAGS_redis_sentinel_master, "");
  EXPECT_TRUE(Says(Failure(), "--redis_sentinels needs --redis_sentinel_master"));
  absl::SetFlag(&FLAGS_redis_sentinel_master, "reverser");
  absl::SetFlag(&FLAGS_redis_sentinels, "no-port");
  EXPECT_TRUE(Says(Failure(), "--redis_sentinels"));
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
