// Operators authenticated the Kubernetes way (--admin_auth=kubernetes, the default): reverserctl
// sends a bearer token; the catalog binary reviews it with a TokenReview and authorizes the call
// with a SubjectAccessReview on configbutler.ai reverser/admin, so the API server's RBAC decides.
// Real parts: kube-sim (tokens and RBAC), the catalog process with mutual TLS, the reverserctl
// binary.

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "tests/fixtures/certs.h"
#include "tests/fixtures/process.h"
#include "tests/fixtures/runfiles.h"
#include "tests/fixtures/service_process.h"
#include "tests/fixtures/temp_dir.h"
#include "tools/kube-sim/kube_sim.h"

namespace reverser {
namespace {

class OperatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto sim = kubesim::KubeSim::Start({});
    ASSERT_TRUE(sim.ok()) << sim.status();
    sim_ = *std::move(sim);
    // The catalog's own identity may do everything (system:masters), reviews included.
    sim_->authenticator().AddToken("catalog-token",
                                   {"system:serviceaccount:reverser:catalog", "uid-catalog",
                                    {"system:masters", "system:authenticated"}, {}});
    sim_->authenticator().AddToken("viewer-token",
                                   {"viewer@example.com", "uid-v", {"system:authenticated"}, {}});
    sim_->authenticator().AddToken("operator-token",
                                   {"operator@example.com", "uid-o", {"system:authenticated"}, {}});
    sim_->authenticator().AddToken("nobody-token",
                                   {"nobody@example.com", "uid-n", {"system:authenticated"}, {}});
    kubesim::RbacRule view;
    view.users = {"viewer@example.com"};
    view.verbs = {"get"};
    view.api_groups = {"configbutler.ai"};
    view.resources = {"reverser/admin"};
    sim_->authorizer().AddRule(view);
    kubesim::RbacRule operate = view;
    operate.users = {"operator@example.com"};
    operate.verbs = {"get", "update"};
    sim_->authorizer().AddRule(operate);

    const std::string kubeconfig = dir_.path() + "/kubeconfig";
    ASSERT_TRUE(sim_->WriteKubeconfig(kubeconfig, "catalog-token").ok());
    // The operator's own kubeconfig has a user without a token: only --token gives one.
    ASSERT_TRUE(sim_->WriteKubeconfig(dir_.path() + "/operator-kubeconfig", "").ok());
    auto pki = testing::MakeTestPki(dir_.path());
    ASSERT_TRUE(pki.ok()) << pki.status();
    pki_ = *pki;
    auto catalog_cert = testing::MakeMeshCert(pki_, "grpc-catalog", "reverser-catalog");
    ASSERT_TRUE(catalog_cert.ok()) << catalog_cert.status();
    auto admin_cert = testing::MakeMeshCert(pki_, "grpc-admin", "reverser-admin");
    ASSERT_TRUE(admin_cert.ok()) << admin_cert.status();
    admin_ = *admin_cert;
    auto service = testing::ServiceProcess::Start(
        "catalog", testing::RunfilePath("services/catalog/catalog"),
        {"--kubeconfig=" + kubeconfig, "--grpc_tls_ca=" + pki_.ca_cert,
         "--grpc_tls_cert=" + catalog_cert->cert, "--grpc_tls_key=" + catalog_cert->key});
    ASSERT_TRUE(service.ok()) << service.status();
    catalog_ = std::move(*service);
  }

  void TearDown() override {
    catalog_.reset();
    if (sim_) sim_->Stop();
  }

  // reverserctl as an operator with the admin certificate and `token` ("" = none).
  testing::CommandResult Ctl(const std::string& token, const std::string& command) {
    std::vector<std::string> argv = {
        testing::RunfilePath("tools/reverserctl/reverserctl"),
        "--catalog_addr=" + catalog_->grpc_target(), "--grpc_tls_ca=" + pki_.ca_cert,
        "--grpc_tls_cert=" + admin_.cert, "--grpc_tls_key=" + admin_.key,
        "--kubeconfig=" + dir_.path() + "/operator-kubeconfig", "--timeout=20s"};
    if (!token.empty()) argv.push_back("--token=" + token);
    argv.push_back(command);
    if (command == "status") argv.push_back("catalog");
    auto run = testing::RunCommand(argv);
    EXPECT_TRUE(run.ok()) << run.status();
    return run.value_or(testing::CommandResult{});
  }

