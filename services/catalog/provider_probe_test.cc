// GitProvider probe helpers: credential dialects, remote URL parsing, reachability.

#include "services/catalog/provider_probe.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "gtest/gtest.h"
#include "tests/fixtures/temp_dir.h"

namespace reverser::catalog {
namespace {

using nlohmann::json;

TEST(ProviderProbeTest, CredentialDialects) {
  EXPECT_EQ(*CredentialDialect({{"data", {{"ssh-privatekey", "x"}}}}), "ssh");
  EXPECT_EQ(*CredentialDialect({{"data", {{"identity", "x"}}}}), "ssh");
  EXPECT_EQ(*CredentialDialect({{"data", {{"sshPrivateKey", "x"}}}}), "ssh");
  EXPECT_EQ(*CredentialDialect({{"data", {{"username", "u"}, {"password", "p"}}}}), "basic");
  EXPECT_EQ(*CredentialDialect({{"stringData", {{"bearerToken", "t"}}}}), "bearer");
  EXPECT_FALSE(CredentialDialect({{"data", {{"username", "u"}}}}).ok());
  EXPECT_FALSE(CredentialDialect(json::object()).ok());
  EXPECT_FALSE(CredentialDialect(json("not an object")).ok());
}

TEST(ProviderProbeTest, RemoteUrls) {
  auto https = ParseRemote("https://github.com/org/repo.git");
  ASSERT_TRUE(https.ok());
  EXPECT_EQ(https->host, "github.com");
  EXPECT_EQ(https->port, 443);
  auto ssh = ParseRemote("ssh://git@example.com:2222/repo.git");
  ASSERT_TRUE(ssh.ok());
  EXPECT_EQ(ssh->host, "example.com");
  EXPECT_EQ(ssh->port, 2222);
  auto scp = ParseRemote("git@github.com:org/repo.git");
  ASSERT_TRUE(scp.ok());
  EXPECT_EQ(scp->host, "github.com");
  EXPECT_EQ(scp->port, 22);
  auto file = ParseRemote("file:///srv/git/repo.git");
  ASSERT_TRUE(file.ok());
  EXPECT_TRUE(file->local);
  EXPECT_EQ(file->path, "/srv/git/repo.git");
  EXPECT_FALSE(ParseRemote("").ok());
  EXPECT_FALSE(ParseRemote("gopher://x/y").ok());
  EXPECT_FALSE(ParseRemote("https://host:99999/x").ok());
  EXPECT_FALSE(ParseRemote("plainword").ok());
}

TEST(ProviderProbeTest, ReachabilityOfLocalPathsAndTcpRemotes) {
  reverser::testing::ScopedTempDir dir("repo");
  EXPECT_TRUE(CheckReachable({true, dir.path()}, absl::Seconds(1)).ok());
  EXPECT_FALSE(CheckReachable({true, dir.path() + "/missing"}, absl::Seconds(1)).ok());

  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(::listen(fd, 4), 0);
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  int port = ntohs(addr.sin_port);
  RemoteEndpoint open{false, "", "127.0.0.1", port};
  EXPECT_TRUE(CheckReachable(open, absl::Seconds(2)).ok());
  ::close(fd);
  absl::Status closed = CheckReachable(open, absl::Seconds(2));
  EXPECT_FALSE(closed.ok());
  EXPECT_NE(closed.message().find("cannot connect"), std::string::npos) << closed;
}

}  // namespace
}  // namespace reverser::catalog
