#pragma once

// Test-only: a tiny scripted HTTP(S) server on 127.0.0.1 for exercising the client's transport,
// retry and stream handling where an exact byte sequence or fault is needed. Integration tests
// against the project's API server use tools/kube-sim instead.

#include <httplib.h>

#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace reverser::kube::testing {

class ScriptedServer {
 public:
  // Plain HTTP.
  ScriptedServer() : server_(std::make_unique<httplib::Server>()) { Init(); }
  // HTTPS with the given PEM files; with `client_ca_file`, client certificates are required.
  ScriptedServer(const std::string& cert_file, const std::string& key_file,
                 const std::string& client_ca_file = "")
      : server_(std::make_unique<httplib::SSLServer>(
            cert_file.c_str(), key_file.c_str(),
            client_ca_file.empty() ? nullptr : client_ca_file.c_str())),
        tls_(true) {
    Init();
  }
  ~ScriptedServer() {
    server_->stop();
    if (thread_.joinable()) thread_.join();
  }

  httplib::Server& server() { return *server_; }

  // Starts serving; call after registering handlers.
  void Start() {
    port_ = server_->bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_->listen_after_bind(); });
    absl::Time deadline = absl::Now() + absl::Seconds(10);
    while (!server_->is_running() && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(2));
  }

  int port() const { return port_; }
  std::string url() const {
    return std::string(tls_ ? "https" : "http") + "://127.0.0.1:" + std::to_string(port_);
  }

  // "METHOD target" of every request received, in order.
  std::vector<std::string> requests() {
    std::lock_guard lock(mu_);
    return requests_;
  }
  // Headers of the last request.
  httplib::Headers last_headers() {
    std::lock_guard lock(mu_);
    return last_headers_;
  }

 private:
  void Init() {
    server_->set_tcp_nodelay(true);  // avoid Nagle/delayed-ACK stalls between header and body
    server_->set_pre_routing_handler([this](const httplib::Request& req, httplib::Response&) {
      std::lock_guard lock(mu_);
      requests_.push_back(req.method + " " + req.target);
      last_headers_ = req.headers;
      return httplib::Server::HandlerResponse::Unhandled;
    });
  }

  std::unique_ptr<httplib::Server> server_;
  bool tls_ = false;
  int port_ = 0;
  std::thread thread_;
  std::mutex mu_;
  std::vector<std::string> requests_;
  httplib::Headers last_headers_;
};

}  // namespace reverser::kube::testing
