#include "libs/runtime/service_host.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <future>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "httplib.h"
#include "libs/runtime/caf_thread.h"
#include "libs/runtime/log.h"
#include "nlohmann/json.hpp"

namespace reverser::runtime {
namespace {

using tick_atom = caf::atom_constant<caf::atom("tick")>;

// Resident set size in bytes, from /proc/self/statm.
double ResidentBytes() {
  std::ifstream statm("/proc/self/statm");
  long pages_total = 0, pages_resident = 0;
  statm >> pages_total >> pages_resident;
  return static_cast<double>(pages_resident) * static_cast<double>(::sysconf(_SC_PAGESIZE));
}

// Keeps the process gauges current; the first actor every service runs.
caf::behavior ProcessMonitor(caf::event_based_actor* self, MetricsRegistry* metrics) {
  self->send(self, tick_atom::value);
  return {[=](tick_atom) {
    metrics->GetGauge("process_resident_memory_bytes", "Resident memory size in bytes.")
        .Set(ResidentBytes());
    self->delayed_send(self, std::chrono::seconds(1), tick_atom::value);
  }};
}

std::string Hostname() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof(buf) - 1) != 0) return "unknown";
  return buf;
}

absl::Status WriteEndpointsFile(const std::string& path, int grpc_port, int http_port) {
  nlohmann::json doc = {{"grpc_port", grpc_port}, {"http_port", http_port}, {"pid", ::getpid()}};
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    if (!out) return absl::InternalError(absl::StrCat("cannot write endpoints file ", tmp));
    out << doc.dump() << "\n";
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot rename endpoints file: ", ec.message()));
  return absl::OkStatus();
}

sigset_t ShutdownSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  return set;
}

}  // namespace

void BlockShutdownSignals() {
  sigset_t set = ShutdownSignals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  // A closed peer must not kill the process on write.
  ::signal(SIGPIPE, SIG_IGN);
}

const char* Version() { return "0.1.0"; }

ServiceHost::ServiceHost(ServiceHostOptions options) : options_(std::move(options)) {
  if (options_.instance.empty()) options_.instance = Hostname();
  SetLogService(options_.service);
  actor_config_ = std::make_unique<caf::actor_system_config>();
  actor_config_->set("scheduler.max-threads", options_.actor_threads);
  actor_system_ = std::make_unique<caf::actor_system>(*actor_config_);
  started_at_ = absl::Now();
  metrics()
      .GetGauge("process_start_time_seconds", "Start time of the process since unix epoch.")
      .Set(absl::ToUnixSeconds(started_at_));
  metrics()
      .GetGauge("reverser_build_info", "Build information.",
                {{"service", options_.service}, {"version", Version()}})
      .Set(1);
}

ServiceHost::~ServiceHost() { Shutdown(); }

void ServiceHost::AddGrpcService(grpc::Service* service) { grpc_services_.push_back(service); }

