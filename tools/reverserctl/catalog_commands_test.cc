// reverserctl against the real catalog binary following kube-sim: `types` (and why a type is not
// followed), `rescan`, `claims` and `tables` (one snapshot, and --watch following a change),
// asserting on what an operator sees and on exit codes.

#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/fixtures/git_repos.h"
#include "tests/fixtures/process.h"
#include "tests/fixtures/service_process.h"
#include "tests/fixtures/temp_dir.h"
#include "tools/kube-sim/kube_sim.h"

namespace reverser::reverserctl {
namespace {

using nlohmann::json;

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<std::string> Lines(const std::string& text) {
  return absl::StrSplit(text, '\n', absl::SkipEmpty());
}

class CatalogCommandsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto sim = kubesim::KubeSim::Start({});
    ASSERT_TRUE(sim.ok()) << sim.status();
    sim_ = *std::move(sim);
    std::string kubeconfig = dir_.path() + "/kubeconfig";
    ASSERT_TRUE(sim_->WriteKubeconfig(kubeconfig).ok());
    for (const char* plural :
         {"gitproviders", "gittargets", "watchrules", "clusterwatchrules", "commitrequests"}) {
      Post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
           ReadText(absl::StrCat("deploy/crds/configbutler.ai_", plural, ".yaml")),
           "application/yaml");
    }
    auto service = testing::ServiceProcess::Start(
        "catalog", testing::RunfilePath("services/catalog/catalog"),
        {"--kubeconfig=" + kubeconfig, "--discovery_refresh_period=1s"});
    ASSERT_TRUE(service.ok()) << service.status();
    catalog_ = std::move(*service);
    ASSERT_TRUE(catalog_->WaitReady().ok()) << catalog_->Logs();
  }
  void TearDown() override {
    catalog_.reset();
    if (sim_) sim_->Stop();
  }

  void Post(const std::string& path, const std::string& body,
            const std::string& type = "application/json") {
    auto r = sim_->Call("POST", path, body, type);
    ASSERT_EQ(r.status, 201) << path << ": " << r.body;
  }

  // A GitProvider, GitTarget demo/mirror and a WatchRule following ConfigMaps in demo.
  void ApplyMirror() {
    auto remote = testing::CreateBareRemote(dir_.path());
    ASSERT_TRUE(remote.ok()) << remote.status();
    Post("/api/v1/namespaces",
         R"({"apiVersion":"v1","kind":"Namespace","metadata":{"name":"demo"}})");
    const std::string base = "/apis/configbutler.ai/v1alpha3/namespaces/demo/";
    Post(base + "gitproviders",
         json({{"apiVersion", "configbutler.ai/v1alpha3"},
               {"kind", "GitProvider"},
               {"metadata", {{"name", "local"}, {"namespace", "demo"}}},
               {"spec", {{"url", "file://" + *remote}, {"allowedBranches", {"main"}}}}})
             .dump());
    Post(base + "gittargets", json({{"apiVersion", "configbutler.ai/v1alpha3"},
                                    {"kind", "GitTarget"},
                                    {"metadata", {{"name", "mirror"}, {"namespace", "demo"}}},
                                    {"spec",
                                     {{"providerRef", {{"name", "local"}}},
                                      {"branch", "main"},
                                      {"path", "clusters/local"}}}})
                                  .dump());
    AddRule("configmaps", "", "configmaps");
  }

  void AddRule(const std::string& name, const std::string& group, const std::string& resource) {
    Post("/apis/configbutler.ai/v1alpha3/namespaces/demo/watchrules",
         json({{"apiVersion", "configbutler.ai/v1alpha3"},
               {"kind", "WatchRule"},
               {"metadata", {{"name", name}, {"namespace", "demo"}}},
               {"spec",
                {{"targetRef", {{"name", "mirror"}}},
                 {"rules",
                  {{{"operations", {"*"}}, {"apiGroups", {group}}, {"resources", {resource}}}}}}}})
             .dump());
  }

  std::vector<std::string> Argv(std::vector<std::string> args) {
    std::vector<std::string> argv = {testing::RunfilePath("tools/reverserctl/reverserctl"),
                                     "--grpc_insecure",
                                     "--catalog_addr=" + catalog_->grpc_target()};
    argv.insert(argv.end(), args.begin(), args.end());
    return argv;
  }

  testing::CommandResult Ctl(std::vector<std::string> args) {
    auto result = testing::RunCommand(Argv(std::move(args)));
    EXPECT_TRUE(result.ok()) << result.status();
    return result.value_or(testing::CommandResult{});
  }

  testing::ScopedTempDir dir_{"reverserctl-catalog"};
  std::unique_ptr<kubesim::KubeSim> sim_;
  std::unique_ptr<testing::ServiceProcess> catalog_;
};

