#include "libs/runtime/service_main.h"

#include "libs/runtime/flags.h"
#include "libs/runtime/log.h"

namespace reverser::runtime {

int RunServiceMain(int argc, char** argv, const ServiceMainSpec& spec,
                   std::unique_ptr<ServiceApp> (*make_app)()) {
  BlockShutdownSignals();
  ParseServiceFlags(argc, argv, spec.usage);
  ServiceHost host(HostOptionsFromFlags(spec.service));
  std::unique_ptr<ServiceApp> app = make_app();
  if (absl::Status s = app->Setup(host); !s.ok()) {
    LogError("setup failed", {{"error", s.ToString()}});
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
