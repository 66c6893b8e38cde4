// `reverserctl commit` against kube-sim with the real CRDs, in process and without any mesh
// flags: usage errors create nothing, --no-wait creates the spec asked for, and the wait ends on
// the terminal status the catalog's controller would write (played here by the test).

#include "tools/reverserctl/commit_command.h"

#include <fstream>
#include <future>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/fixtures/process.h"
#include "tests/fixtures/temp_dir.h"
#include "tools/kube-sim/kube_sim.h"
#include "tools/reverserctl/commands.h"

namespace reverser::reverserctl {
namespace {

using nlohmann::json;

constexpr char kRequests[] = "/apis/configbutler.ai/v1alpha3/namespaces/demo/commitrequests";
constexpr char kSha[] = "0123456789abcdef0123456789abcdef01234567";

struct Result {
  int code = -1;
  std::string out;
  std::string err;
};

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

json Condition(const std::string& type, const std::string& status, const std::string& reason,
               const std::string& message) {
  return {{"type", type},
          {"status", status},
          {"reason", reason},
          {"message", message},
          {"lastTransitionTime", "2026-01-02T03:04:05Z"}};
}

class CommitCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto sim = kubesim::KubeSim::Start({});
    ASSERT_TRUE(sim.ok()) << sim.status();
    sim_ = *std::move(sim);
    kubeconfig_ = dir_.path() + "/kubeconfig";
    ASSERT_TRUE(sim_->WriteKubeconfig(kubeconfig_).ok());
    Post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
         ReadText("deploy/crds/configbutler.ai_commitrequests.yaml"), "application/yaml");
    Post("/api/v1/namespaces",
         R"({"apiVersion":"v1","kind":"Namespace","metadata":{"name":"demo"}})");
  }
  void TearDown() override {
    if (sim_) sim_->Stop();
  }

  void Post(const std::string& path, const std::string& body,
            const std::string& type = "application/json") {
    auto r = sim_->Call("POST", path, body, type);
    ASSERT_EQ(r.status, 201) << path << ": " << r.body;
  }

  // `reverserctl --kubeconfig=... ARGS`, in process.
  Result Ctl(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {"--kubeconfig=" + kubeconfig_};
    argv.insert(argv.end(), args.begin(), args.end());
    std::ostringstream out, err;
    int code = reverserctl::Run(argv, out, err);
    return {code, out.str(), err.str()};
  }

  // Runs Ctl on its own thread, so the test can play the controller meanwhile.
  std::future<Result> CtlAsync(std::vector<std::string> args) {
    return std::async(std::launch::async, [this, args] { return Ctl(args); });
  }

  json Requests() {
    auto r = sim_->Call("GET", kRequests);
    EXPECT_EQ(r.status, 200) << r.body;
    json list = json::parse(r.body, nullptr, false);
    return list.is_object() && list["items"].is_array() ? list["items"] : json::array();
  }

  json Request(const std::string& name) {
    auto r = sim_->Call("GET", absl::StrCat(kRequests, "/", name));
    EXPECT_EQ(r.status, 200) << r.body;
    return json::parse(r.body, nullptr, false);
  }

  // The name of the one request, once the command has created it.
  std::string WaitForRequest() {
    json items;
    EXPECT_TRUE(testing::WaitFor(
        [&] {
          items = Requests();
          return !items.empty();
        },
        absl::Seconds(30)));
    EXPECT_EQ(items.size(), 1u) << items.dump();
    return items.empty() ? "" : items[0]["metadata"]["name"].get<std::string>();
  }

  // A status written to the status subresource with a merge patch, as the controller does.
  void WriteStatus(const std::string& name, const json& status) {
    auto r = sim_->Call("PATCH", absl::StrCat(kRequests, "/", name, "/status"),
                        json({{"status", status}}).dump(), "application/merge-patch+json");
    ASSERT_EQ(r.status, 200) << r.body;
  }

  static json InProgress() {
    return {{"conditions",
             {Condition("Ready", "False", "WaitingForCloseDelay",
                        "Waiting for the author's commit window to close"),
              Condition("Reconciling", "True", "WaitingForCloseDelay", "In progress"),
              Condition("Stalled", "False", "WaitingForCloseDelay", "In progress")}}};
  }

  testing::ScopedTempDir dir_{"reverserctl-commit"};
  std::unique_ptr<kubesim::KubeSim> sim_;
  std::string kubeconfig_;
};

