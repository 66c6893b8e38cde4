// DeliveryClient over the mesh's mutual TLS, as a routed splicer dials a gitworker replica: by
// an address (127.0.0.1, as a pod IP) its certificate does not name. The certificate names only
// the gitworker Service's DNS name; the delivery reaches the gitworker only when the client
// checks that name (--gitworker_tls_server_name). Real parts: certificates made by the openssl
// CLI, gRPC with the mesh's credentials and call authorization.

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "libs/runtime/grpc_security.h"
#include "libs/runtime/metrics.h"
#include "services/splicer/delivery_client.h"
#include "services/splicer/test_support.h"
#include "tests/fixtures/certs.h"
#include "tests/fixtures/temp_dir.h"

namespace reverser::splicer {
namespace {

constexpr char kServiceName[] = "reverser-gitworker.reverser.svc";

class DeliveryClientTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto pki = testing::MakeTestPki(dir_.path());
    ASSERT_TRUE(pki.ok()) << pki.status();
    auto gitworker = testing::MakeMeshCert(*pki, "grpc-gitworker", "reverser-gitworker",
                                           absl::StrCat("DNS:", kServiceName));
    ASSERT_TRUE(gitworker.ok()) << gitworker.status();
    auto splicer = testing::MakeMeshCert(*pki, "grpc-splicer", "reverser-splicer");
    ASSERT_TRUE(splicer.ok()) << splicer.status();
    runtime::GrpcSecurity server_security;
    server_security.ca_file = pki->ca_cert;
    server_security.cert_file = gitworker->cert;
    server_security.key_file = gitworker->key;
    grpc::ServerBuilder builder;
    builder.AddListeningPort(
        "127.0.0.1:0", runtime::MeshServerCredentials(server_security, "gitworker", &metrics_),
        &port_);
    builder.RegisterService(&gitworker_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(port_, 0);
    client_security_.ca_file = pki->ca_cert;
    client_security_.cert_file = splicer->cert;
    client_security_.key_file = splicer->key;
  }
  void TearDown() override {
    if (server_) server_->Shutdown(std::chrono::system_clock::now());
  }

  // Starts a client dialing 127.0.0.1 and sends one message (retried while the stream is down).
  void Deliver(DeliveryClient& client, absl::Duration within) {
    client.Start();
    const absl::Time deadline = absl::Now() + within;
    while (absl::Now() < deadline && gitworker_.Received() == 0) {
      if (client.WaitConnected(absl::Milliseconds(200))) {
        reverser::v1::DeliveryMessage message;
        message.mutable_target_config()->mutable_target()->set_uid("t0");
        (void)client.Send(message, absl::Seconds(1));
      }
      absl::SleepFor(absl::Milliseconds(100));
    }
  }

  testing::ScopedTempDir dir_{"delivery-tls"};
  runtime::MetricsRegistry metrics_;
  testutil::AckingGitWorker gitworker_;  // acks every message, counts them
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  runtime::GrpcSecurity client_security_;
};

TEST_F(DeliveryClientTlsTest, ChannelArgumentsCarryTheNameOnlyWhenSet) {
  grpc::ChannelArguments plain_args = GitworkerChannelArguments("");
  grpc_channel_args plain = plain_args.c_channel_args();
  for (size_t i = 0; i < plain.num_args; ++i) {
    EXPECT_STRNE(plain.args[i].key, GRPC_SSL_TARGET_NAME_OVERRIDE_ARG);
  }
  grpc::ChannelArguments named_args = GitworkerChannelArguments(kServiceName);
  grpc_channel_args named = named_args.c_channel_args();
  bool found = false;
  for (size_t i = 0; i < named.num_args; ++i) {
    if (std::string(named.args[i].key) == GRPC_SSL_TARGET_NAME_OVERRIDE_ARG) {
      found = true;
      EXPECT_STREQ(named.args[i].value.string, kServiceName);
    }
  }
  EXPECT_TRUE(found);
}

TEST_F(DeliveryClientTlsTest, WithoutTheNameTheCertificateIsRefused) {
  DeliveryClient client(absl::StrCat("127.0.0.1:", port_), 10,
                        runtime::MeshChannelCredentials(client_security_));
  Deliver(client, absl::Seconds(3));
  client.Stop();
  EXPECT_EQ(gitworker_.Received(), 0) << "a certificate not naming 127.0.0.1 was accepted for it";
}

TEST_F(DeliveryClientTlsTest, WithTheServiceNameTheReplicaIsReachedByItsAddress) {
  DeliveryClient client(absl::StrCat("127.0.0.1:", port_), 10,
                        runtime::MeshChannelCredentials(client_security_), kServiceName);
  Deliver(client, absl::Seconds(30));
  client.Stop();
  EXPECT_GE(gitworker_.Received(), 1);
}

}  // namespace
}  // namespace reverser::splicer
