#pragma once

// What every reverser service process shares: common flags, structured logs, the CAF actor
// system, a gRPC server (standard health checking, reflection, the service's admin API), an HTTP
// server with /healthz, /readyz and /metrics, readiness of named components, and an orderly
// shutdown on SIGTERM/SIGINT within the configured grace.

#include <caf/all.hpp>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "libs/runtime/admin_review.h"
#include "libs/runtime/grpc_security.h"
#include "libs/runtime/http_server.h"
#include "libs/runtime/metrics.h"
#include "proto/reverser/v1/admin.pb.h"

namespace grpc {
class Server;
class Service;
}  // namespace grpc

namespace reverser::runtime {

// Settings every service takes from its command line (see flags.h for the flag names).
struct ServiceHostOptions {
  std::string service;  // catalog, materializer, splicer, gitworker
  std::string listen_address = "0.0.0.0";
  int grpc_port = 9090;  // 0: pick a free port (logged, and written to endpoints_file)
  int http_port = 8080;
  std::string endpoints_file;  // if set: JSON {"grpc_port":..,"http_port":..} once listening
  std::string instance;        // replica identity; default: hostname
  absl::Duration shutdown_grace = absl::Seconds(5);
  size_t actor_threads = 2;
  // mTLS and per-call authorization; Start() refuses neither TLS files nor insecure.
  GrpcSecurity grpc_security;
  // The largest request message the gRPC server reads: small by default, since every inbound
  // call but a delivery is small; the gitworker raises it for resyncs (whole desired sets).
  int max_receive_message_bytes = 16 << 20;
};

class ServiceHost {
 public:
  explicit ServiceHost(ServiceHostOptions options);
  ~ServiceHost();
  ServiceHost(const ServiceHost&) = delete;
  ServiceHost& operator=(const ServiceHost&) = delete;

  caf::actor_system& actors() { return *actor_system_; }
  MetricsRegistry& metrics() { return MetricsRegistry::Global(); }
  const ServiceHostOptions& options() const { return options_; }

  // Whether operators' calls are reviewed by the API server (TLS and --admin_auth=kubernetes):
  // then Setup must give the host a reviewer, or Start() refuses to serve.
  bool ReviewsOperators() const {
    return !options_.grpc_security.insecure && options_.grpc_security.review_operators;
  }
  // The reviewer of operators' bearer tokens (libs/kube/access_review.h), set before Start().
  void SetAdminReviewer(std::shared_ptr<AdminReviewer> reviewer) {
    admin_reviewer_ = std::move(reviewer);
  }

  // Raises (or lowers) the largest request the gRPC server reads; before Start().
  void SetMaxReceiveMessageBytes(int bytes) { options_.max_receive_message_bytes = bytes; }

  // Services to serve on the gRPC port, registered before Start(). Not owned.
  void AddGrpcService(grpc::Service* service);
  // The HTTP server, to add routes before Start().
  HttpServer& http() { return http_; }

  // Starts listening. The service is live (/healthz) from here; ready (/readyz, gRPC health
  // SERVING) once every registered component reports ready.
  absl::Status Start();

  // Declares or updates a component. A gating component's readiness gates /readyz and gRPC
  // health; a non-gating one (a downstream peer that reconnects by itself) is only reported.
  void SetComponent(const std::string& name, bool ready, const std::string& detail = "",
                    bool gating = true);
  bool Ready() const;
  // Service-specific key/values shown by the admin Status call.
  void SetDetail(const std::string& key, const std::string& value);

  // The admin Status answer.
  reverser::v1::ServiceStatus Status() const;

  // Blocks until SIGTERM or SIGINT (see BlockShutdownSignals), or RequestShutdown().
  void WaitForShutdown();
  void RequestShutdown();
  // Stops serving and the actor system; bounded by shutdown_grace.
  void Shutdown();

  int grpc_port() const { return grpc_port_; }
  int http_port() const { return http_port_; }

 private:
  void UpdateHealthServing();

  ServiceHostOptions options_;
  std::unique_ptr<caf::actor_system_config> actor_config_;
  std::unique_ptr<caf::actor_system> actor_system_;
  caf::actor process_monitor_;
  std::vector<grpc::Service*> grpc_services_;
  std::shared_ptr<AdminReviewer> admin_reviewer_;
  std::unique_ptr<grpc::Server> grpc_server_;
  HttpServer http_;
  int grpc_port_ = 0;
  int http_port_ = 0;
  absl::Time started_at_;

  mutable absl::Mutex mu_;
  std::map<std::string, reverser::v1::ComponentStatus> components_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> non_gating_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::string> details_ ABSL_GUARDED_BY(mu_);
  bool shutdown_requested_ ABSL_GUARDED_BY(mu_) = false;
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
};

// Blocks SIGTERM/SIGINT in the calling thread and all threads it later creates, so the host can
// wait for them synchronously. Call first thing in main(), before any thread starts.
void BlockShutdownSignals();

// The build's version string.
const char* Version();

}  // namespace reverser::runtime
