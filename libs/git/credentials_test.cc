#include "libs/git/credentials.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "libs/git/repo_path.h"
#include "libs/git/transport.h"
#include "tests/fixtures/process.h"
#include "tests/fixtures/temp_dir.h"

namespace reverser::git {
namespace {

using Kind = GitCredentials::Kind;

TEST(CredentialsFromSecretData, SshKeyDialectsInOrder) {
  for (const char* key : {"ssh-privatekey", "identity", "sshPrivateKey"}) {
    auto creds = CredentialsFromSecretData({{key, "KEY"}, {"known_hosts", "kh"}});
    ASSERT_TRUE(creds.ok()) << creds.status();
    EXPECT_EQ(creds->kind, Kind::kSsh) << key;
    EXPECT_EQ(creds->ssh_private_key, "KEY");
    EXPECT_EQ(creds->known_hosts, "kh");
  }
  auto first = CredentialsFromSecretData(
      {{"ssh-privatekey", "A"}, {"identity", "B"}, {"sshPrivateKey", "C"}});
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->ssh_private_key, "A");
}

TEST(CredentialsFromSecretData, PassphraseFromSshPasswordThenPassword) {
  auto a =
      CredentialsFromSecretData({{"identity", "K"}, {"ssh-password", "p1"}, {"password", "p2"}});
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->ssh_passphrase, "p1");
  auto b = CredentialsFromSecretData({{"identity", "K"}, {"password", "p2"}});
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->ssh_passphrase, "p2");
}

TEST(CredentialsFromSecretData, PrecedenceSshThenBasicThenBearer) {
  auto ssh = CredentialsFromSecretData(
      {{"ssh-privatekey", "K"}, {"username", "u"}, {"password", "p"}, {"bearerToken", "t"}});
  ASSERT_TRUE(ssh.ok());
  EXPECT_EQ(ssh->kind, Kind::kSsh);
  EXPECT_EQ(ssh->ssh_passphrase, "p");  // password is the key passphrase when a key is present

  auto basic =
      CredentialsFromSecretData({{"username", "u"}, {"password", "p"}, {"bearerToken", "t"}});
  ASSERT_TRUE(basic.ok());
  EXPECT_EQ(basic->kind, Kind::kBasic);
  EXPECT_EQ(basic->username, "u");
  EXPECT_EQ(basic->password, "p");

  auto bearer = CredentialsFromSecretData({{"bearerToken", "t"}});
  ASSERT_TRUE(bearer.ok());
  EXPECT_EQ(bearer->kind, Kind::kBearer);
  EXPECT_EQ(bearer->bearer_token, "t");

  auto none = CredentialsFromSecretData({{"unrelated", "x"}});
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->kind, Kind::kNone);
}

