// The materializer binary's audit webhook admits the API server only: a client certificate from
// the configured CA that carries another name cannot post events (it could forge authors), is
// answered 403 and counted, and the webhook goes on serving the real client. Real parts: the
// materializer process, redis-server, kube-sim, certificates made by the openssl CLI.

#include "absl/strings/match.h"
#include "absl/strings/strip.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "tests/fixtures/audit_events.h"
#include "tests/fixtures/certs.h"
#include "tests/fixtures/process.h"
#include "tests/fixtures/redis_server.h"
#include "tests/fixtures/service_process.h"
#include "tests/fixtures/temp_dir.h"
#include "tools/kube-sim/kube_sim.h"

namespace reverser {
namespace {

// One accepted update of ConfigMap team/`name` by `user`.
std::string EventListBy(const std::string& user, const std::string& name) {
  return testing::AuditEventList({testing::AuditConfigMapUpdate("id-" + name, name, user)});
}

class AuditClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto redis = testing::RedisServer::Start();
    ASSERT_TRUE(redis.ok()) << redis.status();
    redis_ = std::move(*redis);
    auto sim = kubesim::KubeSim::Start({});
    ASSERT_TRUE(sim.ok()) << sim.status();
    sim_ = std::move(*sim);
    ASSERT_TRUE(sim_->WriteKubeconfig(dir_.path() + "/kubeconfig").ok());
    auto pki = testing::MakeTestPki(dir_.path());  // its client: CN=kube-apiserver
    ASSERT_TRUE(pki.ok()) << pki.status();
    pki_ = *pki;
    auto port = testing::PickFreePort();
    ASSERT_TRUE(port.ok());
    audit_port_ = *port;
    auto service = testing::ServiceProcess::Start(
        "materializer", testing::RunfilePath("services/materializer/materializer"),
        {"--kubeconfig=" + dir_.path() + "/kubeconfig", "--redis_address=" + redis_->address(),
         "--static_claims=v1/configmaps@team", "--audit_port=" + std::to_string(audit_port_),
         "--audit_tls_cert=" + pki_.server_cert, "--audit_tls_key=" + pki_.server_key,
         "--audit_client_ca=" + pki_.ca_cert});  // --audit_client_names left at its default
    ASSERT_TRUE(service.ok()) << service.status();
    service_ = std::move(*service);
    ASSERT_TRUE(service_->WaitReady().ok()) << service_->Logs();
  }

  void TearDown() override {
    if (!service_) return;
    sim_.reset();
    auto stopped = service_->process().Terminate();
    EXPECT_TRUE(stopped.ok()) << stopped.status();
  }

  httplib::Result Post(const testing::CertPair& client, const std::string& body) {
    return testing::PostWithClientCert(pki_, client, audit_port_, "/audit-webhook", body);
  }

  std::string FactFor(const std::string& name) {
    auto fact =
        redis_->Cli({"GET", testing::AuditConfigMapUpdateFactKey(name)});
    return fact.ok() ? std::string(absl::StripAsciiWhitespace(*fact)) : "";
  }

  testing::ScopedTempDir dir_{"audit-client"};
  testing::TestPki pki_;
  std::unique_ptr<testing::RedisServer> redis_;
  std::unique_ptr<kubesim::KubeSim> sim_;
  std::unique_ptr<testing::ServiceProcess> service_;
  int audit_port_ = 0;
};

TEST_F(AuditClientTest, ACertificateFromTheRightCaWithAForeignNameCannotForgeAnAuthor) {
  auto impostor = testing::MakeClientCert(pki_, "impostor", "system:node:worker-1",
                                          "DNS:worker-1.cluster.local");
  ASSERT_TRUE(impostor.ok()) << impostor.status();
  auto refused = Post(*impostor, EventListBy("forged-admin", "forged"));
  ASSERT_TRUE(refused) << httplib::to_string(refused.error());
  EXPECT_EQ(refused->status, 403) << refused->body;
  EXPECT_TRUE(absl::StrContains(refused->body, "system:node:worker-1")) << refused->body;
  EXPECT_EQ(FactFor("forged"), "");
  EXPECT_TRUE(absl::StrContains(service_->Logs(), "audit client refused")) << service_->Logs();

  // The API server's certificate is still served, on the same listener.
  auto accepted = Post({pki_.client_cert, pki_.client_key}, EventListBy("alice", "real"));
  ASSERT_TRUE(accepted) << httplib::to_string(accepted.error());
  EXPECT_EQ(accepted->status, 200) << accepted->body;
  EXPECT_TRUE(absl::StrContains(FactFor("real"), "\"author\":\"alice\"")) << FactFor("real");

  auto metrics = service_->HttpGet("/metrics");
  ASSERT_TRUE(metrics.ok());
  EXPECT_TRUE(absl::StrContains(
      metrics->second,
      "reverser_materializer_audit_bodies_refused_total{reason=\"client_not_allowed\"} 1"))
      << metrics->second;
}

}  // namespace
}  // namespace reverser
