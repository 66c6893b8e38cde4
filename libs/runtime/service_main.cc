#include "libs/runtime/service_main.h"

#include "libs/core/invariant.h"
#include "libs/runtime/flags.h"
#include "libs/runtime/log.h"

namespace reverser::runtime {

int RunServiceMain(int argc, char** argv, const ServiceMainSpec& spec,
                   std::unique_ptr<ServiceApp> (*make_app)()) {
  BlockShutdownSignals();
  ParseServiceFlags(argc, argv, spec.usage);
  // An impossible state is an error line and a counted series (libs/core/invariant.h).
  Counter& bugs = MetricsRegistry::Global().GetCounter(
      "reverser_bugs_total",
      "States the code rules out that happened anyway (REVERSER_BUG): each is a bug to report.");
  core::SetBugHandler([&bugs](const core::BugReport& report) {
    bugs.Increment();
    LogError("bug", {{"file", report.file},
                     {"line", std::to_string(report.line)},
                     {"what", std::string(report.what)}});
  });
  ServiceHostOptions options = HostOptionsFromFlags(spec.service);
  // Reported after Setup, so a service's own flag errors come first.
  absl::StatusOr<GrpcSecurity> security = GrpcSecurityFromFlags();
  if (security.ok()) options.grpc_security = *security;
  ServiceHost host(std::move(options));
  std::unique_ptr<ServiceApp> app = make_app();
  if (absl::Status s = app->Setup(host); !s.ok()) {
    LogError("setup failed", {{"error", s.ToString()}});
    return 1;
  }
  if (!security.ok()) {
    LogError("start failed", {{"error", security.status().ToString()}});
    return 1;
  }
  if (absl::Status s = host.Start(); !s.ok()) {
    LogError("start failed", {{"error", s.ToString()}});
    return 1;
  }
  if (absl::Status s = app->Run(host); !s.ok()) {
    LogError("run failed", {{"error", s.ToString()}});
    app->Stop();
    host.Shutdown();
    return 1;
  }
  host.WaitForShutdown();
  app->Stop();
  host.Shutdown();
  return 0;
}

}  // namespace reverser::runtime