absl::Status ServiceHost::Start() {
  process_monitor_ = actor_system_->spawn(ProcessMonitor, &metrics());

  http_.routes().Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("ok\n", "text/plain");
  });
  http_.routes().Get("/readyz", [this](const httplib::Request&, httplib::Response& res) {
    bool ready = Ready();
    std::string body;
    {
      absl::MutexLock lock(&mu_);
      for (const auto& [name, c] : components_) {
        absl::StrAppend(&body, c.ready() ? "[+] " : "[-] ", name, c.detail().empty() ? "" : ": ",
                        c.detail(), "\n");
      }
    }
    absl::StrAppend(&body, ready ? "ready\n" : "not ready\n");
    res.status = ready ? 200 : 503;
    res.set_content(body, "text/plain");
  });
  http_.routes().Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics().RenderText(), "text/plain; version=0.0.4; charset=utf-8");
  });
  const GrpcSecurity& security = options_.grpc_security;
  if (absl::Status s = CheckGrpcSecurity(security); !s.ok()) return s;
  if (ReviewsOperators() && admin_reviewer_ == nullptr) {
    return absl::FailedPreconditionError(
        "--admin_auth=kubernetes needs a Kubernetes API to review operators' tokens: give this "
        "service a kubeconfig (--kubeconfig, $KUBECONFIG, or run in a cluster), or choose "
        "--admin_auth=certificate");
  }
  auto http_port = http_.Start(options_.listen_address, options_.http_port);
  if (!http_port.ok()) return http_port.status();
  http_port_ = *http_port;

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  // gRPC sets SO_REUSEPORT by default: a second process given the same port would bind it too
  // and take half of the connections (seen in a test run: splicers' TLS handshakes with another
  // test's server). Off, the second one fails to start with a clear error.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.AddListeningPort(absl::StrCat(options_.listen_address, ":", options_.grpc_port),
                           MeshServerCredentials(security, options_.service, &metrics(),
                                                 ReviewsOperators() ? admin_reviewer_ : nullptr),
                           &grpc_port_);
  // What a caller may make this server read is bounded per service (a delivery's resync is the
  // one large request); what it sends (tables, listings) is the service's own making.
  builder.SetMaxReceiveMessageSize(options_.max_receive_message_bytes);
  builder.SetMaxSendMessageSize(512 * 1024 * 1024);
  for (grpc::Service* service : grpc_services_) builder.RegisterService(service);
  grpc_server_ = builder.BuildAndStart();
  if (!grpc_server_ || grpc_port_ == 0) {
    http_.Stop();
    return absl::UnavailableError(
        absl::StrCat("cannot serve gRPC on ", options_.listen_address, ":", options_.grpc_port));
  }
  UpdateHealthServing();

  if (security.insecure) {
    LogWarning("gRPC is plaintext and unauthenticated (--grpc_insecure): local development only",
               {{"grpc_port", grpc_port_}});
  }
  LogInfo("listening", {{"grpc_port", grpc_port_},
                        {"http_port", http_port_},
                        {"grpc_tls", !security.insecure},
                        {"address", options_.listen_address},
                        {"instance", options_.instance},
                        {"version", Version()}});
  if (!options_.endpoints_file.empty()) {
    if (auto s = WriteEndpointsFile(options_.endpoints_file, grpc_port_, http_port_); !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

void ServiceHost::SetComponent(const std::string& name, bool ready, const std::string& detail,
                               bool gating) {
  bool changed = false;
  {
    absl::MutexLock lock(&mu_);
    if (gating) {
      non_gating_.erase(name);
    } else {
      non_gating_.insert(name);
    }
    auto& c = components_[name];
    changed = c.name().empty() || c.ready() != ready;
    c.set_name(name);
    c.set_ready(ready);
    c.set_detail(detail);
  }
  if (changed) {
    LogInfo("component", {{"component", name}, {"ready", ready}, {"detail", detail}});
    UpdateHealthServing();
  }
}

bool ServiceHost::Ready() const {
  absl::MutexLock lock(&mu_);
  if (shutdown_requested_) return false;
  for (const auto& [name, c] : components_) {
    if (!c.ready() && !non_gating_.count(name)) return false;
  }
  return true;
}

void ServiceHost::SetDetail(const std::string& key, const std::string& value) {
  absl::MutexLock lock(&mu_);
  details_[key] = value;
}

void ServiceHost::UpdateHealthServing() {
  if (!grpc_server_) return;
  if (auto* health = grpc_server_->GetHealthCheckService()) {
    bool ready = Ready();
    health->SetServingStatus(ready);
  }
}

reverser::v1::ServiceStatus ServiceHost::Status() const {
  reverser::v1::ServiceStatus status;
  status.set_service(options_.service);
  status.set_version(Version());
  status.set_instance(options_.instance);
  status.mutable_started_at()->set_seconds(absl::ToUnixSeconds(started_at_));
  status.set_ready(Ready());
  status.set_grpc_port(grpc_port_);
  status.set_http_port(http_port_);
  absl::MutexLock lock(&mu_);
  for (const auto& [name, c] : components_) *status.add_components() = c;
  for (const auto& [k, v] : details_) (*status.mutable_details())[k] = v;
  return status;
}

void ServiceHost::WaitForShutdown() {
  sigset_t set = ShutdownSignals();
  while (true) {
    timespec timeout{0, 100'000'000};  // re-check RequestShutdown() every 100 ms
    int sig = sigtimedwait(&set, nullptr, &timeout);
    if (sig == SIGTERM || sig == SIGINT) {
      LogInfo("shutdown signal", {{"signal", sig == SIGTERM ? "SIGTERM" : "SIGINT"}});
      break;
    }
    absl::MutexLock lock(&mu_);
    if (shutdown_requested_) break;
  }
  absl::MutexLock lock(&mu_);
  shutdown_requested_ = true;
}

void ServiceHost::RequestShutdown() {
  absl::MutexLock lock(&mu_);
  shutdown_requested_ = true;
}

void ServiceHost::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    if (shut_down_) return;
    shut_down_ = true;
    shutdown_requested_ = true;
  }
  absl::Time start = absl::Now();
  UpdateHealthServing();
  if (grpc_server_) {
    // Ends health Watch streams too; without this Shutdown() waits out its whole deadline.
    if (auto* health = grpc_server_->GetHealthCheckService()) health->Shutdown();
    // In-flight calls get a fifth of the grace; long-lived streams are cancelled after that.
    // (gRPC 1.51 waits out this deadline even when idle, so it is kept short.)
    auto deadline =
        std::chrono::system_clock::now() + absl::ToChronoMilliseconds(options_.shutdown_grace / 5);
    grpc_server_->Shutdown(deadline);
    grpc_server_->Wait();
  }
  LogDebug("grpc stopped", {{"elapsed_ms", absl::ToInt64Milliseconds(absl::Now() - start)}});
  http_.Stop();
  if (process_monitor_) caf::anon_send_exit(process_monitor_, caf::exit_reason::user_shutdown);
  process_monitor_ = nullptr;
  // ~actor_system joins every actor and waits until no thread holds its logger. The services drop
  // what their own threads hold (caf_thread.h); a reference left on a thread they do not control
  // would make it wait for ever, so the join runs on a thread of its own, bounded by the grace,
  // and past it the system is left to the process's exit, logged as an error.
  ReleaseCafThreadLogger();
  const size_t running = actor_system_->registry().running();
  const size_t detached = actor_system_->detached_actors();
  auto joined = std::make_shared<std::promise<void>>();
  std::future<void> done = joined->get_future();
  std::thread([system = std::move(actor_system_), config = std::move(actor_config_),
               joined]() mutable {
    system.reset();
    config.reset();
    joined->set_value();
  }).detach();
  if (done.wait_for(absl::ToChronoMilliseconds(options_.shutdown_grace)) !=
      std::future_status::ready) {
    LogError("the actor system did not stop within the shutdown grace; left to the process's exit",
             {{"running_actors", static_cast<long long>(running)},
              {"detached_actors", static_cast<long long>(detached)}});
  }
  LogInfo("stopped", {{"shutdown_ms", absl::ToInt64Milliseconds(absl::Now() - start)}});
}

}  // namespace reverser::runtime