TEST_F(CommitCommandTest, UsageErrorsCreateNothing) {
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  for (const Case& c : std::vector<Case>{
           {{"commit", "demo/mirror"}, "commit needs -m MESSAGE"},
           {{"commit", "-m", "x"}, "commit takes 1 argument(s), got 0"},
           {{"commit", "mirror", "-m", "x"}, "target \"mirror\" is not namespace/name"},
           {{"commit", "demo/Mirror", "-m", "x"}, "target \"demo/Mirror\""},
           {{"commit", "demo/mirror", "-m", "x", "--close-delay=400"},
            "--close-delay: \"400\" is not a number of seconds from 0 to 300"},
           {{"commit", "demo/mirror", "-m", "x", "--close-delay", "soon"}, "--close-delay"},
           {{"commit", "demo/mirror", "-m", "fix\tthis"}, "control character U+0009"},
           {{"commit", "demo/mirror", "--message=a\rb"}, "control character U+000D"},
           {{"commit", "demo/mirror", "-m", ""}, "the message is empty"},
           {{"commit", "demo/mirror", "-m", std::string(1025, 'a')}, "has 1025 characters"},
           {{"commit", "demo/mirror", "-m", "x", "-m", "y"}, "--message is given twice"},
           {{"commit", "demo/mirror", "-m", "x", "--name=Not_A_Name"}, "--name: "},
           {{"commit", "demo/mirror", "-m", "x", "--watch"}, "commit has no option --watch"},
           {{"commit", "demo/mirror", "-m"}, "-m needs a value"},
           {{"types", "-m", "x"}, "types has no option --message"},
       }) {
    Result r = Ctl(c.args);
    EXPECT_EQ(r.code, kUsage) << absl::StrJoin(c.args, " ") << "\n" << r.err;
    EXPECT_TRUE(absl::StrContains(r.err, c.message)) << absl::StrJoin(c.args, " ") << "\n" << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
  }
  EXPECT_TRUE(Requests().empty()) << Requests().dump();

  // 1024 characters (not bytes) is the limit; a newline is allowed.
  std::string longest;
  for (int i = 0; i < 1022; ++i) longest += "é";
  longest += "\nx";
  Result r = Ctl({"commit", "demo/mirror", "-m", longest, "--no-wait"});
  EXPECT_EQ(r.code, kOk) << r.err;
}

