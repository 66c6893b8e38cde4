// HTTPS serving and the audit webhook over mTLS, with a throwaway PKI (genrule :test_pki).

#include <mutex>
#include <thread>

#include "gtest/gtest.h"
#include "httplib.h"
#include "tools/kube-sim/kube_sim.h"

namespace reverser::kubesim {
namespace {

const std::string kPki = "tools/kube-sim/pki/";

TEST(TlsTest, ServesHttpsVerifiableWithTheCa) {
  KubeSimOptions o;
  o.tls_cert_file = kPki + "server.crt";
  o.tls_key_file = kPki + "server.key";
  auto sim = KubeSim::Start(o);
  ASSERT_TRUE(sim.ok()) << sim.status();
  EXPECT_EQ((*sim)->url().rfind("https://127.0.0.1:", 0), 0u);
  httplib::SSLClient client("127.0.0.1", (*sim)->port());
  client.set_ca_cert_path((kPki + "ca.crt").c_str());
  client.enable_server_certificate_verification(true);
  auto res = client.Get("/version");
  ASSERT_TRUE(res) << httplib::to_string(res.error());
  EXPECT_EQ(res->status, 200);
  EXPECT_NE((*sim)->Kubeconfig().find("insecure-skip-tls-verify: true"), std::string::npos);
}

// An HTTPS receiver that requires a client certificate signed by the test CA.
class MtlsReceiver {
 public:
  MtlsReceiver()
      : server_((kPki + "server.crt").c_str(), (kPki + "server.key").c_str(),
                (kPki + "ca.crt").c_str()) {
    server_.Post("/audit", [this](const httplib::Request& req, httplib::Response&) {
      std::lock_guard lock(mu_);
      ++posts_;
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
  }
  ~MtlsReceiver() {
    server_.stop();
    thread_.join();
  }
  std::string url() const { return "https://127.0.0.1:" + std::to_string(port_) + "/audit"; }
  int posts() {
    std::lock_guard lock(mu_);
    return posts_;
  }

 private:
  httplib::SSLServer server_;
  std::thread thread_;
  int port_ = 0;
  std::mutex mu_;
  int posts_ = 0;
};

TEST(TlsTest, AuditWebhookWithClientCertificate) {
  MtlsReceiver receiver;
  KubeSimOptions o;
  o.audit_webhook = AuditWebhookOptions{.url = receiver.url(),
                                        .ca_file = kPki + "ca.crt",
                                        .client_cert_file = kPki + "client.crt",
                                        .client_key_file = kPki + "client.key",
                                        .max_wait = absl::Milliseconds(10)};
  auto sim = KubeSim::Start(o);
  ASSERT_TRUE(sim.ok());
  (*sim)->Call("GET", "/api/v1/namespaces");
  ASSERT_TRUE((*sim)->audit()->WaitIdle(absl::Seconds(10)));
  EXPECT_EQ((*sim)->audit()->stats().failed_attempts, 0);
  EXPECT_GE(receiver.posts(), 1);
}

TEST(TlsTest, AuditWebhookWithoutClientCertificateIsRetriedThenDropped) {
  MtlsReceiver receiver;
  KubeSimOptions o;
  o.audit_webhook = AuditWebhookOptions{.url = receiver.url(),
                                        .ca_file = kPki + "ca.crt",
                                        .max_wait = absl::Milliseconds(10),
                                        .initial_backoff = absl::Milliseconds(5),
                                        .backoff_steps = 2};
  auto sim = KubeSim::Start(o);
  ASSERT_TRUE(sim.ok());
  (*sim)->Call("GET", "/api/v1/namespaces");
  ASSERT_TRUE((*sim)->audit()->WaitIdle(absl::Seconds(10)));
  EXPECT_EQ(receiver.posts(), 0);
  EXPECT_EQ((*sim)->audit()->stats().failed_attempts, 2);
  EXPECT_GT((*sim)->audit()->stats().events_dropped, 0);
}

}  // namespace
}  // namespace reverser::kubesim
