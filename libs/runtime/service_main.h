#pragma once

// The main() every service shares: parse flags, build the host, let the service set itself up,
// serve until SIGTERM/SIGINT, shut down in order. Services supply a ServiceApp.

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "libs/runtime/service_host.h"

namespace reverser::runtime {

class ServiceApp {
 public:
  virtual ~ServiceApp() = default;
  // Registers gRPC services, HTTP routes and components on `host`, spawns actors. Called after
  // the host exists and before it starts listening.
  virtual absl::Status Setup(ServiceHost& host) = 0;
  // Called after listening started (e.g. to begin connecting to peers).
  virtual absl::Status Run(ServiceHost& /*host*/) { return absl::OkStatus(); }
  // Called on shutdown before the host stops serving.
  virtual void Stop() {}
};

struct ServiceMainSpec {
  std::string service;  // catalog, materializer, splicer, gitworker
  std::string usage;    // first lines of --help
};

// Returns the process exit code.
int RunServiceMain(int argc, char** argv, const ServiceMainSpec& spec,
                   std::unique_ptr<ServiceApp> (*make_app)());

}  // namespace reverser::runtime