TEST_F(CommitCommandTest, NoWaitCreatesTheRequestAndPrintsItsName) {
  Result r = Ctl({"commit", "demo/mirror", "-m", "Release 1.2\n\nWith notes", "--close-delay", "30",
                  "--no-wait"});
  ASSERT_EQ(r.code, kOk) << r.err;
  EXPECT_TRUE(r.err.empty()) << r.err;
  ASSERT_TRUE(absl::EndsWith(r.out, "\n")) << r.out;
  std::string name = r.out.substr(0, r.out.size() - 1);
  EXPECT_TRUE(absl::StartsWith(name, "mirror-")) << name;
  EXPECT_GT(name.size(), std::string("mirror-").size()) << name;

  json object = Request(name);
  EXPECT_EQ(object["metadata"]["generateName"], "mirror-") << object.dump();
  const json& spec = object["spec"];
  EXPECT_EQ(spec.size(), 3u) << spec.dump();
  EXPECT_EQ(spec["targetRef"]["name"], "mirror");
  EXPECT_EQ(spec["message"], "Release 1.2\n\nWith notes");
  EXPECT_EQ(spec["closeDelaySeconds"], 30);

  // --name names it; the close delay defaults to 0; -o json prints the created object.
  Result named = Ctl(
      {"-o", "json", "commit", "demo/mirror", "--message=Hotfix", "--name=hotfix-1", "--no-wait"});
  ASSERT_EQ(named.code, kOk) << named.err;
  json printed = json::parse(named.out, nullptr, false);
  ASSERT_TRUE(printed.is_object()) << named.out;
  EXPECT_EQ(printed["metadata"]["name"], "hotfix-1");
  json stored = Request("hotfix-1");
  EXPECT_EQ(stored["spec"]["closeDelaySeconds"], 0);
  EXPECT_EQ(stored["spec"]["message"], "Hotfix");
  EXPECT_FALSE(stored["metadata"].contains("generateName")) << stored.dump();

  // The API server's refusal is one line, exit 1.
  Result again = Ctl({"commit", "demo/mirror", "-m", "Hotfix", "--name=hotfix-1", "--no-wait"});
  EXPECT_EQ(again.code, kFailed);
  EXPECT_TRUE(absl::StartsWith(again.err,
                               "reverserctl: creating a CommitRequest for GitTarget "
                               "demo/mirror: "))
      << again.err;
  EXPECT_TRUE(absl::StrContains(again.err, "AlreadyExists")) << again.err;
  EXPECT_EQ(std::count(again.err.begin(), again.err.end(), '\n'), 1) << again.err;
  Result nowhere = Ctl({"commit", "nowhere/mirror", "-m", "x", "--no-wait"});
  EXPECT_EQ(nowhere.code, kFailed);
  EXPECT_TRUE(absl::StrContains(nowhere.err, "(404 NotFound)")) << nowhere.err;
}

TEST_F(CommitCommandTest, WaitsForTheCommittedOutcome) {
  auto run = CtlAsync({"commit", "demo/mirror", "-m", "Release", "--timeout=60s"});
  std::string name = WaitForRequest();
  ASSERT_FALSE(name.empty());
  // In progress first, as the controller writes on first sight: the command keeps waiting.
  WriteStatus(name, InProgress());
  json done = {
      {"conditions",
       {Condition("Ready", "True", "Committed", absl::StrCat("Committed and pushed as ", kSha)),
        Condition("Reconciling", "False", "Committed", "Done"),
        Condition("Stalled", "False", "Committed", "Done"),
        Condition("Pushed", "True", "Pushed", "Pushed to main")}},
      {"sha", kSha},
      {"branch", "main"}};
  WriteStatus(name, done);
  Result r = run.get();
  EXPECT_EQ(r.code, kOk) << r.err;
  EXPECT_EQ(r.out, absl::StrCat("commitrequest demo/", name, ": Committed ", kSha, " on main\n"));
  EXPECT_TRUE(r.err.empty()) << r.err;
}

TEST_F(CommitCommandTest, AStalledOutcomeExitsOne) {
  auto run = CtlAsync({"commit", "demo/mirror", "-m", "Release", "--name=rel", "--timeout=60s"});
  ASSERT_EQ(WaitForRequest(), "rel");
  WriteStatus("rel", {{"conditions",
                       {Condition("Ready", "False", "FinalizeFailed",
                                  "The request did not resolve within the safety window"),
                        Condition("Reconciling", "False", "FinalizeFailed", "Stalled"),
                        Condition("Stalled", "True", "FinalizeFailed", "Stalled")}}});
  Result r = run.get();
  EXPECT_EQ(r.code, kFailed);
  EXPECT_TRUE(r.out.empty()) << r.out;
  EXPECT_EQ(r.err,
            "reverserctl: commitrequest demo/rel: FinalizeFailed: The request did not resolve "
            "within the safety window\n");
}

