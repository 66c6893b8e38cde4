#pragma once

// For tests and benches: the one way from a real redis-server (tests/fixtures) to options and a
// connection for it.

#include <memory>

#include "absl/status/statusor.h"
#include "libs/redisstore/redis_connection.h"
#include "tests/fixtures/certs.h"
#include "tests/fixtures/redis_server.h"

namespace reverser::redisstore {

// Options that reach `server`: TLS against its CA (with its client certificate when it asks
// for one) and its credentials when it has them; defaults otherwise.
inline RedisOptions RedisOptionsFor(const testing::RedisServer& server) {
  RedisOptions options;
  options.host = server.host();
  options.port = server.port();
  options.username = server.options().username;
  options.password = server.options().password;
  if (const testing::TestPki* pki = server.pki(); pki != nullptr) {
    options.tls = true;
    options.tls_ca_file = pki->ca_cert;
    if (server.options().tls_auth_clients) {
      options.tls_cert_file = pki->client_cert;
      options.tls_key_file = pki->client_key;
    }
  }
  return options;
}

// A new connection to `server`.
inline absl::StatusOr<std::unique_ptr<RedisConnection>> ConnectTo(
    const testing::RedisServer& server) {
  return RedisConnection::Connect(RedisOptionsFor(server));
}

}  // namespace reverser::redisstore
