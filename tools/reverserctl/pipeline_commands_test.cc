// reverserctl against the real splicer and gitworker binaries (with a real redis-server and a
// bare Git remote): `streams`, `resplice`, `branches`, `status`, `health` and endpoints files,
// asserting on what an operator sees and on exit codes.

#include <grpcpp/grpcpp.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gtest/gtest.h"
#include "libs/redisstore/materialization_store.h"
#include "libs/redisstore/redis_connection.h"
#include "nlohmann/json.hpp"
#include "services/splicer/test_support.h"
#include "tests/fixtures/git_repos.h"
#include "tests/fixtures/process.h"
#include "tests/fixtures/redis_server.h"
#include "tests/fixtures/service_process.h"
#include "tests/fixtures/temp_dir.h"
#include "libs/redisstore/test_redis.h"

namespace reverser::reverserctl {
namespace {

using nlohmann::json;

// The splicer's static watched-type table: team/mirror follows ConfigMaps in `team`, written by
// the gitworker to `remote` main:clusters/a.
std::string TargetsJson(const std::string& remote) {
  json config = {{"target", {{"namespace", "team"}, {"name", "mirror"}, {"uid", "mirror-uid"}}},
                 {"destination",
                  {{"providerNamespace", "team"},
                   {"providerName", "repo"},
                   {"branch", "main"},
                   {"path", "clusters/a"}}},
                 {"remoteUrl", remote},
                 {"committerName", "reverser"},
                 {"committerEmail", "reverser@example.com"}};
  json table = {{"target", config["target"]},
                {"destination", config["destination"]},
                {"config", config},
                {"types",
                 {{{"type",
                    {{"gvk", {{"version", "v1"}, {"kind", "ConfigMap"}}},
                     {"gvr", {{"version", "v1"}, {"resource", "configmaps"}}},
                     {"scope", "RESOURCE_SCOPE_NAMESPACED"}}},
                   {"namespaces", {{"team", {{"all", true}}}}}}}}};
  return json({{"upserted", {table}}}).dump();
}

class PipelineCommandsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto redis = testing::RedisServer::Start();
    ASSERT_TRUE(redis.ok()) << redis.status();
    redis_ = std::move(*redis);
    // The checkpoint a materializer's replay left: two ConfigMaps, so the splice has something
    // to resync into Git.
    auto conn = redisstore::ConnectTo(*redis_);
    ASSERT_TRUE(conn.ok()) << conn.status();
    redisstore::MaterializationStore store(conn->get(), redisstore::KeyPrefix::Default(),
                                           {"", "v1", "configmaps"},
                                           core::WatchScope::Namespace("team"));
    redisstore::ObjectMap items;
    items[redisstore::ObjectIdentity("team", "a")] =
        splicer::testutil::ConfigMapJson("team", "a", "v", 1);
    items[redisstore::ObjectIdentity("team", "b")] =
        splicer::testutil::ConfigMapJson("team", "b", "v", 2);
    ASSERT_TRUE(store.ReplaceCheckpoint(items, core::StreamPosition::EndOf(2)).ok());

    auto remote = testing::CreateBareRemote(dir_.path());
    ASSERT_TRUE(remote.ok()) << remote.status();
    remote_ = *remote;
    std::string targets = dir_.path() + "/targets.json";
    ASSERT_TRUE(testing::WriteFile(targets, TargetsJson(remote_)).ok());

    auto gitworker = testing::ServiceProcess::Start(
        "gitworker", testing::RunfilePath("services/gitworker/gitworker"),
        {"--work_dir=" + dir_.path() + "/work", "--push_cooldown=0s"});
    ASSERT_TRUE(gitworker.ok()) << gitworker.status();
    gitworker_ = std::move(*gitworker);
    auto splicer = testing::ServiceProcess::Start(
        "splicer", testing::RunfilePath("services/splicer/splicer"),
        {"--redis_address=" + redis_->address(), "--gitworker_address=" + gitworker_->grpc_target(),
         "--targets_file=" + targets, "--attribution_grace=0s"});
    ASSERT_TRUE(splicer.ok()) << splicer.status();
    splicer_ = std::move(*splicer);
  }

