#include "libs/runtime/flags.h"

#include <cstdlib>
#include <iostream>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "libs/runtime/log.h"

ABSL_FLAG(std::string, listen_address, "0.0.0.0", "Address the gRPC and HTTP servers bind to.");
ABSL_FLAG(int, grpc_port, 9090, "gRPC port (services, health, reflection, admin); 0 picks a free port.");
ABSL_FLAG(int, http_port, 8080, "HTTP port for /healthz, /readyz and /metrics; 0 picks a free port.");
ABSL_FLAG(std::string, endpoints_file, "",
          "If set, write {\"grpc_port\":..,\"http_port\":..} to this file once listening.");
ABSL_FLAG(std::string, instance, "", "Replica identity (default: the hostname).");
ABSL_FLAG(std::string, log_level, "info", "Minimum log level: debug, info, warning, error.");
ABSL_FLAG(absl::Duration, shutdown_grace, absl::Seconds(5),
          "How long an orderly shutdown may take after SIGTERM.");

namespace reverser::runtime {

std::vector<char*> ParseServiceFlags(int argc, char** argv, const std::string& usage) {
  absl::FlagsUsageConfig config;
  // --help shows this project's flags (the service's own and the shared ones), not abseil's.
  config.contains_help_flags = [](absl::string_view file) {
    return absl::StrContains(file, "services/") || absl::StrContains(file, "libs/") ||
           absl::StrContains(file, "tools/");
  };
  config.contains_helpshort_flags = config.contains_help_flags;
  config.normalize_filename = [](absl::string_view file) { return std::string(file); };
  config.version_string = [] { return std::string(Version()) + "\n"; };
  absl::SetFlagsUsageConfig(config);
  absl::SetProgramUsageMessage(usage);
  std::vector<char*> rest = absl::ParseCommandLine(argc, argv);
  LogLevel level;
  if (!ParseLogLevel(absl::GetFlag(FLAGS_log_level), &level)) {
    std::cerr << "--log_level must be one of debug, info, warning, error\n";
    std::exit(2);
  }
  SetLogLevel(level);
  return rest;
}

ServiceHostOptions HostOptionsFromFlags(const std::string& service) {
  ServiceHostOptions options;
  options.service = service;
  options.listen_address = absl::GetFlag(FLAGS_listen_address);
  options.grpc_port = absl::GetFlag(FLAGS_grpc_port);
  options.http_port = absl::GetFlag(FLAGS_http_port);
  options.endpoints_file = absl::GetFlag(FLAGS_endpoints_file);
  options.instance = absl::GetFlag(FLAGS_instance);
  options.shutdown_grace = absl::GetFlag(FLAGS_shutdown_grace);
  return options;
}

}  // namespace reverser::runtime
