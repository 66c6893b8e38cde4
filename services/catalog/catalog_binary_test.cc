// The catalog binary as a real process against kube-sim: flags, readiness once the CRDs are
// installed, metrics, and clear failures for bad flags or a missing cluster configuration.

#include <grpcpp/grpcpp.h>

#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "proto/reverser/v1/catalog.grpc.pb.h"
#include "tests/fixtures/process.h"
#include "tests/fixtures/service_process.h"
#include "tests/fixtures/temp_dir.h"
#include "tools/kube-sim/kube_sim.h"

namespace reverser::catalog {
namespace {

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

class CatalogBinaryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto sim = kubesim::KubeSim::Start({});
    ASSERT_TRUE(sim.ok()) << sim.status();
    sim_ = *std::move(sim);
    kubeconfig_ = dir_.path() + "/kubeconfig";
    ASSERT_TRUE(sim_->WriteKubeconfig(kubeconfig_).ok());
  }
  void TearDown() override {
    if (sim_) sim_->Stop();
  }

  void InstallCrds() {
    for (const char* plural :
         {"gitproviders", "gittargets", "watchrules", "clusterwatchrules", "commitrequests"}) {
      auto r = sim_->Call("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                          ReadText(absl::StrCat("deploy/crds/configbutler.ai_", plural, ".yaml")),
                          "application/yaml");
      ASSERT_EQ(r.status, 201) << r.body;
    }
  }

  std::string Binary() const { return testing::RunfilePath("services/catalog/catalog"); }

  testing::ScopedTempDir dir_{"catalog-bin"};
  std::string kubeconfig_;
  std::unique_ptr<kubesim::KubeSim> sim_;
};

TEST_F(CatalogBinaryTest, BecomesReadyOnceTheCrdsAreInstalled) {
  auto service = testing::ServiceProcess::Start(
      "catalog", Binary(),
      {"--kubeconfig=" + kubeconfig_, "--discovery_refresh_period=1s",
       "--additional_sensitive_resources=example.com/tokens,configmaps"});
  ASSERT_TRUE(service.ok()) << service.status();
  testing::ServiceProcess& s = **service;

  // Without the CRDs the watches cannot list: live but not ready, and /readyz says why.
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        auto readyz = s.HttpGet("/readyz");
        return readyz.ok() && absl::StrContains(readyz->second, "[+] discovery");
      },
      absl::Seconds(20)));
  auto readyz = s.HttpGet("/readyz");
  ASSERT_TRUE(readyz.ok());
  EXPECT_EQ(readyz->first, 503);
  EXPECT_TRUE(absl::StrContains(readyz->second, "[-] watches")) << readyz->second;
  // Types are already served while the catalog waits for its CRDs.
  auto channel = grpc::CreateChannel(s.grpc_target(), grpc::InsecureChannelCredentials());
  auto catalog = reverser::v1::Catalog::NewStub(channel);
  {
    grpc::ClientContext context;
    reverser::v1::ListTypesResponse types;
    ASSERT_TRUE(catalog->ListTypes(&context, {}, &types).ok());
    EXPECT_GT(types.records_size(), 10);
  }

  InstallCrds();
  ASSERT_TRUE(s.WaitReady().ok()) << s.HttpGet("/readyz")->second;
  auto metrics = s.HttpGet("/metrics");
  ASSERT_TRUE(metrics.ok());
  EXPECT_TRUE(absl::StrContains(metrics->second, "gitopsreverser_api_catalog_refresh_total"));
  EXPECT_TRUE(absl::StrContains(metrics->second, "gitopsreverser_api_catalog_resources"));

  // The extra sensitive entry shows on the type record.
  grpc::ClientContext context;
  reverser::v1::GetTypeRequest request;
  request.mutable_gvr()->set_version("v1");
  request.mutable_gvr()->set_resource("configmaps");
  reverser::v1::TypeRecord record;
  ASSERT_TRUE(catalog->GetType(&context, request, &record).ok());
  EXPECT_TRUE(record.sensitive());

  auto exit_status = s.process().Terminate(absl::Seconds(5));
  ASSERT_TRUE(exit_status.ok());
  EXPECT_TRUE(WIFEXITED(*exit_status));
  EXPECT_EQ(WEXITSTATUS(*exit_status), 0);
}

