#pragma once

// For tests and benches: the one way from a real redis-server (tests/fixtures) to options and a
// connection for it.

#include <memory>

#include "absl/status/statusor.h"
#include "libs/redisstore/redis_connection.h"
#include "tests/fixtures/redis_server.h"

namespace reverser::redisstore {

// Options that reach `server` (defaults otherwise).
inline RedisOptions RedisOptionsFor(const testing::RedisServer& server) {
  RedisOptions options;
  options.host = server.host();
  options.port = server.port();
  return options;
}

// A new connection to `server`.
inline absl::StatusOr<std::unique_ptr<RedisConnection>> ConnectTo(
    const testing::RedisServer& server) {
  return RedisConnection::Connect(RedisOptionsFor(server));
}

}  // namespace reverser::redisstore
