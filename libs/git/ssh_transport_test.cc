// SSH transport against a real OpenSSH server on a loopback port: private keys (with and
// without passphrase), host keys checked against known_hosts (plain and hashed), fail closed.
// Skipped when /usr/sbin/sshd (Debian openssh-server) is not installed.

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "libs/git/test_support.h"
#include "libs/git/repository.h"
#include "tests/fixtures/git_repos.h"
#include "tests/fixtures/process.h"
#include "tests/fixtures/temp_dir.h"

namespace reverser::git {
namespace {

using git::testutil::Trim;

constexpr char kSshd[] = "/usr/sbin/sshd";

absl::Status KeyGen(const std::string& path, const std::string& passphrase) {
  auto gen = testing::RunCommand(
      {"ssh-keygen", "-q", "-t", "ed25519", "-N", passphrase, "-C", "test", "-f", path});
  if (!gen.ok()) return gen.status();
  if (gen->exit_code != 0) return absl::InternalError(gen->err);
  return absl::OkStatus();
}

CommitSpec Spec(const std::string& message) { return git::testutil::TestCommitSpec(message); }

class SshTransportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (access(kSshd, X_OK) != 0) GTEST_SKIP() << "openssh-server is not installed";
    const std::string& d = dir_.path();
    auto remote = testing::CreateBareRemote(d);
    ASSERT_TRUE(remote.ok()) << remote.status();
    remote_ = *remote;
    ASSERT_TRUE(KeyGen(d + "/host_key", "").ok());
    ASSERT_TRUE(KeyGen(d + "/client_key", "").ok());
    ASSERT_TRUE(KeyGen(d + "/locked_key", "correct horse").ok());
    ASSERT_TRUE(KeyGen(d + "/stranger_key", "").ok());
    auto client_pub = testing::ReadFile(d + "/client_key.pub");
    auto locked_pub = testing::ReadFile(d + "/locked_key.pub");
    ASSERT_TRUE(client_pub.ok() && locked_pub.ok());
    ASSERT_TRUE(testing::WriteFile(d + "/authorized_keys", *client_pub + *locked_pub).ok());
    // sshd insists on its privilege separation directory.
    mkdir("/run/sshd", 0755);
    struct stat privsep;
    if (stat("/run/sshd", &privsep) != 0) GTEST_SKIP() << "cannot create /run/sshd for sshd";

    auto port = testing::PickFreePort();
    ASSERT_TRUE(port.ok());
    port_ = *port;
    const char* user = getenv("USER");
    user_ = user && *user ? user : "root";
    ASSERT_TRUE(testing::WriteFile(
                    d + "/sshd_config",
                    absl::StrCat("Port ", port_, "\nListenAddress 127.0.0.1\nHostKey ", d,
                                 "/host_key\nPidFile ", d, "/sshd.pid\nAuthorizedKeysFile ", d,
                                 "/authorized_keys\n"
                                 "PasswordAuthentication no\n"
                                 "KbdInteractiveAuthentication no\n"
                                 "PubkeyAuthentication yes\nUsePAM no\n"
                                 "StrictModes no\nPermitRootLogin yes\n"
                                 "LogLevel VERBOSE\n"))
                    .ok());
    auto sshd = testing::ChildProcess::Start(
        {{kSshd, "-D", "-e", "-f", d + "/sshd_config"}, {}, d, "sshd"});
    ASSERT_TRUE(sshd.ok()) << sshd.status();
    sshd_.emplace(std::move(*sshd));
    ASSERT_TRUE(testing::WaitFor(
        [&] {
          return !sshd_->Running() || sshd_->Stderr().find("Server listening") != std::string::npos;
        },
        absl::Seconds(20)));
    ASSERT_TRUE(sshd_->Running()) << sshd_->Stderr();

    auto host_pub = testing::ReadFile(d + "/host_key.pub");
    ASSERT_TRUE(host_pub.ok());
    std::vector<std::string> fields = absl::StrSplit(*host_pub, ' ');
    known_hosts_ = absl::StrCat("[127.0.0.1]:", port_, " ", fields[0], " ", fields[1], "\n");
    url_ = absl::StrCat("ssh://", user_, "@127.0.0.1:", port_, remote_);
  }

  std::map<std::string, std::string> SecretWith(const std::string& key_file,
                                                const std::string& key_name) {
    std::map<std::string, std::string> data;
    data[key_name] = testing::ReadFile(dir_.path() + "/" + key_file).value_or("");
    data["known_hosts"] = known_hosts_;
    return data;
  }

  absl::StatusOr<std::unique_ptr<Repository>> Open(const std::map<std::string, std::string>& secret,
                                                   const std::string& name) {
    auto creds = CredentialsFromSecretData(secret);
    if (!creds.ok()) return creds.status();
    return Repository::Open({dir_.path() + "/" + name, url_, *creds});
  }

  testing::ScopedTempDir dir_{"ssh"};
  std::string remote_, url_, user_, known_hosts_;
  int port_ = 0;
  std::optional<testing::ChildProcess> sshd_;
};

