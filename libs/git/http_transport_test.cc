// Smart HTTP transport with basic auth and bearer tokens, against git's own git-http-backend
// (run as CGI behind a small cpp-httplib server that enforces the credentials).

#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <memory>
#include <thread>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"
#include "libs/git/libgit2.h"
#include "libs/git/repository.h"
#include "libs/git/test_support.h"
#include "tests/fixtures/git_repos.h"
#include "tests/fixtures/process.h"
#include "tests/fixtures/temp_dir.h"

namespace reverser::git {
namespace {

using git::testutil::Trim;

// Serves the repositories under `root` over smart HTTP; every request must carry
// `required_authorization` (e.g. "Basic dTpw" or "Bearer t") or gets a 401 challenge.
class GitHttpServer {
 public:
  // With `cert`/`key` (PEM files) it serves HTTPS.
  GitHttpServer(std::string root, std::string required_authorization, const std::string& cert = "",
                const std::string& key = "")
      : root_(std::move(root)),
        required_(std::move(required_authorization)),
        tls_(!cert.empty()),
        owned_server_(tls_ ? std::make_unique<httplib::SSLServer>(cert.c_str(), key.c_str())
                           : std::make_unique<httplib::Server>()),
        server_(*owned_server_) {
    server_.set_payload_max_length(64 << 20);
    auto handler = [this](const httplib::Request& req, httplib::Response& res) {
      Handle(req, res);
    };
    server_.Get(".*", handler);
    server_.Post(".*", handler);
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    testing::WaitFor([this] { return server_.is_running(); }, absl::Seconds(10));
  }
  ~GitHttpServer() {
    server_.stop();
    thread_.join();
  }
  std::string Url(const std::string& repo) const {
    return tls_ ? absl::StrCat("https://localhost:", port_, "/", repo)
                : absl::StrCat("http://127.0.0.1:", port_, "/", repo);
  }
  int authorized_requests() const { return authorized_.load(); }
  int refused_requests() const { return refused_.load(); }

 private:
  void Handle(const httplib::Request& req, httplib::Response& res) {
    if (req.get_header_value("Authorization") != required_) {
      ++refused_;
      res.status = 401;
      res.set_header("WWW-Authenticate", "Basic realm=\"git\"");
      res.set_content("authentication required\n", "text/plain");
      return;
    }
    ++authorized_;
    std::string query;
    for (const auto& [key, value] : req.params) {
      absl::StrAppend(&query, query.empty() ? "" : "&", key, "=", value);
    }
    std::map<std::string, std::string> env = {
        {"GIT_PROJECT_ROOT", root_},
        {"GIT_HTTP_EXPORT_ALL", "1"},
        {"PATH_INFO", req.path},
        {"QUERY_STRING", query},
        {"REQUEST_METHOD", req.method},
        {"REMOTE_USER", "tester"},
        {"REMOTE_ADDR", "127.0.0.1"},
        {"CONTENT_LENGTH", absl::StrCat(req.body.size())},
        {"CONTENT_TYPE", req.get_header_value("Content-Type")},
        {"GIT_CONFIG_NOSYSTEM", "1"},
        {"GIT_CONFIG_GLOBAL", "/dev/null"}};
    if (req.has_header("Content-Encoding")) {
      env["HTTP_CONTENT_ENCODING"] = req.get_header_value("Content-Encoding");
    }
    auto cgi = testing::RunCommand({"/usr/lib/git-core/git-http-backend"}, req.body, "", env);
    if (!cgi.ok() || cgi->exit_code != 0) {
      res.status = 500;
      return;
    }
    // CGI output: headers, a blank line, the body.
    size_t split = cgi->out.find("\r\n\r\n");
    size_t skip = 4;
    if (split == std::string::npos) {
      split = cgi->out.find("\n\n");
      skip = 2;
    }
    if (split == std::string::npos) {
      res.status = 500;
      return;
    }
    std::string content_type = "application/octet-stream";
    res.status = 200;
    for (absl::string_view line : absl::StrSplit(cgi->out.substr(0, split), '\n')) {
      line = absl::StripTrailingAsciiWhitespace(line);
      size_t colon = line.find(':');
      if (colon == absl::string_view::npos) continue;
      absl::string_view name = line.substr(0, colon);
      absl::string_view value = absl::StripLeadingAsciiWhitespace(line.substr(colon + 1));
      if (absl::EqualsIgnoreCase(name, "Status")) {
        int code = 0;
        if (absl::SimpleAtoi(value.substr(0, 3), &code)) res.status = code;
      } else if (absl::EqualsIgnoreCase(name, "Content-Type")) {
        content_type = std::string(value);
      } else {
        res.set_header(std::string(name).c_str(), std::string(value));
      }
    }
    res.set_content(cgi->out.substr(split + skip), content_type.c_str());
  }

