// The gRPC mesh with mutual TLS on, as a cluster runs it: the gitworker binary (the service that
// holds Git credentials) against callers with no TLS, no certificate, the wrong role and the
// right one; and certificate files rotated under a running service. Real parts: the gitworker
// process, certificates made by the openssl CLI, gRPC clients with TLS.

#include <grpcpp/grpcpp.h>

#include <filesystem>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "libs/runtime/grpc_security.h"
#include "proto/grpc/health/v1/health.grpc.pb.h"
#include "proto/reverser/v1/gitworker.grpc.pb.h"
#include "tests/fixtures/certs.h"
#include "tests/fixtures/process.h"
#include "tests/fixtures/service_process.h"
#include "tests/fixtures/temp_dir.h"

namespace reverser {
namespace {

class MeshTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto pki = testing::MakeTestPki(dir_.path());
    ASSERT_TRUE(pki.ok()) << pki.status();
    pki_ = *pki;
    for (const char* role : {"gitworker", "splicer", "materializer", "admin"}) {
      auto cert = testing::MakeMeshCert(pki_, std::string("grpc-") + role,
                                        std::string("reverser-") + role);
      ASSERT_TRUE(cert.ok()) << cert.status();
      certs_[role] = *cert;
    }
    // The gitworker reads its files from here: the rotation test replaces them.
    served_ = dir_.path() + "/served";
    std::filesystem::create_directories(served_);
    Copy(pki_.ca_cert, served_ + "/ca.crt");
    Copy(certs_["gitworker"].cert, served_ + "/tls.crt");
    Copy(certs_["gitworker"].key, served_ + "/tls.key");
    auto service = testing::ServiceProcess::Start(
        "gitworker", testing::RunfilePath("services/gitworker/gitworker"),
        {"--work_dir=" + dir_.path() + "/work", "--grpc_tls_ca=" + served_ + "/ca.crt",
         "--grpc_tls_cert=" + served_ + "/tls.crt", "--grpc_tls_key=" + served_ + "/tls.key",
         "--grpc_tls_reload_interval=1s",
         // Operators here are known by their certificate: tests/security/operator_test.cc
         // covers the Kubernetes review of their tokens.
         "--admin_auth=certificate"});
    ASSERT_TRUE(service.ok()) << service.status();
    service_ = std::move(*service);
  }

  static void Copy(const std::string& from, const std::string& to) {
    std::filesystem::copy_file(from, to, std::filesystem::copy_options::overwrite_existing);
  }

  // A channel with mutual TLS as `role` ("" = TLS without a client certificate).
  std::shared_ptr<grpc::Channel> Channel(const std::string& role, const std::string& ca = "") {
    runtime::GrpcSecurity security;
    security.ca_file = ca.empty() ? pki_.ca_cert : ca;
    if (role.empty()) {
      grpc::experimental::TlsChannelCredentialsOptions options;
      auto provider = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
          security.ca_file, 1);
      options.set_certificate_provider(provider);
      options.watch_root_certs();
      return grpc::CreateChannel(service_->grpc_target(),
                                 grpc::experimental::TlsCredentials(options));
    }
    security.cert_file = certs_[role].cert;
    security.key_file = certs_[role].key;
    return grpc::CreateChannel(service_->grpc_target(),
                               runtime::MeshChannelCredentials(security));
  }

  static grpc::Status Status(const std::shared_ptr<grpc::Channel>& channel) {
    auto stub = reverser::v1::GitWorkerAdmin::NewStub(channel);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    reverser::v1::ServiceStatus status;
    return stub->Status(&context, {}, &status);
  }

  // Opens Deliver and sends a target configuration naming a remote; the first feedback's status.
  static grpc::Status Deliver(const std::shared_ptr<grpc::Channel>& channel,
                              bool* accepted = nullptr) {
    auto stub = reverser::v1::GitWorker::NewStub(channel);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    auto stream = stub->Deliver(&context);
    reverser::v1::DeliveryMessage message;
    message.set_sequence(1);
    auto* config = message.mutable_target_config();
    config->mutable_target()->set_namespace_("team");
    config->mutable_target()->set_name("t");
    config->mutable_target()->set_uid("t-uid");
    config->mutable_destination()->set_provider_namespace("team");
    config->mutable_destination()->set_provider_name("repo");
    config->mutable_destination()->set_branch("main");
    config->set_remote_url("https://attacker.example/loot.git");
    stream->Write(message);
    reverser::v1::DeliveryFeedback feedback;
    const bool read = stream->Read(&feedback);
    if (accepted != nullptr) *accepted = read && feedback.accepted_sequence() == 1;
    stream->WritesDone();
    if (read) context.TryCancel();
    grpc::Status status = stream->Finish();
    return read ? grpc::Status::OK : status;
  }

  double Refused(const std::string& reason) {
    auto metrics = service_->HttpGet("/metrics");
    if (!metrics.ok()) return -1;
    const std::string series = "reverser_grpc_calls_refused_total{service=\"gitworker\",reason=\"" +
                               reason + "\"} ";
    size_t at = metrics->second.find(series);
    if (at == std::string::npos) return 0;
    return std::stod(metrics->second.substr(at + series.size()));
  }

  testing::ScopedTempDir dir_{"mesh"};
  testing::TestPki pki_;
  std::map<std::string, testing::CertPair> certs_;
  std::string served_;
  std::unique_ptr<testing::ServiceProcess> service_;
};

