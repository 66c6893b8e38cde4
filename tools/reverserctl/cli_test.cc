// The command line without servers: parsing, address resolution from flags and endpoints files,
// help, usage errors (exit 2) and an unreachable service (exit 1, one line naming it).

#include "tools/reverserctl/cli.h"

#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "tests/fixtures/process.h"
#include "tests/fixtures/temp_dir.h"
#include "tools/reverserctl/commands.h"
#include "tools/reverserctl/connection.h"

namespace reverser::reverserctl {
namespace {

struct Result {
  int code;
  std::string out;
  std::string err;
};

Result RunArgs(const std::vector<std::string>& argv) {
  std::ostringstream out, err;
  int code = Run(argv, out, err);
  return {code, out.str(), err.str()};
}

TEST(ParseArgsTest, GlobalOptionsAnywhereAndCommandSwitches) {
  auto inv = ParseArgs({"-o", "json", "types", "--why", "--timeout=2s", "--catalog_addr", "h:1",
                        "--all=true", "--watch=false"});
  ASSERT_TRUE(inv.ok()) << inv.status();
  EXPECT_EQ(inv->command, "types");
  EXPECT_TRUE(inv->args.empty());
  EXPECT_EQ(inv->switches, (std::set<std::string>{"why", "all"}));
  EXPECT_EQ(inv->options.output, OutputFormat::kJson);
  EXPECT_EQ(inv->options.timeout, absl::Seconds(2));
  EXPECT_EQ(inv->options.service_addr.at("catalog"), "h:1");

  auto positional = ParseArgs({"resplice", "team/mirror", "--", "-odd"});
  ASSERT_TRUE(positional.ok());
  EXPECT_EQ(positional->args, (std::vector<std::string>{"team/mirror", "-odd"}));
}

TEST(ParseArgsTest, CommandValueOptions) {
  const std::vector<ValueOption> values = {{"message", "m"}, {"close-delay", ""}};
  auto inv = ParseArgs(
      {"-m", "-starts with a dash", "commit", "a/b", "--close-delay=5", "--no-wait"}, values);
  ASSERT_TRUE(inv.ok()) << inv.status();
  EXPECT_EQ(inv->command, "commit");
  EXPECT_EQ(inv->args, (std::vector<std::string>{"a/b"}));
  EXPECT_EQ(inv->values, (std::map<std::string, std::string>{{"message", "-starts with a dash"},
                                                             {"close-delay", "5"}}));
  EXPECT_EQ(inv->switches, (std::set<std::string>{"no-wait"}));
  EXPECT_FALSE(inv->options.timeout_given);
  EXPECT_TRUE(ParseArgs({"commit", "--timeout=1m"}, values)->options.timeout_given);
  EXPECT_FALSE(ParseArgs({"commit", "--message"}, values).ok());
  EXPECT_FALSE(ParseArgs({"commit", "-m", "x", "--message=y"}, values).ok());
  // Without the declaration it is a switch, which takes no value.
  EXPECT_FALSE(ParseArgs({"commit", "--close-delay=5"}).ok());
}

TEST(ParseArgsTest, BadValuesAreUsageErrors) {
  EXPECT_FALSE(ParseArgs({"-o", "yaml", "types"}).ok());
  EXPECT_FALSE(ParseArgs({"--timeout=soon", "types"}).ok());
  EXPECT_FALSE(ParseArgs({"--timeout=-1s", "types"}).ok());
  EXPECT_FALSE(ParseArgs({"types", "--addr"}).ok());
  EXPECT_FALSE(ParseArgs({"types", "--all=maybe"}).ok());
}

TEST(ResolveAddressTest, FlagBeatsAddrBeatsEndpointsFilesBeatDefault) {
  testing::ScopedTempDir dir("reverserctl-cli");
  ASSERT_TRUE(testing::WriteFile(dir.path() + "/splicer.json",
                                 R"({"grpc_port":4242,"http_port":4243,"pid":1})")
                  .ok());
  ASSERT_TRUE(testing::WriteFile(dir.path() + "/gitworker.json", R"({"http_port":1})").ok());
  GlobalOptions options;
  EXPECT_EQ(*ResolveAddress(options, "splicer"), "127.0.0.1:9090");
  options.endpoints_dir = dir.path();
  options.host = "10.0.0.7";
  EXPECT_EQ(*ResolveAddress(options, "splicer"), "10.0.0.7:4242");
  auto missing = ResolveAddress(options, "catalog");
  ASSERT_FALSE(missing.ok());
  EXPECT_TRUE(absl::StrContains(missing.status().message(), "catalog.json")) << missing.status();
  auto no_port = ResolveAddress(options, "gitworker");
  ASSERT_FALSE(no_port.ok());
  EXPECT_TRUE(absl::StrContains(no_port.status().message(), "grpc_port")) << no_port.status();
  options.endpoints_file = dir.path() + "/splicer.json";
  EXPECT_EQ(*ResolveAddress(options, "catalog"), "10.0.0.7:4242");
  options.addr = "a:1";
  EXPECT_EQ(*ResolveAddress(options, "catalog"), "a:1");
  options.service_addr["catalog"] = "c:2";
  EXPECT_EQ(*ResolveAddress(options, "catalog"), "c:2");
  EXPECT_EQ(*ResolveAddress(options, "splicer"), "a:1");
}

TEST(RunTest, HelpGoesToStdoutWithExitZero) {
  auto help = RunArgs({"--help"});
  EXPECT_EQ(help.code, kOk);
  for (const Command& command : Commands()) {
    EXPECT_TRUE(absl::StrContains(help.out, command.synopsis)) << command.name;
  }
  auto types = RunArgs({"types", "--help"});
  EXPECT_EQ(types.code, kOk);
  EXPECT_TRUE(absl::StartsWith(types.out, "Usage: reverserctl [options] types [--all] [--why]"))
      << types.out;
  EXPECT_TRUE(absl::StrContains(types.out, "why a type is not followed")) << types.out;
}

TEST(RunTest, BadArgumentsPrintUsageAndExitTwo) {
  struct Case {
    std::vector<std::string> argv;
    std::string message;
  };
  for (const Case& c : std::vector<Case>{
           {{}, "missing command"},
           {{"frobnicate"}, "unknown command \"frobnicate\""},
           {{"types", "--watch"}, "types has no option --watch"},
           {{"branches", "extra"}, "branches takes 0 argument(s), got 1"},
           {{"status"}, "status takes 1 argument(s), got 0"},
           {{"status", "redis"}, "unknown service \"redis\""},
           {{"resplice", "mirror"}, "target \"mirror\" is not namespace/name"},
           {{"streams", "a/b/c"}, "target \"a/b/c\" is not namespace/name"},
           {{"compact", "nope"}, "is not group/version/resource"},
           {{"-o", "yaml", "types"}, "not an output format"},
       }) {
    // Commands that reach for a server first are pointed at a closed port: usage errors must
    // come before any call.
    std::vector<std::string> argv = c.argv;
    argv.push_back("--addr=127.0.0.1:1");
    argv.push_back("--grpc_insecure");
    auto r = RunArgs(argv);
    EXPECT_EQ(r.code, kUsage) << absl::StrJoin(c.argv, " ") << "\n" << r.err;
    EXPECT_TRUE(absl::StrContains(r.err, c.message)) << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
  }
  // Usage errors about a command show that command's usage.
  auto r = RunArgs({"branches", "extra"});
  EXPECT_TRUE(absl::StrContains(r.err, "Usage: reverserctl [options] branches")) << r.err;
}

TEST(RunTest, TheTransportMustBeChosenBeforeAnyCall) {
  for (const auto& [argv, message] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"health"}, "gRPC needs mutual TLS: set --grpc_tls_ca"},
           {{"health", "--grpc_tls_ca=/no/such/ca.crt", "--grpc_tls_cert=/x", "--grpc_tls_key=/y"},
            "--grpc_tls_ca: cannot read /no/such/ca.crt"},
           {{"health", "--grpc_insecure", "--grpc_tls_ca=/x"}, "exclude each other"}}) {
    std::vector<std::string> args = argv;
    args.push_back("--addr=127.0.0.1:1");
    auto r = RunArgs(args);
    EXPECT_EQ(r.code, kUsage) << r.err;
    EXPECT_TRUE(absl::StrContains(r.err, message)) << r.err;
    EXPECT_TRUE(absl::StrContains(r.err, "reverser-admin")) << r.err;
  }
  Invocation parsed = *ParseArgs({"--grpc_tls_ca=ca", "--grpc_tls_cert", "c", "--grpc_tls_key=k",
                                  "--grpc_tls_server_name=reverser-splicer.ops.svc", "health"});
  EXPECT_EQ(parsed.options.tls_server_name, "reverser-splicer.ops.svc");
  EXPECT_EQ(parsed.options.tls_ca, "ca");
  EXPECT_EQ(parsed.options.tls_cert, "c");
  EXPECT_EQ(parsed.options.tls_key, "k");
  EXPECT_FALSE(parsed.options.insecure);
  EXPECT_TRUE(ParseArgs({"--grpc_insecure", "health"})->options.insecure);
}