  std::string root_;
  std::string required_;
  bool tls_;
  std::unique_ptr<httplib::Server> owned_server_;
  httplib::Server& server_;
  int port_ = -1;
  std::thread thread_;
  std::atomic<int> authorized_{0};
  std::atomic<int> refused_{0};
};

CommitSpec Spec(const std::string& message) { return git::testutil::TestCommitSpec(message); }

class HttpTransportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto remote = testing::CreateBareRemote(dir_.path());
    ASSERT_TRUE(remote.ok()) << remote.status();
    remote_ = *remote;
  }

  // Fetch, commit one file, CAS push; returns the pushed commit.
  void RoundTrip(const GitCredentials& credentials, const std::string& url) {
    auto repo = Repository::Open({dir_.path() + "/clone", url, credentials});
    ASSERT_TRUE(repo.ok()) << repo.status();
    ASSERT_TRUE((*repo)->Fetch().ok());
    auto base = (*repo)->ResolveBranchBase("main");
    ASSERT_TRUE(base.ok() && base->commit.has_value());
    ASSERT_TRUE((*repo)->ResetBranch("main", base->commit).ok());
    auto commit = (*repo)->CommitOnBranch("main", {{"http.yaml", "h\n"}}, Spec("over http"));
    ASSERT_TRUE(commit.ok() && commit->has_value()) << commit.status();
    auto push = (*repo)->Push("main", **commit, base->commit);
    ASSERT_TRUE(push.ok()) << push.status();
    EXPECT_EQ(push->outcome, PushOutcome::kPushed);
    EXPECT_EQ(Trim(testing::Git(remote_, {"rev-parse", "main"}).value_or("")), **commit);
    EXPECT_EQ(testing::ShowFile(remote_, "main", "http.yaml").value_or(""), "h\n");
  }

  testing::ScopedTempDir dir_{"http"};
  std::string remote_;
};

TEST_F(HttpTransportTest, BasicAuthFetchAndPush) {
  GitHttpServer server(dir_.path(), "Basic " + absl::Base64Escape("robot:s3cret"));
  auto creds = CredentialsFromSecretData({{"username", "robot"}, {"password", "s3cret"}});
  ASSERT_TRUE(creds.ok());
  RoundTrip(*creds, server.Url("remote.git"));
  EXPECT_GT(server.authorized_requests(), 0);
}

// A clone that writes one branch of a remote with several fetches that branch and the default
// branch only; deleted on the remote, the branch is pruned and starts from the default branch.
// (A local remote fetches every branch: repository.h.)
TEST_F(HttpTransportTest, FetchOfOneBranchDownloadsItAndTheDefaultBranchOnly) {
  GitHttpServer server(dir_.path(), "Basic " + absl::Base64Escape("robot:s3cret"));
  auto creds = CredentialsFromSecretData({{"username", "robot"}, {"password", "s3cret"}});
  ASSERT_TRUE(creds.ok());
  ASSERT_TRUE(testing::Git(remote_, {"branch", "mine", "main"}).ok());
  ASSERT_TRUE(testing::Git(remote_, {"branch", "other", "main"}).ok());
  auto opened = Repository::Open({dir_.path() + "/clone", server.Url("remote.git"), *creds});
  ASSERT_TRUE(opened.ok()) << opened.status();
  Repository& repo = **opened;
  ASSERT_TRUE(repo.Fetch("mine").ok());
  auto tip = [&](const char* branch) { return repo.FetchedTip(branch).value_or(std::nullopt); };
  const std::string main_tip = Trim(testing::Git(remote_, {"rev-parse", "main"}).value_or(""));
  EXPECT_EQ(tip("mine").value_or(""), main_tip);
  EXPECT_EQ(tip("main").value_or(""), main_tip);
  EXPECT_FALSE(tip("other").has_value());  // another branch is not downloaded
  EXPECT_EQ(repo.FetchedDefaultBranch().value_or(std::nullopt).value_or(""), "main");

  ASSERT_TRUE(testing::Git(remote_, {"branch", "-D", "mine"}).ok());
  ASSERT_TRUE(repo.Fetch("mine").ok());
  EXPECT_FALSE(tip("mine").has_value());
  auto base = repo.ResolveBranchBase("mine");
  ASSERT_TRUE(base.ok()) << base.status();
  EXPECT_TRUE(base->from_default_branch);

  ASSERT_TRUE(repo.Fetch().ok());  // without a branch: every branch
  EXPECT_EQ(tip("other").value_or(""), main_tip);
}

