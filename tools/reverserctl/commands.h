#pragma once

// The subcommands: one per admin call, each a row of the command table with its usage, the
// service it talks to, the switches it accepts and the function that runs it.

#include <ostream>
#include <string>
#include <vector>

#include "tools/reverserctl/cli.h"
#include "tools/reverserctl/connection.h"

namespace reverser::reverserctl {

// Exit codes: kOk, kFailed (the call failed or reported failure), kUsage (bad arguments).
inline constexpr int kOk = 0;
inline constexpr int kFailed = 1;
inline constexpr int kUsage = 2;

struct CommandContext {
  const Invocation& invocation;
  // The command's service; null for `health` without a service (it checks every service).
  const Connection* connection;
  const runtime::GrpcSecurity& security;  // the transport chosen (health connects on its own)
  bool json;  // -o json (or the command's default)
  std::ostream& out;
  std::ostream& err;

  bool Switch(const std::string& name) const { return invocation.switches.count(name) > 0; }
  // Prints "reverserctl: <service> at <address>: CODE: message" and returns kFailed.
  int RpcFailed(const grpc::Status& status) const;
  const Connection& conn() const { return *connection; }
};

struct Command {
  std::string name;
  std::string synopsis;  // e.g. "types [--all] [--why]"
  std::string summary;   // one line, for the tool's help
  std::string help;      // the command's --help body
  // The service it calls; empty: the first positional argument names it (status, health).
  std::string service;
  size_t min_args = 0;
  size_t max_args = 0;
  std::vector<std::string> switches;
  int (*run)(const CommandContext&) = nullptr;
};

const std::vector<Command>& Commands();

std::string ToolUsage();
std::string CommandUsage(const Command& command);

// Runs argv (without argv[0]) and returns the exit code; output to `out`, errors to `err`.
int Run(const std::vector<std::string>& argv, std::ostream& out, std::ostream& err);

}  // namespace reverser::reverserctl
