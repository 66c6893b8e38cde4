#include "libs/kube/config.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "tests/fixtures/runfiles.h"

namespace reverser::kube {
namespace {

namespace fs = std::filesystem;
using reverser::testing::ReadTestdata;

class ConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* tmp = std::getenv("TEST_TMPDIR");
    dir_ = fs::path(tmp ? tmp : "/tmp") /
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }

  std::string Write(const std::string& name, const std::string& text) {
    fs::path path = dir_ / name;
    fs::create_directories(path.parent_path());
    std::ofstream(path) << text;
    return path.string();
  }

  EnvLookup Env(std::map<std::string, std::string> vars) {
    return [vars](const std::string& name) -> std::optional<std::string> {
      auto it = vars.find(name);
      if (it == vars.end()) return std::nullopt;
      return it->second;
    };
  }

  fs::path dir_;
};

constexpr char kTwoContexts[] = R"(apiVersion: v1
kind: Config
clusters:
- name: prod
  cluster:
    server: https://10.0.0.1:6443
    certificate-authority-data: )";

TEST_F(ConfigTest, ParsesInlineDataAndCurrentContext) {
  std::string yaml = absl::StrCat(kTwoContexts, absl::Base64Escape("CA-PEM"), R"(
- name: dev
  cluster:
    server: http://127.0.0.1:8080
    insecure-skip-tls-verify: true
users:
- name: admin
  user:
    client-certificate-data: )",
                                  absl::Base64Escape("CERT"), R"(
    client-key-data: )",
                                  absl::Base64Escape("KEY"), R"(
- name: bot
  user:
    token: abc.def
contexts:
- name: prod-admin
  context: {cluster: prod, user: admin, namespace: team-a}
- name: dev-bot
  context: {cluster: dev, user: bot}
current-context: prod-admin
)");
  auto prod = ParseKubeconfig(yaml, dir_.string());
  ASSERT_TRUE(prod.ok()) << prod.status();
  EXPECT_EQ(prod->server, "https://10.0.0.1:6443");
  EXPECT_EQ(prod->ca_pem, "CA-PEM");
  EXPECT_EQ(prod->client_cert_pem, "CERT");
  EXPECT_EQ(prod->client_key_pem, "KEY");
  EXPECT_EQ(prod->namespace_, "team-a");
  EXPECT_EQ(prod->context, "prod-admin");
  EXPECT_FALSE(prod->insecure_skip_tls_verify);

  auto dev = ParseKubeconfig(yaml, dir_.string(), {.context = "dev-bot"});
  ASSERT_TRUE(dev.ok()) << dev.status();
  EXPECT_EQ(dev->server, "http://127.0.0.1:8080");
  EXPECT_TRUE(dev->insecure_skip_tls_verify);
  EXPECT_EQ(dev->token, "abc.def");
  EXPECT_TRUE(dev->ca_pem.empty());

  EXPECT_EQ(ParseKubeconfig(yaml, dir_.string(), {.context = "nope"}).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(ConfigTest, ReadsRelativeFilesBesideTheKubeconfig) {
  Write("certs/ca.crt", "CA FROM FILE");
  Write("certs/client.crt", "CERT FROM FILE");
  Write("certs/client.key", "KEY FROM FILE");
  std::string path = Write("kubeconfig", R"(clusters:
- name: c
  cluster: {server: "https://k:443", certificate-authority: certs/ca.crt}
users:
- name: u
  user: {client-certificate: certs/client.crt, client-key: certs/client.key, tokenFile: tok}
contexts:
- name: x
  context: {cluster: c, user: u}
current-context: x
)");
  auto config = LoadKubeconfigFiles({path});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->ca_pem, "CA FROM FILE");
  EXPECT_EQ(config->client_cert_pem, "CERT FROM FILE");
  EXPECT_EQ(config->client_key_pem, "KEY FROM FILE");
  EXPECT_EQ(config->token_file, (dir_ / "tok").string());
}

TEST_F(ConfigTest, MergesKubeconfigListFirstDefinitionWins) {
  std::string first = Write("a.yaml", R"(clusters:
- name: c
  cluster: {server: "https://first"}
current-context: ctx
)");
  std::string second = Write("b.yaml", R"(clusters:
- name: c
  cluster: {server: "https://second"}
users:
- name: u
  user: {token: t2}
contexts:
- name: ctx
  context: {cluster: c, user: u}
- name: other
  context: {cluster: c, user: u}
current-context: other
)");
  auto config = LoadDefaultConfig(
      "", {},
      Env({{"KUBECONFIG", absl::StrCat(first, ":", (dir_ / "missing").string(), ":", second)}}));
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->server, "https://first");
  EXPECT_EQ(config->context, "ctx");
  EXPECT_EQ(config->token, "t2");
}

TEST_F(ConfigTest, ReadsTheAuditWebhookKubeconfigFromTheReferenceData) {
  auto config = ParseKubeconfig(
      ReadTestdata("k8s/audit/config/gitops-reverser-e2e-audit-webhook-kubeconfig.yaml"),
      dir_.string());
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->server, "https://127.0.0.1:30444/audit-webhook/default");
  EXPECT_TRUE(config->insecure_skip_tls_verify);
}