TEST_F(HttpTransportTest, BearerTokenHeaderOnEveryRequest) {
  GitHttpServer server(dir_.path(), "Bearer tok-123");
  auto creds = CredentialsFromSecretData({{"bearerToken", "tok-123"}});
  ASSERT_TRUE(creds.ok());
  RoundTrip(*creds, server.Url("remote.git"));
  EXPECT_GT(server.authorized_requests(), 0);
  EXPECT_EQ(server.refused_requests(), 0);  // sent up front, never waits for a challenge
}

TEST_F(HttpTransportTest, WrongOrMissingCredentialsAreUnauthenticatedWithoutLooping) {
  GitHttpServer server(dir_.path(), "Basic " + absl::Base64Escape("robot:s3cret"));
  auto wrong = CredentialsFromSecretData({{"username", "robot"}, {"password", "nope"}});
  ASSERT_TRUE(wrong.ok());
  auto repo = Repository::Open({dir_.path() + "/clone", server.Url("remote.git"), *wrong});
  ASSERT_TRUE(repo.ok());
  absl::Status fetch = (*repo)->Fetch();
  EXPECT_EQ(fetch.code(), absl::StatusCode::kUnauthenticated) << fetch;
  EXPECT_LE(server.refused_requests(), 3);

  auto anonymous = Repository::Open({dir_.path() + "/clone2", server.Url("remote.git"), {}});
  ASSERT_TRUE(anonymous.ok());
  absl::Status anon = (*anonymous)->Fetch();
  EXPECT_EQ(anon.code(), absl::StatusCode::kUnauthenticated) << anon;

  auto bad_token = CredentialsFromSecretData({{"bearerToken", "wrong"}});
  auto bearer = Repository::Open({dir_.path() + "/clone3", server.Url("remote.git"), *bad_token});
  ASSERT_TRUE(bearer.ok());
  absl::Status bearer_fetch = (*bearer)->Fetch();
  EXPECT_EQ(bearer_fetch.code(), absl::StatusCode::kUnauthenticated) << bearer_fetch;
}

TEST_F(HttpTransportTest, CredentialsInTheUrlNeverShowInErrors) {
  GitHttpServer server(dir_.path(), "Basic " + absl::Base64Escape("robot:s3cret"));
  std::string url = server.Url("remote.git");
  ASSERT_EQ(url.rfind("http://", 0), 0u) << url;
  url.insert(7, "robot:leaked-pw@");
  auto repo = Repository::Open({dir_.path() + "/clone", url, {}});
  ASSERT_TRUE(repo.ok());
  absl::Status fetch = (*repo)->Fetch();
  EXPECT_FALSE(fetch.ok());
  EXPECT_EQ(fetch.message().find("leaked-pw"), absl::string_view::npos) << fetch;
  EXPECT_EQ(fetch.message().find("robot"), absl::string_view::npos) << fetch;
}

// HTTPS: the server certificate is verified (fail closed) until its CA is trusted; then the
// bearer token travels over TLS like over plain HTTP.
TEST_F(HttpTransportTest, HttpsVerifiesTheServerCertificate) {
  const std::string cert = dir_.path() + "/cert.pem";
  const std::string key = dir_.path() + "/key.pem";
  auto gen = testing::RunCommand({"openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes",
                                  "-keyout", key, "-out", cert, "-days", "2", "-subj",
                                  "/CN=localhost", "-addext", "subjectAltName=DNS:localhost"});
  ASSERT_TRUE(gen.ok() && gen->exit_code == 0) << (gen.ok() ? gen->err : "");
  GitHttpServer server(dir_.path(), "Bearer tls-token", cert, key);
  auto creds = CredentialsFromSecretData({{"bearerToken", "tls-token"}});
  ASSERT_TRUE(creds.ok());

  auto untrusted = Repository::Open({dir_.path() + "/clone0", server.Url("remote.git"), *creds});
  ASSERT_TRUE(untrusted.ok());
  absl::Status refused = (*untrusted)->Fetch();
  EXPECT_EQ(refused.code(), absl::StatusCode::kPermissionDenied) << refused;
  EXPECT_EQ(server.authorized_requests(), 0) << "token sent to an unverified server";

  ASSERT_TRUE(SetTrustedCertificates(cert).ok());
  RoundTrip(*creds, server.Url("remote.git"));
  EXPECT_GT(server.authorized_requests(), 0);
}

}  // namespace
}  // namespace reverser::git