TEST_F(MeshTest, PlaintextAndCertificatelessCallersAreRefused) {
  auto plaintext = grpc::CreateChannel(service_->grpc_target(), grpc::InsecureChannelCredentials());
  EXPECT_EQ(Status(plaintext).error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(Deliver(plaintext).error_code(), grpc::StatusCode::UNAVAILABLE);

  grpc::Status anonymous = Status(Channel(""));
  EXPECT_EQ(anonymous.error_code(), grpc::StatusCode::UNAUTHENTICATED) << anonymous.error_message();
  EXPECT_TRUE(absl::StrContains(anonymous.error_message(), "client certificate"));
  EXPECT_EQ(Deliver(Channel("")).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(Refused("unauthenticated"), 2);
  // Health over TLS needs a mesh certificate too.
  auto health = grpc::health::v1::Health::NewStub(Channel(""));
  grpc::ClientContext context;
  grpc::health::v1::HealthCheckResponse response;
  EXPECT_EQ(health->Check(&context, {}, &response).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
}

TEST_F(MeshTest, OnlyTheSplicerMayDeliverAndOnlyAnOperatorMayAdminister) {
  for (const char* role : {"materializer", "admin", "gitworker"}) {
    grpc::Status denied = Deliver(Channel(role));
    EXPECT_EQ(denied.error_code(), grpc::StatusCode::PERMISSION_DENIED) << role;
    EXPECT_TRUE(absl::StrContains(denied.error_message(), "may be called by reverser-splicer"))
        << denied.error_message();
  }
  bool accepted = false;
  EXPECT_TRUE(Deliver(Channel("splicer"), &accepted).ok());
  EXPECT_TRUE(accepted);

  EXPECT_EQ(Status(Channel("splicer")).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_TRUE(Status(Channel("admin")).ok());
  EXPECT_EQ(Refused("permission_denied"), 4);
  EXPECT_TRUE(absl::StrContains(service_->Logs(), "grpc call refused")) << service_->Logs();
}

TEST_F(MeshTest, RotatedCertificatesApplyWithoutARestart) {
  ASSERT_TRUE(Status(Channel("admin")).ok());
  // A new CA and new certificates, written over the served files (as cert-manager does).
  testing::ScopedTempDir next_dir("mesh-next");
  auto next = testing::MakeTestPki(next_dir.path());
  ASSERT_TRUE(next.ok()) << next.status();
  auto gitworker = testing::MakeMeshCert(*next, "grpc-gitworker", "reverser-gitworker");
  auto admin = testing::MakeMeshCert(*next, "grpc-admin", "reverser-admin");
  ASSERT_TRUE(gitworker.ok() && admin.ok());
  Copy(gitworker->key, served_ + "/tls.key");
  Copy(gitworker->cert, served_ + "/tls.crt");
  Copy(next->ca_cert, served_ + "/ca.crt");
  runtime::GrpcSecurity rotated{false, next->ca_cert, admin->cert, admin->key};
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        auto channel =
            grpc::CreateChannel(service_->grpc_target(), runtime::MeshChannelCredentials(rotated));
        return Status(channel).ok();
      },
      absl::Seconds(30)))
      << service_->Logs();
  // The old CA's certificates no longer get in.
  EXPECT_FALSE(Status(Channel("admin")).ok());
}

}  // namespace
}  // namespace reverser