TEST_F(CommitCommandTest, ABenignOutcomeWithoutACommitIsReadyAndPrintsTheObjectAsJson) {
  auto run = CtlAsync(
      {"commit", "demo/mirror", "-m", "Release", "--name=quiet", "-o", "json", "--timeout=60s"});
  ASSERT_EQ(WaitForRequest(), "quiet");
  WriteStatus("quiet", {{"conditions",
                         {Condition("Ready", "True", "NoWindowInGrace",
                                    "No open commit window of this author and GitTarget by the "
                                    "deadline")}}});
  Result r = run.get();
  EXPECT_EQ(r.code, kOk) << r.err;
  json object = json::parse(r.out, nullptr, false);
  ASSERT_TRUE(object.is_object()) << r.out;
  EXPECT_EQ(object["metadata"]["name"], "quiet");
  EXPECT_EQ(object["status"]["conditions"][0]["reason"], "NoWindowInGrace");

  // The same outcome as a line names the reason and says why.
  EXPECT_EQ(FormatCommitOutcome(object),
            "commitrequest demo/quiet: NoWindowInGrace: No open commit window of this author and "
            "GitTarget by the deadline");
}

TEST_F(CommitCommandTest, FailedReadsWhileWaitingAreToleratedUntilTheOutcome) {
  auto run = CtlAsync({"commit", "demo/mirror", "-m", "Release", "--name=flaky", "--timeout=60s"});
  ASSERT_EQ(WaitForRequest(), "flaky");
  // The API server fails the command's next three reads; the outcome is read after them.
  sim_->faults().Add({.action = kubesim::FaultRule::Action::kInternalError,
                      .verb = "get",
                      .resource = "commitrequests",
                      .times = 3});
  WriteStatus("flaky", {{"conditions", {Condition("Ready", "True", "Committed", "Committed")}},
                        {"sha", std::string(40, 'a')},
                        {"branch", "main"}});
  Result r = run.get();
  EXPECT_EQ(r.code, kOk) << r.err;
  EXPECT_TRUE(absl::StrContains(r.out, std::string(40, 'a'))) << r.out;
}

TEST_F(CommitCommandTest, ARequestDeletedWhileWaitingEndsTheWait) {
  auto run = CtlAsync({"commit", "demo/mirror", "-m", "Release", "--name=gone", "--timeout=60s"});
  ASSERT_EQ(WaitForRequest(), "gone");
  auto deleted = sim_->Call("DELETE", absl::StrCat(kRequests, "/gone"));
  ASSERT_EQ(deleted.status, 200) << deleted.body;
  Result r = run.get();
  EXPECT_EQ(r.code, kFailed);
  EXPECT_TRUE(absl::StartsWith(r.err, "reverserctl: reading commitrequest demo/gone: ")) << r.err;
}

TEST_F(CommitCommandTest, NoOutcomeInTimeExitsOne) {
  // Nothing plays the controller: the wait ends at --timeout.
  Result r = Ctl({"commit", "demo/mirror", "-m", "Release", "--name=lonely", "--timeout=1s"});
  EXPECT_EQ(r.code, kFailed);
  EXPECT_TRUE(r.out.empty()) << r.out;
  EXPECT_TRUE(
      absl::StartsWith(r.err, "reverserctl: commitrequest demo/lonely: no outcome within 1s"))
      << r.err;
  EXPECT_TRUE(absl::StrContains(r.err, "no status yet")) << r.err;
  EXPECT_EQ(Request("lonely")["spec"]["message"], "Release");
}

TEST(CommitSpecTest, DefaultTimeoutOutlastsTheSafetyWindow) {
  EXPECT_GT(kCommitDefaultTimeout, absl::Seconds(420));
  EXPECT_EQ(absl::FormatDuration(kCommitDefaultTimeout), "7m30s");
  json in_progress = {
      {"status",
       {{"conditions", {Condition("Ready", "False", "WaitingForCloseDelay", "Waiting")}}}}};
  EXPECT_EQ(TerminalReady(in_progress), nullptr);
  EXPECT_EQ(TerminalReady(json::object()), nullptr);
}

}  // namespace
}  // namespace reverser::reverserctl