  // reverserctl with the two services' addresses and `args`.
  testing::CommandResult Ctl(std::vector<std::string> args) {
    std::vector<std::string> argv = {testing::RunfilePath("tools/reverserctl/reverserctl"),
                                     "--grpc_insecure",
                                     "--splicer_addr=" + splicer_->grpc_target(),
                                     "--gitworker_addr=" + gitworker_->grpc_target()};
    argv.insert(argv.end(), args.begin(), args.end());
    auto result = testing::RunCommand(argv);
    EXPECT_TRUE(result.ok()) << result.status();
    return result.value_or(testing::CommandResult{});
  }

  std::string RemoteHead() {
    auto head = testing::Git(remote_, {"rev-parse", "main"});
    return head.ok() ? std::string(absl::StripAsciiWhitespace(*head)) : "";
  }

  std::string Logs() {
    return "splicer:\n" + splicer_->Logs() + "\ngitworker:\n" + gitworker_->Logs();
  }

  testing::ScopedTempDir dir_{"reverserctl-pipeline"};
  std::unique_ptr<testing::RedisServer> redis_;
  std::string remote_;
  std::unique_ptr<testing::ServiceProcess> gitworker_;
  std::unique_ptr<testing::ServiceProcess> splicer_;
};

TEST_F(PipelineCommandsTest, StreamsBranchesAndResplice) {
  // The splicer follows the target and reports it ready once the resync is spliced.
  testing::CommandResult streams;
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        streams = Ctl({"streams"});
        return streams.exit_code == 0 && absl::StrContains(streams.out, "team/mirror  1/1");
      },
      absl::Seconds(30)))
      << streams.out << streams.err << Logs();
  EXPECT_TRUE(absl::StartsWith(streams.out, "TARGET       READY  REPLAYING  BLOCKED  REASON"))
      << streams.out;
  auto detail = Ctl({"streams", "team/mirror", "--detail"});
  EXPECT_EQ(detail.exit_code, 0) << detail.err;
  // One row per stream, with its type.
  auto lines = absl::StrSplit(detail.out, '\n');
  EXPECT_EQ(std::count_if(lines.begin(), lines.end(),
                          [](absl::string_view line) {
                            return absl::StartsWith(line, "team/mirror") &&
                                   absl::StrContains(line, "STREAMING") &&
                                   absl::StrContains(line, "configmaps");
                          }),
            1)
      << detail.out;
  auto other = Ctl({"streams", "team/other"});
  EXPECT_EQ(other.exit_code, 1);
  EXPECT_TRUE(absl::StrContains(other.err, "follows no target team/other")) << other.err;
  auto as_json = Ctl({"streams", "-o", "json"});
  ASSERT_EQ(as_json.exit_code, 0) << as_json.err;
  json doc = json::parse(as_json.out, nullptr, false);
  ASSERT_TRUE(doc.is_object()) << as_json.out;
  EXPECT_EQ(doc["summaries"][0]["target"]["name"], "mirror");
  EXPECT_EQ(doc["summaries"][0]["total"], 1);

  // The gitworker pushed the resync: its branch shows the remote's head and no pending writes.
  testing::CommandResult branches;
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        std::string head = RemoteHead();
        branches = Ctl({"branches"});
        return !head.empty() && branches.exit_code == 0 &&
               absl::StrContains(branches.out, head.substr(0, 12));
      },
      absl::Seconds(30)))
      << branches.out << branches.err << Logs();
  EXPECT_TRUE(absl::StrContains(
      branches.out, absl::StrCat("team/repo  main    clusters/a  ", RemoteHead().substr(0, 12),
                                 "  0        closed  20")))
      << branches.out;
  EXPECT_TRUE(absl::StartsWith(branches.out, "PROVIDER   BRANCH  PATH        HEAD"))
      << branches.out;
  auto branches_json = Ctl({"branches", "-o", "json"});
  ASSERT_EQ(branches_json.exit_code, 0);
  doc = json::parse(branches_json.out, nullptr, false);
  ASSERT_TRUE(doc.is_object()) << branches_json.out;
  EXPECT_EQ(doc["branches"][0]["headSha"], RemoteHead());
  EXPECT_EQ(doc["branches"][0]["destination"]["branch"], "main");

  // Resplice: the target and its stream are found by name.
  auto resplice = Ctl({"resplice", "team/mirror", "v1/configmaps@team"});
  EXPECT_EQ(resplice.exit_code, 0) << resplice.err;
  EXPECT_TRUE(absl::StartsWith(resplice.out, "resplicing 1 stream(s) of team/mirror"))
      << resplice.out;
  auto unknown = Ctl({"resplice", "team/nope"});
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_EQ(unknown.err, absl::StrCat("reverserctl: splicer at ", splicer_->grpc_target(),
                                      " follows no target team/nope (targets: team/mirror)\n"));
  auto bad_type = Ctl({"resplice", "team/mirror", "configmaps"});
  EXPECT_EQ(bad_type.exit_code, 2);
  EXPECT_TRUE(absl::StrContains(bad_type.err, "is not group/version/resource")) << bad_type.err;

  auto status = Ctl({"status", "gitworker"});
  EXPECT_EQ(status.exit_code, 0) << status.err;
  EXPECT_TRUE(absl::StartsWith(status.out, "SERVICE    INSTANCE")) << status.out;
  EXPECT_TRUE(absl::StrContains(status.out, "\ngitworker  ")) << status.out;
}

