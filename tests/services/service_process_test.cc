#include <grpcpp/grpcpp.h>
#include <sys/wait.h>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "proto/grpc/health/v1/health.grpc.pb.h"
#include "proto/reverser/v1/catalog.grpc.pb.h"
#include "proto/reverser/v1/gitworker.grpc.pb.h"
#include "proto/reverser/v1/materializer.grpc.pb.h"
#include "proto/reverser/v1/splicer.grpc.pb.h"
#include "tests/fixtures/process.h"
#include "tests/fixtures/redis_server.h"
#include "tests/fixtures/service_process.h"
#include "tests/fixtures/temp_dir.h"
#include "tools/kube-sim/kube_sim.h"

namespace reverser {
namespace {

using testing::ServiceProcess;

struct ServiceCase {
  std::string name;
  // Calls the service's admin Status over gRPC.
  std::function<grpc::Status(grpc::Channel*, v1::ServiceStatus*)> status;
};

template <typename Admin>
std::function<grpc::Status(grpc::Channel*, v1::ServiceStatus*)> AdminStatusCall() {
  return [](grpc::Channel* channel, v1::ServiceStatus* out) {
    auto stub = Admin::NewStub(std::shared_ptr<grpc::Channel>(channel, [](grpc::Channel*) {}));
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    return stub->Status(&context, v1::StatusRequest(), out);
  };
}

// What a service needs around it: a cluster (kube-sim) and Redis.
class ServiceProcessTest : public ::testing::TestWithParam<ServiceCase> {
 protected:
  static void SetUpTestSuite() {
    dir_ = new testing::ScopedTempDir("svc");
    auto redis = testing::RedisServer::Start();
    ASSERT_TRUE(redis.ok()) << redis.status();
    redis_ = redis->release();
    auto sim = kubesim::KubeSim::Start({});
    ASSERT_TRUE(sim.ok()) << sim.status();
    sim_ = sim->release();
    ASSERT_TRUE(sim_->WriteKubeconfig(dir_->path() + "/kubeconfig").ok());
    // The catalog becomes ready once it can list its own kinds: install the CRDs.
    for (const char* kind :
         {"gitproviders", "gittargets", "watchrules", "clusterwatchrules", "commitrequests"}) {
      auto yaml = testing::ReadFile(
          testing::RunfilePath(std::string("deploy/crds/configbutler.ai_") + kind + ".yaml"));
      ASSERT_TRUE(yaml.ok()) << yaml.status();
      std::string document = yaml->substr(yaml->find("---") + 3);
      auto created = sim_->Call("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                                document, "application/yaml");
      ASSERT_EQ(created.status, 201) << created.body;
    }
  }
  static void TearDownTestSuite() {
    delete sim_;
    delete redis_;
    delete dir_;
  }

  // The flags each service needs to start against the suite's cluster and Redis.
  static std::vector<std::string> ArgsFor(const std::string& service) {
    std::vector<std::string> args = {"--log_level=debug"};
    if (service == "materializer") {
      args.push_back("--kubeconfig=" + dir_->path() + "/kubeconfig");
      args.push_back("--redis_address=" + redis_->address());
      args.push_back("--static_claims=v1/configmaps");
      args.push_back("--audit_insecure");
      args.push_back("--audit_port=0");
    }
    if (service == "catalog") {
      args.push_back("--kubeconfig=" + dir_->path() + "/kubeconfig");
    }
    if (service == "splicer") {
      std::string tables = dir_->path() + "/tables.json";
      EXPECT_TRUE(testing::WriteFile(tables, "{}").ok());
      args.push_back("--redis_address=" + redis_->address());
      args.push_back("--targets_file=" + tables);
      args.push_back("--gitworker_address=127.0.0.1:1");  // reported, not gating readiness
    }
    if (service == "gitworker") args.push_back("--work_dir=" + dir_->path() + "/gitworker");
    return args;
  }

  static testing::ScopedTempDir* dir_;
  static testing::RedisServer* redis_;
  static kubesim::KubeSim* sim_;
};

testing::ScopedTempDir* ServiceProcessTest::dir_ = nullptr;
testing::RedisServer* ServiceProcessTest::redis_ = nullptr;
kubesim::KubeSim* ServiceProcessTest::sim_ = nullptr;

TEST_P(ServiceProcessTest, ServesHealthMetricsAdminAndStopsOnSigterm) {
  const ServiceCase& c = GetParam();
  auto service = ServiceProcess::Start(
      c.name, testing::RunfilePath("services/" + c.name + "/" + c.name), ArgsFor(c.name));
  ASSERT_TRUE(service.ok()) << service.status();
  ServiceProcess& s = **service;
  ASSERT_EQ(s.WaitReady(), absl::OkStatus());

  // HTTP: liveness, readiness, Prometheus metrics.
  auto healthz = s.HttpGet("/healthz");
  ASSERT_TRUE(healthz.ok());
  EXPECT_EQ(healthz->first, 200);
  auto metrics = s.HttpGet("/metrics");
  ASSERT_TRUE(metrics.ok());
  EXPECT_EQ(metrics->first, 200);
  EXPECT_TRUE(absl::StrContains(metrics->second, "# TYPE process_start_time_seconds gauge"));
  EXPECT_TRUE(absl::StrContains(
      metrics->second, "reverser_build_info{service=\"" + c.name + "\",version=\"0.1.0\"} 1"));
  EXPECT_EQ(s.HttpGet("/nope")->first, 404);

  // gRPC: standard health check and the admin Status call.
  auto channel = grpc::CreateChannel(s.grpc_target(), grpc::InsecureChannelCredentials());
  auto health = grpc::health::v1::Health::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  grpc::health::v1::HealthCheckResponse response;
  grpc::Status rpc = health->Check(&context, grpc::health::v1::HealthCheckRequest(), &response);
  ASSERT_TRUE(rpc.ok()) << rpc.error_message();
  EXPECT_EQ(response.status(), grpc::health::v1::HealthCheckResponse::SERVING);

  v1::ServiceStatus status;
  rpc = c.status(channel.get(), &status);
  ASSERT_TRUE(rpc.ok()) << rpc.error_message();
  EXPECT_EQ(status.service(), c.name);
  EXPECT_TRUE(status.ready());
  EXPECT_EQ(status.grpc_port(), static_cast<uint32_t>(s.grpc_port()));
  EXPECT_EQ(status.http_port(), static_cast<uint32_t>(s.http_port()));

  // The chosen ports are logged as a structured line.
  EXPECT_TRUE(absl::StrContains(
      s.Logs(), "\"msg\":\"listening\",\"grpc_port\":" + std::to_string(s.grpc_port())));

  // SIGTERM: orderly exit with status 0 inside the 5 s budget.
  auto exit_status = s.process().Terminate(absl::Seconds(5));
  ASSERT_TRUE(exit_status.ok()) << exit_status.status();
  EXPECT_TRUE(WIFEXITED(*exit_status));
  EXPECT_EQ(WEXITSTATUS(*exit_status), 0);
  EXPECT_TRUE(absl::StrContains(s.Logs(), "\"msg\":\"stopped\"")) << s.Logs();
  // The actor system joined: no thread kept it waiting (libs/runtime/caf_thread.h).
  EXPECT_FALSE(absl::StrContains(s.Logs(), "did not stop within the shutdown grace")) << s.Logs();
}

TEST_P(ServiceProcessTest, HelpListsFlags) {
  const ServiceCase& c = GetParam();
  auto result =
      testing::RunCommand({testing::RunfilePath("services/" + c.name + "/" + c.name), "--help"});
  ASSERT_TRUE(result.ok());
  std::string text = result->out + result->err;
  for (const char* flag : {"--grpc_port", "--http_port", "--listen_address", "--log_level"}) {
    EXPECT_TRUE(absl::StrContains(text, flag)) << flag << " missing from:\n" << text;
  }
  EXPECT_TRUE(absl::StrContains(text, "Usage: " + c.name));
}

TEST_P(ServiceProcessTest, RejectsUnknownFlag) {
  const ServiceCase& c = GetParam();
  auto result = testing::RunCommand(
      {testing::RunfilePath("services/" + c.name + "/" + c.name), "--no_such_flag=1"});
  ASSERT_TRUE(result.ok());
  EXPECT_NE(result->exit_code, 0);
  EXPECT_TRUE(absl::StrContains(result->err, "no_such_flag")) << result->err;
}

INSTANTIATE_TEST_SUITE_P(
    AllServices, ServiceProcessTest,
    ::testing::Values(ServiceCase{"catalog", AdminStatusCall<v1::CatalogAdmin>()},
                      ServiceCase{"materializer", AdminStatusCall<v1::MaterializerAdmin>()},
                      ServiceCase{"splicer", AdminStatusCall<v1::SplicerAdmin>()},
                      ServiceCase{"gitworker", AdminStatusCall<v1::GitWorkerAdmin>()}),
    [](const ::testing::TestParamInfo<ServiceCase>& info) { return info.param.name; });

}  // namespace
}  // namespace reverser
