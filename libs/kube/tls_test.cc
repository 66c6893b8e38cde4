// HttplibTransport over TLS against a local HTTPS server with certificates made by the openssl
// CLI: CA verification, insecure-skip-tls-verify, client certificates and bearer tokens.

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "libs/kube/config.h"
#include "libs/kube/httplib_transport.h"
#include "libs/kube/scripted_server.h"

namespace reverser::kube {
namespace {

namespace fs = std::filesystem;
using testing::ScriptedServer;

class TlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const char* tmp = std::getenv("TEST_TMPDIR");
    dir_ = new fs::path(fs::path(tmp ? tmp : "/tmp") / "kube_tls");
    fs::remove_all(*dir_);
    fs::create_directories(*dir_);
    std::string d = dir_->string();
    // A CA, a server certificate for 127.0.0.1 and a client certificate, both signed by it.
    std::string script = absl::StrCat(
        "set -e; cd '", d, "';",
        "openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=test-ca "
        "  -keyout ca.key -out ca.crt;",
        "openssl req -newkey rsa:2048 -nodes -subj /CN=127.0.0.1 -keyout server.key -out "
        "server.csr;",
        "printf 'subjectAltName=IP:127.0.0.1' > san.ext;",
        "openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 "
        "  -extfile san.ext -out server.crt;",
        "openssl req -newkey rsa:2048 -nodes -subj /CN=reverser -keyout client.key -out "
        "client.csr;",
        "openssl x509 -req -in client.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 "
        "  -out client.crt) > openssl.log 2>&1");
    script = absl::StrCat("(", script);
    ok_ = std::system(script.c_str()) == 0;
  }

  static std::string Read(const std::string& name) {
    std::ifstream in(*dir_ / name);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  static std::string Path(const std::string& name) { return (*dir_ / name).string(); }

  static absl::StatusOr<HttpResponse> Fetch(const ClusterConfig& config) {
    auto transport = HttplibTransport::Create(config);
    if (!transport.ok()) return transport.status();
    HttpRequest request;
    request.path = "/version";
    return (*transport)->Send(request);
  }

  static void Serve(ScriptedServer& server, std::string* authorization) {
    server.server().Get("/version",
                        [authorization](const httplib::Request& req, httplib::Response& res) {
                          *authorization = req.get_header_value("Authorization");
                          res.set_content(R"({"major":"1","minor":"33"})", "application/json");
                        });
    server.Start();
  }

  static fs::path* dir_;
  static bool ok_;
};
fs::path* TlsTest::dir_ = nullptr;
bool TlsTest::ok_ = false;

TEST_F(TlsTest, VerifiesTheServerAgainstTheConfiguredCa) {
  ASSERT_TRUE(ok_) << Read("openssl.log");
  ScriptedServer server(Path("server.crt"), Path("server.key"));
  std::string authorization;
  Serve(server, &authorization);

  ClusterConfig config;
  config.server = server.url();
  config.ca_pem = Read("ca.crt");
  config.token = "s3cret";
  auto response = Fetch(config);
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->status, 200);
  EXPECT_EQ(authorization, "Bearer s3cret");

  // Without the CA the self-made chain is rejected...
  config.ca_pem.clear();
  EXPECT_EQ(Fetch(config).status().code(), absl::StatusCode::kUnavailable);
  // ...unless verification is off.
  config.insecure_skip_tls_verify = true;
  EXPECT_TRUE(Fetch(config).ok());

  // Garbage CA material fails at construction with a clear error.
  config.ca_pem = "not a certificate";
  EXPECT_EQ(HttplibTransport::Create(config).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(TlsTest, PresentsTheClientCertificate) {
  ASSERT_TRUE(ok_) << Read("openssl.log");
  // The server demands a client certificate signed by the CA.
  ScriptedServer server(Path("server.crt"), Path("server.key"), Path("ca.crt"));
  std::string authorization;
  Serve(server, &authorization);

  ClusterConfig config;
  config.server = server.url();
  config.ca_pem = Read("ca.crt");
  EXPECT_FALSE(Fetch(config).ok());
  config.client_cert_pem = Read("client.crt");
  config.client_key_pem = Read("client.key");
  auto response = Fetch(config);
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->status, 200);
  EXPECT_TRUE(authorization.empty());

  config.client_key_pem = "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n";
  EXPECT_EQ(HttplibTransport::Create(config).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(TlsTest, KubeconfigWithFilesAndTokenFile) {
  ASSERT_TRUE(ok_) << Read("openssl.log");
  ScriptedServer server(Path("server.crt"), Path("server.key"), Path("ca.crt"));
  std::string authorization;
  Serve(server, &authorization);
  std::ofstream(Path("token")) << "from-file\n";
  std::ofstream(Path("kubeconfig"))
      << "clusters:\n- name: c\n  cluster:\n    server: " << server.url()
      << "\n    certificate-authority: ca.crt\n"
         "users:\n- name: u\n  user:\n"
         "    client-certificate: client.crt\n"
         "    client-key: client.key\n    tokenFile: token\n"
         "contexts:\n- name: x\n  context: {cluster: c, user: u}\n"
         "current-context: x\n";
  auto config = LoadKubeconfigFiles({Path("kubeconfig")});
  ASSERT_TRUE(config.ok()) << config.status();
  auto response = Fetch(*config);
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(authorization, "Bearer from-file");
}

}  // namespace
}  // namespace reverser::kube

namespace reverser::kube {
namespace {

TEST(TokenFileTest, RotatedTokenIsReReadAfterUnauthorized) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  std::string token_path = std::string(tmp ? tmp : "/tmp") + "/rotating-token";
  std::ofstream(token_path) << "old\n";
  testing::ScriptedServer server;
  std::mutex mu;
  std::vector<std::string> seen;
  server.server().Get("/version", [&](const httplib::Request& req, httplib::Response& res) {
    std::string auth = req.get_header_value("Authorization");
    {
      std::lock_guard lock(mu);
      seen.push_back(auth);
    }
    if (auth != "Bearer new") {
      res.status = 401;
      res.set_content(R"({"kind":"Status","apiVersion":"v1","code":401,"reason":"Unauthorized",)"
                      R"("message":"Unauthorized"})",
                      "application/json");
      return;
    }
    res.set_content("{}", "application/json");
  });
  server.Start();
  ClusterConfig config;
  config.server = server.url();
  config.token_file = token_path;
  auto transport = HttplibTransport::Create(config);
  ASSERT_TRUE(transport.ok());
  HttpRequest request;
  request.path = "/version";
  auto first = (*transport)->Send(request);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->status, 401);         // the file still holds the old token: no second attempt
  std::ofstream(token_path) << "new\n";  // rotated
  auto second = (*transport)->Send(request);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->status, 200);
  std::lock_guard lock(mu);
  EXPECT_EQ(seen, (std::vector<std::string>{"Bearer old", "Bearer old", "Bearer new"}));
}

}  // namespace
}  // namespace reverser::kube