TEST_F(CatalogBinaryTest, AFailedFirstDiscoveryPassIsRetriedWithoutWaitingThePeriod) {
  InstallCrds();
  // The first pass fails: /api and /apis answer 500 once each (without Retry-After the client
  // does not retry). The period is an hour, so only the catalog's own retry makes it ready.
  sim_->faults().Add({.action = kubesim::FaultRule::Action::kInternalError,
                      .verb = "get",
                      .path_prefix = "/api",
                      .times = 2});
  auto service = testing::ServiceProcess::Start(
      "catalog", Binary(), {"--kubeconfig=" + kubeconfig_, "--discovery_refresh_period=1h"});
  ASSERT_TRUE(service.ok()) << service.status();
  testing::ServiceProcess& s = **service;
  absl::Status ready = s.WaitReady();
  ASSERT_TRUE(ready.ok()) << ready;
  auto metrics = s.HttpGet("/metrics");
  ASSERT_TRUE(metrics.ok());
  EXPECT_TRUE(absl::StrContains(metrics->second, "reverser_catalog_refresh_failures_total 1"))
      << metrics->second;
}

TEST_F(CatalogBinaryTest, BadFlagsAndMissingConfigFailClearly) {
  auto bad_sensitive = testing::RunCommand(
      {Binary(), "--kubeconfig=" + kubeconfig_, "--grpc_port=0", "--http_port=0",
       "--additional_sensitive_resources=a/b/c"});
  ASSERT_TRUE(bad_sensitive.ok());
  EXPECT_NE(bad_sensitive->exit_code, 0);
  EXPECT_TRUE(absl::StrContains(bad_sensitive->err, "additional_sensitive_resources"))
      << bad_sensitive->err;

  auto missing = testing::RunCommand({Binary(), "--kubeconfig=" + dir_.path() + "/absent",
                                      "--grpc_port=0", "--http_port=0"},
                                     "", "", {{"KUBECONFIG", ""}, {"HOME", dir_.path()}});
  ASSERT_TRUE(missing.ok());
  EXPECT_NE(missing->exit_code, 0);
  EXPECT_TRUE(absl::StrContains(missing->err, "no Kubernetes API configuration")) << missing->err;
}

}  // namespace
// What a caller can make the catalog read is bounded (16 MiB; only the gitworker reads resyncs):
// an oversized request is refused before any handler, and the service keeps serving.
TEST_F(CatalogBinaryTest, AnOversizedRequestIsRefusedAndTheServiceKeepsServing) {
  auto service = testing::ServiceProcess::Start(
      "catalog", Binary(), {"--kubeconfig=" + kubeconfig_, "--discovery_refresh_period=1h"});
  ASSERT_TRUE(service.ok()) << service.status();
  testing::ServiceProcess& s = **service;
  grpc::ChannelArguments args;
  args.SetMaxSendMessageSize(64 << 20);
  auto stub = reverser::v1::Catalog::NewStub(
      grpc::CreateCustomChannel(s.grpc_target(), grpc::InsecureChannelCredentials(), args));
  reverser::v1::StreamSummary huge;
  huge.set_reason(std::string(17 << 20, 'x'));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  reverser::v1::ReportStreamSummaryResponse response;
  grpc::Status status = stub->ReportStreamSummary(&context, huge, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << status.error_message();
  auto healthz = s.HttpGet("/healthz");
  ASSERT_TRUE(healthz.ok());
  EXPECT_EQ(healthz->first, 200);
  reverser::v1::ListTypesResponse types;
  grpc::ClientContext again;
  again.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  EXPECT_TRUE(stub->ListTypes(&again, {}, &types).ok());
}

}  // namespace reverser::catalog