TEST(CredentialsFromSecretData, MalformedSecretsAreRefused) {
  EXPECT_EQ(CredentialsFromSecretData({{"ssh-privatekey", ""}}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CredentialsFromSecretData({{"username", "u"}}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CredentialsFromSecretData({{"bearerToken", "a\r\nX-Evil: 1"}}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// A real host key pair from ssh-keygen, the independent producer of known_hosts files.
struct HostKey {
  std::string type;
  std::string base64;
  std::string blob;
};

HostKey MakeHostKey(const std::string& dir, const std::string& name) {
  std::string path = absl::StrCat(dir, "/", name);
  auto gen = testing::RunCommand(
      {"ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "test", "-f", path});
  EXPECT_TRUE(gen.ok() && gen->exit_code == 0);
  auto pub = testing::ReadFile(path + ".pub");
  EXPECT_TRUE(pub.ok());
  std::vector<std::string> fields = absl::StrSplit(*pub, ' ');
  HostKey key{fields[0], fields[1], ""};
  EXPECT_TRUE(absl::Base64Unescape(key.base64, &key.blob));
  return key;
}

TEST(KnownHosts, PlainPatternsPortsWildcardsAndNegation) {
  if (access("/usr/bin/ssh-keygen", X_OK) != 0) GTEST_SKIP() << "openssh-client is not installed";
  testing::ScopedTempDir dir("kh");
  HostKey key = MakeHostKey(dir.path(), "k1");
  HostKey other = MakeHostKey(dir.path(), "k2");
  std::string text = absl::StrCat("# comment\n\n", "git.example.com,10.1.2.3 ", key.type, " ",
                                  key.base64, "\n", "[git.example.com]:2222 ", key.type, " ",
                                  key.base64, "\n", "*.wild.test,!bad.wild.test ", key.type, " ",
                                  key.base64, "\n", "garbage line\n");
  std::vector<KnownHost> hosts = ParseKnownHosts(text);
  ASSERT_EQ(hosts.size(), 3u);

  EXPECT_TRUE(HostKeyTrusted(hosts, "git.example.com", 22, key.blob));
  EXPECT_TRUE(HostKeyTrusted(hosts, "GIT.EXAMPLE.COM", 22, key.blob));
  EXPECT_TRUE(HostKeyTrusted(hosts, "10.1.2.3", 22, key.blob));
  EXPECT_TRUE(HostKeyTrusted(hosts, "git.example.com", 2222, key.blob));
  EXPECT_FALSE(HostKeyTrusted(hosts, "git.example.com", 2223, key.blob));
  EXPECT_FALSE(HostKeyTrusted(hosts, "git.example.com", 22, other.blob));  // wrong key
  EXPECT_FALSE(HostKeyTrusted(hosts, "other.example.com", 22, key.blob));
  EXPECT_TRUE(HostKeyTrusted(hosts, "a.wild.test", 22, key.blob));
  EXPECT_FALSE(HostKeyTrusted(hosts, "bad.wild.test", 22, key.blob));
  EXPECT_FALSE(HostKeyTrusted({}, "git.example.com", 22, key.blob));  // fail closed
  EXPECT_FALSE(HostKeyTrusted(hosts, "git.example.com", 22, ""));
}

TEST(KnownHosts, HashedEntriesWrittenBySshKeygen) {
  if (access("/usr/bin/ssh-keygen", X_OK) != 0) GTEST_SKIP() << "openssh-client is not installed";
  testing::ScopedTempDir dir("kh");
  HostKey key = MakeHostKey(dir.path(), "k1");
  std::string file = dir.path() + "/known_hosts";
  ASSERT_TRUE(
      testing::WriteFile(file, absl::StrCat("git.example.com ", key.type, " ", key.base64,
                                            "\n[127.0.0.1]:2022 ", key.type, " ", key.base64, "\n"))
          .ok());
  auto hash = testing::RunCommand({"ssh-keygen", "-H", "-f", file});
  ASSERT_TRUE(hash.ok() && hash->exit_code == 0);
  auto hashed = testing::ReadFile(file);
  ASSERT_TRUE(hashed.ok());
  ASSERT_EQ(hashed->find("git.example.com"), std::string::npos) << *hashed;

  std::vector<KnownHost> hosts = ParseKnownHosts(*hashed);
  ASSERT_EQ(hosts.size(), 2u);
  EXPECT_FALSE(hosts[0].hash.empty());
  EXPECT_TRUE(HostKeyTrusted(hosts, "git.example.com", 22, key.blob));
  EXPECT_TRUE(HostKeyTrusted(hosts, "127.0.0.1", 2022, key.blob));
  EXPECT_FALSE(HostKeyTrusted(hosts, "127.0.0.1", 22, key.blob));
  EXPECT_FALSE(HostKeyTrusted(hosts, "git.example.org", 22, key.blob));
}

TEST(KnownHosts, RevokedKeyIsNeverTrusted) {
  if (access("/usr/bin/ssh-keygen", X_OK) != 0) GTEST_SKIP() << "openssh-client is not installed";
  testing::ScopedTempDir dir("kh");
  HostKey key = MakeHostKey(dir.path(), "k1");
  std::vector<KnownHost> hosts = ParseKnownHosts(absl::StrCat(
      "git.example.com ", key.type, " ", key.base64, "\n@revoked * ", key.type, " ", key.base64,
      "\n@cert-authority *.example.com ", key.type, " ", key.base64, "\n"));
  ASSERT_EQ(hosts.size(), 3u);
  EXPECT_FALSE(HostKeyTrusted(hosts, "git.example.com", 22, key.blob));
}

TEST(SshEndpoint, UrlForms) {
  auto a = ParseSshEndpoint("ssh://git@127.0.0.1:2222/srv/repo.git");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->host, "127.0.0.1");
  EXPECT_EQ(a->port, 2222);
  auto b = ParseSshEndpoint("git@github.com:owner/repo.git");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->host, "github.com");
  EXPECT_EQ(b->port, 22);
  auto c = ParseSshEndpoint("ssh://[::1]:22022/repo");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->host, "::1");
  EXPECT_EQ(c->port, 22022);
  EXPECT_FALSE(ParseSshEndpoint("https://example.com/repo.git").ok());
  EXPECT_FALSE(ParseSshEndpoint("ssh://host:notaport/x").ok());
  EXPECT_TRUE(IsLocalUrl("/srv/repo.git"));
  EXPECT_TRUE(IsLocalUrl("file:///srv/repo.git"));
  EXPECT_FALSE(IsLocalUrl("git@github.com:o/r.git"));
  EXPECT_EQ(LocalPathFromUrl("file:///srv/repo.git"), "/srv/repo.git");
}

TEST(ValidateRepoPath, AcceptsOrdinaryPathsRefusesEscapes) {
  EXPECT_TRUE(ValidateRepoPath("a.yaml").ok());
  EXPECT_TRUE(ValidateRepoPath("clusters/prod/ns/configmaps/x.yaml").ok());
  EXPECT_TRUE(ValidateRepoPath(".sops.yaml").ok());
  EXPECT_TRUE(ValidateRepoPath("dir/.gitignore").ok());
  for (const char* bad : {"", "/etc/passwd", "a/../b", "..", "./a", "a//b", "a/", ".git/config",
                          "x/.GIT/hooks", "a\\b", "a\nb"}) {
    EXPECT_EQ(ValidateRepoPath(bad).code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

}  // namespace
}  // namespace reverser::git
