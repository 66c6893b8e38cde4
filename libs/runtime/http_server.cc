#include "libs/runtime/http_server.h"

#include "absl/strings/str_cat.h"
#include "httplib.h"

namespace reverser::runtime {

HttpServer::HttpServer(const TlsOptions* tls) {
  if (tls != nullptr) {
    server_ = std::make_unique<httplib::SSLServer>(
        tls->cert_file.c_str(), tls->key_file.c_str(),
        tls->client_ca_file.empty() ? nullptr : tls->client_ca_file.c_str());
  } else {
    server_ = std::make_unique<httplib::Server>();
  }
  // Small request/response pairs (webhook batches, probes) must not wait for delayed ACKs.
  server_->set_tcp_nodelay(true);
  // httplib's Stop() waits for idle keep-alive connections to time out (no wake-up), and an API
  // server keeps its audit connection open: bound that wait to 1 s instead of the default 5 s.
  server_->set_keep_alive_timeout(1);
}

HttpServer::~HttpServer() { Stop(); }

bool HttpServer::valid() const { return server_->is_valid(); }

absl::StatusOr<int> HttpServer::Start(const std::string& address, int port) {
  if (!server_->is_valid()) {
    return absl::InvalidArgumentError("HTTP server is not valid (bad TLS certificate or key?)");
  }
  if (port == 0) {
    port_ = server_->bind_to_any_port(address.c_str());
  } else {
    port_ = server_->bind_to_port(address.c_str(), port) ? port : -1;
  }
  if (port_ <= 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", address, ":", port));
  }
  thread_ = std::thread([this] { server_->listen_after_bind(); });
  // Bound already, so clients can connect; wait until the accept loop runs for tidy shutdowns.
  for (int i = 0; i < 1000 && !server_->is_running(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return port_;
}

void HttpServer::Stop() {
  if (thread_.joinable()) {
    server_->stop();
    thread_.join();
  }
}

}  // namespace reverser::runtime
