// Credentials from mounted Secret directories.

#include <gtest/gtest.h>

#include <filesystem>

#include "services/gitworker/branch_actor.h"
#include "tests/fixtures/temp_dir.h"

namespace reverser::gitworker {
namespace {

class CredentialsDirTest : public ::testing::Test {
 protected:
  void Put(const std::string& secret, const std::string& key, const std::string& value) {
    std::filesystem::create_directories(dir_.path() + "/" + secret);
    ASSERT_TRUE(testing::WriteFile(dir_.path() + "/" + secret + "/" + key, value).ok());
  }
  testing::ScopedTempDir dir_{"creds"};
};

TEST_F(CredentialsDirTest, ReadsTheReferenceKeyDialects) {
  Put("team/basic", "username", "bot");
  Put("team/basic", "password", "s3cret");
  Put("team/flux", "identity", "-----BEGIN OPENSSH PRIVATE KEY-----\nx\n");
  Put("team/flux", "known_hosts", "git.example.com ssh-ed25519 AAAA\n");
  Put("team/token", "bearerToken", "tok");
  auto resolve = DirectoryCredentialsResolver(dir_.path());

  auto basic = resolve("team/basic");
  ASSERT_TRUE(basic.ok()) << basic.status();
  EXPECT_EQ(basic->kind, git::GitCredentials::Kind::kBasic);
  EXPECT_EQ(basic->username, "bot");
  EXPECT_EQ(basic->password, "s3cret");

  auto ssh = resolve("team/flux");
  ASSERT_TRUE(ssh.ok()) << ssh.status();
  EXPECT_EQ(ssh->kind, git::GitCredentials::Kind::kSsh);
  EXPECT_FALSE(ssh->known_hosts.empty());

  auto bearer = resolve("team/token");
  ASSERT_TRUE(bearer.ok()) << bearer.status();
  EXPECT_EQ(bearer->kind, git::GitCredentials::Kind::kBearer);
}

TEST_F(CredentialsDirTest, RefusesMissingAndEscapingNames) {
  auto resolve = DirectoryCredentialsResolver(dir_.path());
  EXPECT_EQ(resolve("team/absent").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(resolve("../etc").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(resolve("team/..").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(resolve("a/b/c").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(resolve("").status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace reverser::gitworker
