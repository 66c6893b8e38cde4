#pragma once

// An HTTP server on its own thread (cpp-httplib). Services use it for /healthz, /readyz and
// /metrics; other listeners (the audit webhook) reuse it with TLS.

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"

namespace httplib {
class Server;
}

namespace reverser::runtime {

struct TlsOptions {
  std::string cert_file;
  std::string key_file;
  std::string client_ca_file;  // non-empty: require and verify client certificates (mTLS)
};

class HttpServer {
 public:
  // Plain HTTP, or HTTPS when `tls` is given.
  explicit HttpServer(const TlsOptions* tls = nullptr);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Routes are registered on the underlying server before Start().
  httplib::Server& routes() { return *server_; }
  bool valid() const;

  // Binds (port 0 picks a free one) and starts serving on a background thread.
  absl::StatusOr<int> Start(const std::string& address, int port);
  void Stop();
  int port() const { return port_; }

 private:
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  int port_ = 0;
};

}  // namespace reverser::runtime