TEST(RunTest, UnreachableServiceIsOneLineNamingItAndExitOne) {
  auto port = testing::PickFreePort();  // free a moment ago: nothing listens there
  ASSERT_TRUE(port.ok());
  std::string address = "127.0.0.1:" + std::to_string(*port);
  for (const std::vector<std::string>& argv :
       std::vector<std::vector<std::string>>{{"--gitworker_addr=" + address, "branches"},
                                             {"--catalog_addr=" + address, "claims"},
                                             {"--splicer_addr=" + address, "resplice", "a/b"},
                                             {"--catalog_addr=" + address, "status", "catalog"}}) {
    std::vector<std::string> args = argv;
    args.push_back("--grpc_insecure");
    auto r = RunArgs(args);
    EXPECT_EQ(r.code, kFailed) << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
    EXPECT_TRUE(absl::StartsWith(r.err, "reverserctl: ")) << r.err;
    EXPECT_TRUE(absl::StrContains(r.err, " at " + address + ": UNAVAILABLE")) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
  auto missing = RunArgs({"--grpc_insecure", "--endpoints_dir=/nonexistent", "branches"});
  EXPECT_EQ(missing.code, kFailed);
  EXPECT_TRUE(absl::StrContains(missing.err, "/nonexistent/gitworker.json")) << missing.err;
}

}  // namespace
}  // namespace reverser::reverserctl