TEST_F(CatalogCommandsTest, TypesAndWhyTheyAreNotFollowed) {
  auto followed = Ctl({"types"});
  ASSERT_EQ(followed.exit_code, 0) << followed.err;
  auto lines = Lines(followed.out);
  ASSERT_GT(lines.size(), 10u) << followed.out;
  EXPECT_TRUE(absl::StartsWith(lines[0], "RESOURCE")) << lines[0];
  EXPECT_TRUE(absl::StrContains(lines[0], "KIND")) << lines[0];
  EXPECT_TRUE(absl::EndsWith(lines[0], "VERDICT")) << lines[0];
  EXPECT_TRUE(absl::StrContains(lines.back(), "type(s) at registry generation")) << lines.back();
  bool configmaps = false;
  for (size_t i = 1; i + 1 < lines.size(); ++i) {
    EXPECT_TRUE(absl::EndsWith(lines[i], "FOLLOWABLE")) << lines[i];
    if (absl::StartsWith(lines[i], "v1/configmaps ")) {
      configmaps = true;
      std::vector<std::string> cells = absl::StrSplit(lines[i], ' ', absl::SkipEmpty());
      EXPECT_EQ(cells, (std::vector<std::string>{"v1/configmaps", "ConfigMap*", "namespaced",
                                                 "builtin", "FOLLOWABLE"}));
    }
  }
  EXPECT_TRUE(configmaps) << followed.out;

  // --why lists every type, the refused ones with the failed checks.
  auto why = Ctl({"types", "--why"});
  ASSERT_EQ(why.exit_code, 0) << why.err;
  auto why_lines = Lines(why.out);
  EXPECT_GT(why_lines.size(), lines.size());
  EXPECT_TRUE(absl::EndsWith(why_lines[0], "VERDICT     REASON")) << why_lines[0];
  int refused = 0;
  for (const std::string& line : why_lines) {
    if (!absl::StrContains(line, " REFUSED ")) continue;
    ++refused;
    // "<requirement>: <reason-code>" after the verdict.
    std::string reason = line.substr(line.find(" REFUSED ") + 9);
    EXPECT_TRUE(absl::StrContains(reason, ": ")) << line;
  }
  EXPECT_GT(refused, 0) << why.out;

  // -o json is the ListTypesResponse; --all has the same records as --why.
  auto all = Ctl({"types", "--all", "-o", "json"});
  ASSERT_EQ(all.exit_code, 0) << all.err;
  json doc = json::parse(all.out, nullptr, false);
  ASSERT_TRUE(doc.is_object()) << all.out;
  EXPECT_EQ(doc["records"].size() + 2, why_lines.size());
  EXPECT_GT(std::stoull(doc["generation"].get<std::string>()), 0u);  // uint64 is a JSON string

  auto rescan = Ctl({"rescan"});
  ASSERT_EQ(rescan.exit_code, 0) << rescan.err;
  EXPECT_TRUE(absl::StartsWith(rescan.out, "rescanned: registry generation ")) << rescan.out;

  auto status = Ctl({"status", "catalog"});
  ASSERT_EQ(status.exit_code, 0) << status.err;
  EXPECT_TRUE(absl::StrContains(status.out, "\ncatalog  ")) << status.out;
  EXPECT_TRUE(absl::StrContains(status.out, "COMPONENT")) << status.out;
}

TEST_F(CatalogCommandsTest, ClaimsAndTablesSnapshotsAndWatch) {
  ApplyMirror();
  testing::CommandResult tables;
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        tables = Ctl({"tables"});
        return tables.exit_code == 0 && absl::StrContains(tables.out, "v1/configmaps");
      },
      absl::Seconds(30)))
      << tables.out << tables.err << catalog_->Logs();
  EXPECT_TRUE(absl::StrContains(
      tables.out, "demo/mirror  demo/local main:clusters/local  v1/configmaps  demo       all"))
      << tables.out;
  EXPECT_TRUE(absl::StrContains(tables.out, "1 table(s) at generation ")) << tables.out;

  auto claims = Ctl({"claims"});
  ASSERT_EQ(claims.exit_code, 0) << claims.err;
  EXPECT_TRUE(absl::StrContains(claims.out, "v1/configmaps@demo  ConfigMap  demo")) << claims.out;
  auto claims_json = Ctl({"claims", "-o", "json"});
  ASSERT_EQ(claims_json.exit_code, 0) << claims_json.err;
  json doc = json::parse(claims_json.out, nullptr, false);
  ASSERT_TRUE(doc.is_object()) << claims_json.out;
  EXPECT_EQ(doc["claims"][0]["scope"]["namespace"], "demo");

  // --watch prints the current tables, then the change a new rule makes, until stopped.
  auto watch =
      testing::ChildProcess::Start({Argv({"tables", "--watch"}), {}, dir_.path(), "tables-watch"});
  ASSERT_TRUE(watch.ok()) << watch.status();
  ASSERT_TRUE(testing::WaitFor([&] { return absl::StrContains(watch->Stdout(), "v1/configmaps"); },
                               absl::Seconds(20)))
      << watch->Stdout() << watch->Stderr();
  EXPECT_TRUE(watch->Running());
  AddRule("deployments", "apps", "deployments");
  ASSERT_TRUE(testing::WaitFor(
      [&] { return absl::StrContains(watch->Stdout(), "apps/v1/deployments"); }, absl::Seconds(30)))
      << watch->Stdout() << watch->Stderr();
  EXPECT_TRUE(watch->Running());
  ASSERT_TRUE(watch->Terminate().ok());
  EXPECT_TRUE(watch->Stderr().empty()) << watch->Stderr();
}

}  // namespace
}  // namespace reverser::reverserctl
