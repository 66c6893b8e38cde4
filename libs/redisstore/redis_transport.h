#pragma once

// The bytes under a RedisConnection: a TCP socket of our own, in plaintext or wrapped in TLS
// (OpenSSL), behind one small interface so both take the same code path. Non-blocking sockets
// with poll(2): each wait for the socket is bounded by the caller's timeout (as SO_RCVTIMEO and
// SO_SNDTIMEO would bound each system call). Internal to //libs/redisstore:connection.

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

typedef struct ssl_ctx_st SSL_CTX;

namespace reverser::redisstore {
struct RedisOptions;
}

namespace reverser::redisstore::internal {

// A TLS client configuration loaded from RedisOptions' files: the CA (or the system's trust
// store), peer verification on, TLS 1.2 or later, and an optional client certificate.
class TlsClientConfig {
 public:
  // InvalidArgument naming the file and what is wrong with it.
  static absl::StatusOr<std::shared_ptr<const TlsClientConfig>> Load(const RedisOptions& options);
  ~TlsClientConfig();
  TlsClientConfig(const TlsClientConfig&) = delete;
  TlsClientConfig& operator=(const TlsClientConfig&) = delete;

  SSL_CTX* ctx() const { return ctx_; }
  // What the server's certificate is checked against, for error messages.
  const std::string& trust() const { return trust_; }

 private:
  TlsClientConfig(SSL_CTX* ctx, std::string trust) : ctx_(ctx), trust_(std::move(trust)) {}
  SSL_CTX* ctx_;
  std::string trust_;
};

class ByteTransport {
 public:
  virtual ~ByteTransport() = default;
  // Sends all of `data`, the bytes as they lie (no copy on our side). Each wait for the socket
  // to take more is at most `timeout`: DeadlineExceeded when it did not, Unavailable when the
  // connection failed.
  virtual absl::Status Write(absl::string_view data, absl::Duration timeout) = 0;
  // Receives at least one byte and at most `size` into `buffer`; returns how many. Waits at
  // most `timeout` for them (DeadlineExceeded); Unavailable when the connection closed or failed.
  virtual absl::StatusOr<size_t> Read(char* buffer, size_t size, absl::Duration timeout) = 0;
};

// Connects to host:port and, when `tls` is set, completes the TLS handshake, verifying the
// server's certificate against `tls`'s trust and `server_name` (a DNS name, or an IP address
// checked against the certificate's IP addresses). `connect_timeout` bounds both together.
// Unavailable with the reason when anything fails (InvalidArgument for an unusable name).
absl::StatusOr<std::unique_ptr<ByteTransport>> OpenTransport(
    const std::string& host, int port, std::shared_ptr<const TlsClientConfig> tls,
    const std::string& server_name, absl::Duration connect_timeout);

}  // namespace reverser::redisstore::internal