TEST_F(SshTransportTest, PrivateKeyFetchCommitAndPush) {
  auto repo = Open(SecretWith("client_key", "ssh-privatekey"), "clone");
  ASSERT_TRUE(repo.ok()) << repo.status();
  absl::Status fetch = (*repo)->Fetch();
  ASSERT_TRUE(fetch.ok()) << fetch << "\n" << sshd_->Stderr();
  auto base = (*repo)->ResolveBranchBase("main");
  ASSERT_TRUE(base.ok() && base->commit.has_value());
  ASSERT_TRUE((*repo)->ResetBranch("main", base->commit).ok());
  auto commit = (*repo)->CommitOnBranch("main", {{"ssh.yaml", "s\n"}}, Spec("over ssh"));
  ASSERT_TRUE(commit.ok() && commit->has_value());
  auto push = (*repo)->Push("main", **commit, base->commit);
  ASSERT_TRUE(push.ok()) << push.status();
  EXPECT_EQ(push->outcome, PushOutcome::kPushed);
  EXPECT_EQ(Trim(testing::Git(remote_, {"rev-parse", "main"}).value_or("")), **commit);
}

TEST_F(SshTransportTest, TheKeyIsNeverWrittenToAFolder) {
  // No writable temp folder at all: the key reaches libssh2 from memory (or a memfd), never as
  // a file a SIGKILL would leave behind.
  const char* saved = getenv("TMPDIR");
  const std::string restore = saved ? saved : "";
  setenv("TMPDIR", (dir_.path() + "/no-such-folder").c_str(), 1);
  auto repo = Open(SecretWith("client_key", "ssh-privatekey"), "clone");
  absl::Status fetch = repo.ok() ? (*repo)->Fetch() : repo.status();
  if (saved) setenv("TMPDIR", restore.c_str(), 1); else unsetenv("TMPDIR");
  EXPECT_TRUE(fetch.ok()) << fetch << "\n" << sshd_->Stderr();
}

TEST_F(SshTransportTest, PassphraseProtectedKeyWithFluxDialect) {
  auto secret = SecretWith("locked_key", "identity");
  secret["password"] = "correct horse";
  auto repo = Open(secret, "clone");
  ASSERT_TRUE(repo.ok());
  absl::Status fetch = (*repo)->Fetch();
  EXPECT_TRUE(fetch.ok()) << fetch << "\n" << sshd_->Stderr();
  EXPECT_TRUE((*repo)->FetchedTip("main").value().has_value());

  secret["password"] = "wrong";
  auto wrong = Open(secret, "clone2");
  ASSERT_TRUE(wrong.ok());
  EXPECT_FALSE((*wrong)->Fetch().ok());
}

TEST_F(SshTransportTest, HashedKnownHostsAreAccepted) {
  std::string file = dir_.path() + "/known_hosts";
  ASSERT_TRUE(testing::WriteFile(file, known_hosts_).ok());
  auto hash = testing::RunCommand({"ssh-keygen", "-H", "-f", file});
  ASSERT_TRUE(hash.ok() && hash->exit_code == 0);
  auto secret = SecretWith("client_key", "sshPrivateKey");
  secret["known_hosts"] = testing::ReadFile(file).value_or("");
  ASSERT_EQ(secret["known_hosts"].find("127.0.0.1"), std::string::npos);
  auto repo = Open(secret, "clone");
  ASSERT_TRUE(repo.ok());
  absl::Status fetch = (*repo)->Fetch();
  EXPECT_TRUE(fetch.ok()) << fetch;
}

TEST_F(SshTransportTest, UnknownOrMissingHostKeyFailsClosed) {
  auto no_hosts = SecretWith("client_key", "ssh-privatekey");
  no_hosts.erase("known_hosts");
  auto repo = Open(no_hosts, "clone");
  ASSERT_TRUE(repo.ok());
  absl::Status fetch = (*repo)->Fetch();
  EXPECT_EQ(fetch.code(), absl::StatusCode::kPermissionDenied) << fetch;
  EXPECT_NE(fetch.message().find("known_hosts"), absl::string_view::npos) << fetch;

  // The right host, another key (a man in the middle).
  auto stranger = testing::ReadFile(dir_.path() + "/stranger_key.pub");
  ASSERT_TRUE(stranger.ok());
  std::vector<std::string> fields = absl::StrSplit(*stranger, ' ');
  auto wrong_key = SecretWith("client_key", "ssh-privatekey");
  wrong_key["known_hosts"] =
      absl::StrCat("[127.0.0.1]:", port_, " ", fields[0], " ", fields[1], "\n");
  auto mitm = Open(wrong_key, "clone2");
  ASSERT_TRUE(mitm.ok());
  absl::Status mitm_fetch = (*mitm)->Fetch();
  EXPECT_EQ(mitm_fetch.code(), absl::StatusCode::kPermissionDenied) << mitm_fetch;

  // The right key listed for port 22 only: ports are part of the host name.
  auto wrong_port = SecretWith("client_key", "ssh-privatekey");
  wrong_port["known_hosts"] =
      known_hosts_.substr(known_hosts_.find(' ') + 1).insert(0, "127.0.0.1 ");
  auto port_repo = Open(wrong_port, "clone3");
  ASSERT_TRUE(port_repo.ok());
  EXPECT_EQ((*port_repo)->Fetch().code(), absl::StatusCode::kPermissionDenied);
}

TEST_F(SshTransportTest, UnauthorizedKeyIsUnauthenticated) {
  auto repo = Open(SecretWith("stranger_key", "ssh-privatekey"), "clone");
  ASSERT_TRUE(repo.ok());
  absl::Status fetch = (*repo)->Fetch();
  EXPECT_EQ(fetch.code(), absl::StatusCode::kUnauthenticated) << fetch;
}

}  // namespace
}  // namespace reverser::git