TEST_F(ConfigTest, BadInputGivesClearErrors) {
  EXPECT_EQ(ParseKubeconfig("clusters: [unclosed", "").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseKubeconfig("- a\n- b\n", "").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseKubeconfig("clusters: 7\n", "").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseKubeconfig("", "").status().code(), absl::StatusCode::kFailedPrecondition);
  // Inputs that made yaml-cpp 0.7 (the reader before libyaml) allocate without bound (found by
  // libs/manifest's fuzzing) fail cleanly.
  for (const char* text : {",|a", ",piVersion: v1\nk: Secret\n{etadata:\n  name> ,est@-se"}) {
    EXPECT_FALSE(ParseKubeconfig(text, "").ok()) << text;
  }
  // Context pointing at a missing cluster.
  EXPECT_EQ(
      ParseKubeconfig("contexts: [{name: x, context: {cluster: c}}]\ncurrent-context: x\n", "")
          .status()
          .code(),
      absl::StatusCode::kNotFound);
  // Bad base64, missing CA file, cert without key, exec plugins.
  std::string base = "contexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n";
  EXPECT_EQ(ParseKubeconfig(base + "clusters: [{name: c, cluster: {server: s, "
                                   "certificate-authority-data: '!!!'}}]\nusers: [{name: u}]\n",
                            "")
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      ParseKubeconfig(base + "clusters: [{name: c, cluster: {server: s, "
                             "certificate-authority: /nonexistent/ca}}]\nusers: [{name: u}]\n",
                      "")
          .status()
          .code(),
      absl::StatusCode::kNotFound);
  EXPECT_EQ(ParseKubeconfig(base + "clusters: [{name: c, cluster: {server: s}}]\n"
                                   "users: [{name: u, user: {client-certificate-data: QQ==}}]\n",
                            "")
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseKubeconfig(base + "clusters: [{name: c, cluster: {server: s}}]\n"
                                   "users: [{name: u, user: {exec: {command: x}}}]\n",
                            "")
                .status()
                .code(),
            absl::StatusCode::kUnimplemented);
  EXPECT_EQ(ParseKubeconfig(base + "clusters: [{name: c, cluster: {server: s, "
                                   "insecure-skip-tls-verify: maybe}}]\nusers: [{name: u}]\n",
                            "")
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(ConfigTest, InClusterFromServiceAccountFiles) {
  Write("sa/token", "sa-token\n");
  Write("sa/ca.crt", "SA CA");
  Write("sa/namespace", "reverser-system\n");
  auto env = Env({{"KUBERNETES_SERVICE_HOST", "10.96.0.1"}, {"KUBERNETES_SERVICE_PORT", "443"}});
  auto config = InClusterConfig(env, (dir_ / "sa").string());
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->server, "https://10.96.0.1:443");
  EXPECT_EQ(config->token_file, (dir_ / "sa/token").string());
  EXPECT_EQ(config->ca_pem, "SA CA");
  EXPECT_EQ(config->namespace_, "reverser-system");

  auto v6 = InClusterConfig(
      Env({{"KUBERNETES_SERVICE_HOST", "fd00::1"}, {"KUBERNETES_SERVICE_PORT", "6443"}}),
      (dir_ / "sa").string());
  ASSERT_TRUE(v6.ok());
  EXPECT_EQ(v6->server, "https://[fd00::1]:6443");

  // LoadDefaultConfig picks in-cluster when no kubeconfig is configured.
  auto chosen = LoadDefaultConfig("", {}, env, (dir_ / "sa").string());
  ASSERT_TRUE(chosen.ok()) << chosen.status();
  EXPECT_EQ(chosen->server, "https://10.96.0.1:443");

  EXPECT_EQ(InClusterConfig(Env({}), (dir_ / "sa").string()).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(InClusterConfig(env, (dir_ / "missing").string()).status().code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace reverser::kube

namespace reverser::kube {
namespace {

// Deterministic mutations of a valid kubeconfig: every result must parse or fail cleanly.
TEST(KubeconfigFuzzTest, MutatedKubeconfigsParseOrFailCleanly) {
  const std::string seed = R"(apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "https://k:443", insecure-skip-tls-verify: true}
users:
- name: u
  user: {token: abc}
contexts:
- name: x
  context: {cluster: c, user: u, namespace: ns}
current-context: x
)";
  const std::string alphabet = ",|:{}[]-?&*!%@`'\"#>\n \t";
  uint64_t state = 42;
  auto next = [&] {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<size_t>(state >> 33);
  };
  int parsed = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string text = seed;
    for (int m = 0, n = 1 + next() % 4; m < n; ++m) {
      size_t at = next() % text.size();
      switch (next() % 3) {
        case 0:
          text[at] = alphabet[next() % alphabet.size()];
          break;
        case 1:
          text.insert(at, 1, alphabet[next() % alphabet.size()]);
          break;
        default:
          text.erase(at, 1 + next() % 8);
          break;
      }
      if (text.empty()) text = ",";
    }
    if (ParseKubeconfig(text, "").ok()) ++parsed;
  }
  EXPECT_GT(parsed, 0);
}

}  // namespace
}  // namespace reverser::kube