TEST_F(PipelineCommandsTest, EndpointsFilesAndUnreachableServices) {
  // The endpoints files the services write ({"grpc_port":..,"http_port":..,"pid":..}).
  std::string endpoints = dir_.path() + "/endpoints";
  ASSERT_TRUE(testing::WriteFile(endpoints + "/splicer.json",
                                 absl::StrCat(R"({"grpc_port":)", splicer_->grpc_port(),
                                              R"(,"http_port":)", splicer_->http_port(), "}"))
                  .ok());
  ASSERT_TRUE(testing::WriteFile(endpoints + "/gitworker.json",
                                 absl::StrCat(R"({"grpc_port":)", gitworker_->grpc_port(), "}"))
                  .ok());
  std::string ctl = testing::RunfilePath("tools/reverserctl/reverserctl");
  for (const char* service : {"splicer", "gitworker"}) {
    auto health = testing::RunCommand({ctl, "--grpc_insecure", "--endpoints_dir=" + endpoints, "health", service});
    ASSERT_TRUE(health.ok());
    EXPECT_EQ(health->exit_code, 0) << health->err;
    EXPECT_EQ(health->out, "SERVING\n");
  }
  auto single = testing::RunCommand(
      {ctl, "--grpc_insecure", "--endpoints_file=" + endpoints + "/gitworker.json", "branches", "-o", "json"});
  ASSERT_TRUE(single.ok());
  EXPECT_EQ(single->exit_code, 0) << single->err;
  EXPECT_TRUE(absl::StartsWith(single->out, "{")) << single->out;

  // Stop the gitworker: the CLI names it, its address and the gRPC status, on one line.
  std::string gitworker = gitworker_->grpc_target();
  auto stopped = gitworker_->process().Terminate();
  ASSERT_TRUE(stopped.ok()) << stopped.status() << "\n" << Logs();
  auto down = testing::RunCommand({ctl, "--grpc_insecure", "--endpoints_dir=" + endpoints, "branches"});
  ASSERT_TRUE(down.ok());
  EXPECT_EQ(down->exit_code, 1);
  EXPECT_TRUE(down->out.empty()) << down->out;
  EXPECT_TRUE(
      absl::StartsWith(down->err, "reverserctl: gitworker at " + gitworker + ": UNAVAILABLE"))
      << down->err;
  EXPECT_EQ(std::count(down->err.begin(), down->err.end(), '\n'), 1) << down->err;
  // Every service: the catalog and materializer have no file here, which is said as such.
  auto all = testing::RunCommand({ctl, "--grpc_insecure", "--endpoints_dir=" + endpoints, "health"});
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->exit_code, 1);
  EXPECT_TRUE(
      absl::StrContains(all->err, "cannot read endpoints file " + endpoints + "/catalog.json"))
      << all->err;
}

}  // namespace
}  // namespace reverser::reverserctl
