#pragma once

// The subcommands: one per admin call, each a row of the command table with its usage, the
// service it talks to, the options it accepts and the function that runs it.

#include <ostream>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "tools/reverserctl/cli.h"
#include "tools/reverserctl/connection.h"

namespace reverser::reverserctl {

// Exit codes: kOk, kFailed (the call failed or reported failure), kUsage (bad arguments).
inline constexpr int kOk = 0;
inline constexpr int kFailed = 1;
inline constexpr int kUsage = 2;

// Command::service of the commands that call the Kubernetes API as the kubeconfig's user: they
// need neither the mesh transport nor a service address.
inline constexpr char kKubernetesService[] = "kubernetes";

struct CommandContext {
  const Invocation& invocation;
  // The command's service; null for `health` without a service (it checks every service) and
  // for Kubernetes commands.
  const Connection* connection;
  const runtime::GrpcSecurity& security;  // the transport chosen (health connects on its own)
  bool json;                              // -o json (or the command's default)
  std::ostream& out;
  std::ostream& err;

  bool Switch(const std::string& name) const { return invocation.switches.count(name) > 0; }
  // The value option `name` (long name), or null when not given.
  const std::string* Value(const std::string& name) const {
    auto it = invocation.values.find(name);
    return it == invocation.values.end() ? nullptr : &it->second;
  }
  // Prints "reverserctl: <service> at <address>: CODE: message" and returns kFailed.
  int RpcFailed(const grpc::Status& status) const;
  const Connection& conn() const { return *connection; }
};

struct Command {
  std::string name;
  std::string synopsis;  // e.g. "types [--all] [--why]"
  std::string summary;   // one line, for the tool's help
  std::string help;      // the command's --help body
  // The service it calls; empty: the first positional argument names it (status, health);
  // kKubernetesService: the Kubernetes API.
  std::string service;
  size_t min_args = 0;
  size_t max_args = 0;
  std::vector<std::string> switches;
  int (*run)(const CommandContext&) = nullptr;
  std::vector<ValueOption> values;  // options that take a value (e.g. -m MESSAGE)
  // --timeout when not given; zero: the global default. For commands that wait for an outcome.
  absl::Duration default_timeout = absl::ZeroDuration();
};

const std::vector<Command>& Commands();

std::string ToolUsage();
std::string CommandUsage(const Command& command);

// Runs argv (without argv[0]) and returns the exit code; output to `out`, errors to `err`.
int Run(const std::vector<std::string>& argv, std::ostream& out, std::ostream& err);

}  // namespace reverser::reverserctl