  double Refused(const std::string& reason) {
    auto metrics = catalog_->HttpGet("/metrics");
    if (!metrics.ok()) return -1;
    const std::string series = absl::StrCat(
        "reverser_grpc_calls_refused_total{service=\"catalog\",reason=\"", reason, "\"} ");
    size_t at = metrics->second.find(series);
    if (at == std::string::npos) return 0;
    return std::stod(metrics->second.substr(at + series.size()));
  }

  testing::ScopedTempDir dir_{"operator"};
  std::unique_ptr<kubesim::KubeSim> sim_;
  testing::TestPki pki_;
  testing::CertPair admin_;
  std::unique_ptr<testing::ServiceProcess> catalog_;
};

TEST_F(OperatorTest, RbacDecidesWhoMayLookAndWhoMayChange) {
  // A user with get on reverser/admin may look, not rescan; one with update may do both.
  testing::CommandResult viewed = Ctl("viewer-token", "status");
  EXPECT_EQ(viewed.exit_code, 0) << viewed.err << catalog_->Logs();
  testing::CommandResult rescan_denied = Ctl("viewer-token", "rescan");
  EXPECT_NE(rescan_denied.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(rescan_denied.err, "PERMISSION_DENIED")) << rescan_denied.err;
  EXPECT_TRUE(absl::StrContains(
      rescan_denied.err, "user \"viewer@example.com\" may not update reverser/admin \"catalog\""))
      << rescan_denied.err;
  EXPECT_TRUE(absl::StrContains(rescan_denied.err, "verbs: [update]")) << rescan_denied.err;

  testing::CommandResult operated = Ctl("operator-token", "status");
  EXPECT_EQ(operated.exit_code, 0) << operated.err;
  // Rescan itself may wait on discovery; what matters is that the call got past the review.
  testing::CommandResult rescanned = Ctl("operator-token", "rescan");
  EXPECT_FALSE(absl::StrContains(rescanned.err, "PERMISSION_DENIED")) << rescanned.err;
  EXPECT_FALSE(absl::StrContains(rescanned.err, "UNAUTHENTICATED")) << rescanned.err;

  testing::CommandResult nobody = Ctl("nobody-token", "status");
  EXPECT_NE(nobody.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(nobody.err, "may not get reverser/admin")) << nobody.err;
  EXPECT_GE(Refused("rbac_denied"), 2);
}

TEST_F(OperatorTest, NoTokenOrAnInvalidOneIsUnauthenticated) {
  // A kubeconfig named but missing is the operator's mistake, said before any call.
  auto missing = testing::RunCommand(
      {testing::RunfilePath("tools/reverserctl/reverserctl"),
       "--catalog_addr=" + catalog_->grpc_target(), "--grpc_tls_ca=" + pki_.ca_cert,
       "--grpc_tls_cert=" + admin_.cert, "--grpc_tls_key=" + admin_.key,
       "--kubeconfig=" + dir_.path() + "/no-such-kubeconfig", "status", "catalog"});
  ASSERT_TRUE(missing.ok()) << missing.status();
  EXPECT_EQ(missing->exit_code, 2);
  EXPECT_TRUE(absl::StrContains(missing->err, "--kubeconfig")) << missing->err;

  testing::CommandResult none = Ctl("", "status");
  EXPECT_NE(none.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(none.err, "UNAUTHENTICATED")) << none.err;
  EXPECT_TRUE(absl::StrContains(none.err, "bearer token of a Kubernetes user")) << none.err;
  testing::CommandResult forged = Ctl("forged-token", "status");
  EXPECT_NE(forged.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(forged.err, "UNAUTHENTICATED")) << forged.err;
  EXPECT_TRUE(absl::StrContains(forged.err, "not valid")) << forged.err;
  EXPECT_EQ(Refused("no_token"), 1);
  EXPECT_EQ(Refused("token_invalid"), 1);
  // The token never reaches a log line.
  EXPECT_FALSE(absl::StrContains(catalog_->Logs(), "forged-token")) << catalog_->Logs();
}

}  // namespace
}  // namespace reverser
