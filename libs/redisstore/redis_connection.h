#pragma once

// The one place where this project talks to Redis: a synchronous connection with connect/command
// timeouts, lazy reconnect, binary-safe argv commands, pipelines, MULTI/EXEC and Lua scripts
// (EVALSHA with EVAL fallback), in plaintext or over TLS (OpenSSL, the server's certificate
// verified against a CA and a name). The connection carries the bytes itself (its own socket,
// wrapped in TLS or not; the same code path either way) and uses hiredis 0.14 only to parse
// replies. Every failure is an absl::Status:
//   Unavailable       connection refused/lost (the next call reconnects), server LOADING/BUSY
//   DeadlineExceeded  the command timed out (the connection is dropped: its reply may still come)
//   Aborted           EXEC discarded by WATCH
//   FailedPrecondition/InvalidArgument/Internal  error replies (WRONGTYPE, ERR ...)
//   InvalidArgument   (Connect) a TLS file that cannot be loaded
// A TLS handshake that fails (an untrusted certificate, a wrong name, a plaintext port) is
// Unavailable with the reason, e.g. "certificate not accepted: unable to get local issuer
// certificate".
//
// A connection is NOT thread-safe: use one per actor or thread.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace reverser::redisstore {
namespace internal {
class TlsClientConfig;  // redis_transport.h
}  // namespace internal

struct RedisOptions {
  std::string host = "127.0.0.1";
  int port = 6379;
  std::string username;  // ACL user for AUTH (Redis 6+); empty: the default user
  std::string password;  // AUTH after connecting when non-empty
  int database = 0;      // SELECT after connecting when non-zero
  absl::Duration connect_timeout = absl::Seconds(2);
  absl::Duration command_timeout = absl::Seconds(5);

  // TLS (Redis 6+ `tls-port`). The server's certificate must chain to tls_ca_file (PEM; empty:
  // the system's trust store) and name tls_server_name (empty: host) as a DNS name, or as an IP
  // address when the name is one. tls_cert_file + tls_key_file (PEM) are a client certificate,
  // for a server with `tls-auth-clients yes`. The files are read at Connect and again at each
  // reconnect (rotated files apply to the next connection; a reload that fails keeps the last
  // good ones).
  bool tls = false;
  std::string tls_ca_file;
  std::string tls_cert_file;
  std::string tls_key_file;
  std::string tls_server_name;

  // Redis behind Sentinel: with sentinels ("host:port" each), host and port are not used; each
  // connection asks the sentinels in turn for the primary of `sentinel_master`
  // (SENTINEL get-master-addr-by-name), connects to it and checks with ROLE that it is the
  // primary. A connection that is closed (Sentinel drops clients on failover) or answered
  // READONLY (a demoted primary) is dropped; the next command finds the new primary. Sentinels
  // are reached with the same TLS settings, authenticated with the sentinel_* credentials when
  // set.
  std::vector<std::string> sentinels;
  std::string sentinel_master;
  std::string sentinel_username;
  std::string sentinel_password;

  // Parses "host:port" (the --redis_address flag form).
  static absl::StatusOr<RedisOptions> FromAddress(absl::string_view address);
};

// An owned copy of one RESP2 reply (hiredis replies are freed right after conversion).
class RedisReply {
 public:
  enum class Type { kNil, kString, kStatus, kInteger, kArray, kError };

  static RedisReply Nil() { return RedisReply(Type::kNil); }
  static RedisReply String(std::string s) { return RedisReply(Type::kString, std::move(s)); }
  static RedisReply StatusReply(std::string s) { return RedisReply(Type::kStatus, std::move(s)); }
  static RedisReply Error(std::string s) { return RedisReply(Type::kError, std::move(s)); }
  static RedisReply Integer(int64_t v);
  static RedisReply Array(std::vector<RedisReply> elements);

  Type type() const { return type_; }
  bool IsNil() const { return type_ == Type::kNil; }
  bool IsError() const { return type_ == Type::kError; }
  bool IsArray() const { return type_ == Type::kArray; }
  // Raw payload of a string, status or error reply.
  const std::string& str() const { return str_; }
  int64_t integer() const { return integer_; }
  const std::vector<RedisReply>& elements() const { return elements_; }
  // For moving large payloads out (a checkpoint read) instead of copying them.
  std::string& mutable_str() { return str_; }
  std::vector<RedisReply>& mutable_elements() { return elements_; }

  // Typed accessors: a clear InvalidArgument error when the reply has another shape.
  absl::StatusOr<std::string> AsString() const;                         // bulk or status string
  absl::StatusOr<std::optional<std::string>> AsOptionalString() const;  // nil -> nullopt
  absl::StatusOr<int64_t> AsInteger() const;
  absl::StatusOr<std::vector<std::string>> AsStringArray() const;  // nil elements rejected
  // A flat [k1, v1, k2, v2, ...] array (HGETALL, stream entry fields) as a map.
  absl::StatusOr<absl::flat_hash_map<std::string, std::string>> AsStringMap() const;
  // The error reply as a Status (OK for non-error replies).
  absl::Status ErrorStatus() const;

  std::string DebugString() const;

 private:
  explicit RedisReply(Type type, std::string s = {}) : type_(type), str_(std::move(s)) {}
  Type type_;
  std::string str_;
  int64_t integer_ = 0;
  std::vector<RedisReply> elements_;
};

// Maps a Redis error reply ("WRONGTYPE ...", "NOSCRIPT ...", "ERR ...") to a Status code.
absl::Status RedisErrorToStatus(absl::string_view message);

// Loads the TLS files of `options` (CA, client certificate and key) as Connect does, without
// connecting: InvalidArgument naming the file and what is wrong with it. OK when TLS is off.
absl::Status CheckRedisTlsFiles(const RedisOptions& options);

using RedisCommand = std::vector<std::string>;
// A command whose arguments refer to bytes the caller keeps alive for the call: large values
// (stream entry bodies) are sent from where they lie, without a copy into a RedisCommand first.
using RedisCommandView = std::vector<absl::string_view>;

// A Lua script run by SHA1 (EVALSHA), loaded with EVAL on NOSCRIPT (after a Redis restart).
class LuaScript {
 public:
  explicit LuaScript(std::string source);
  const std::string& source() const { return source_; }
  const std::string& sha1() const { return sha1_; }

 private:
  std::string source_;
  std::string sha1_;  // lower-case hex
};

class RedisConnection {
 public:
  // Connects (options.connect_timeout bounds the TCP connect and the TLS handshake together) and
  // authenticates; Unavailable if unreachable or the handshake fails, InvalidArgument if a TLS
  // file cannot be loaded. Each later wait for the socket (to send, to receive) is bounded by
  // options.command_timeout.
  static absl::StatusOr<std::unique_ptr<RedisConnection>> Connect(RedisOptions options);
  ~RedisConnection();
  RedisConnection(const RedisConnection&) = delete;
  RedisConnection& operator=(const RedisConnection&) = delete;

  // Runs one command; arguments are binary-safe. An error reply becomes a non-OK Status.
  absl::StatusOr<RedisReply> Command(const RedisCommand& argv);
  // Same, with a longer socket timeout for blocking commands (XREAD BLOCK, BLPOP): the socket
  // timeout becomes `block + options.command_timeout` for this call only.
  absl::StatusOr<RedisReply> BlockingCommand(const RedisCommand& argv, absl::Duration block);
  // Sends all commands in one round trip; per-command error replies are returned as kError
  // replies (not as a failed Status), so callers can inspect each.
  absl::StatusOr<std::vector<RedisReply>> Pipeline(const std::vector<RedisCommand>& commands);
  // MULTI, commands..., EXEC in one round trip: all or nothing. Returns EXEC's replies (an
  // element may be a kError reply for a runtime error such as WRONGTYPE). Aborted if EXEC was
  // discarded (WATCH), FailedPrecondition if a command was rejected while queueing.
  absl::StatusOr<std::vector<RedisReply>> Transaction(const std::vector<RedisCommand>& commands);
  // Transaction for commands whose arguments are views (no copy of the bytes first: stream
  // entries are sent from where they lie). After a WATCH on this connection, an
  // Aborted status means nothing was written (and the watch is over, as after every EXEC).
  absl::StatusOr<std::vector<RedisReply>> TransactionViews(
      const std::vector<RedisCommandView>& commands);
  // EVALSHA, falling back to EVAL when the server does not know the script yet.
  absl::StatusOr<RedisReply> Eval(const LuaScript& script, const std::vector<std::string>& keys,
                                  const std::vector<std::string>& args);

  // Drops the current socket and connects again now.
  absl::Status Reconnect();
  bool connected() const { return link_ != nullptr; }
  const RedisOptions& options() const { return options_; }

 private:
  // One open connection: the transport (socket, TLS session if any) and the reply parser.
  class Link;

  explicit RedisConnection(RedisOptions options);
  absl::Status EnsureConnected();
  // Connects to options_.host:port and authenticates.
  absl::Status OpenLink();
  // Sentinel mode: sets options_.host and port to the primary the sentinels name.
  absl::Status DiscoverPrimary();
  // Sentinel mode: Unavailable (and the link dropped) unless ROLE says primary.
  absl::Status CheckPrimary();
  void SetSocketTimeout(absl::Duration timeout);
  // Sends commands, then reads one reply per command. Connection-level failures drop the
  // link (so the next call reconnects) and return Unavailable/DeadlineExceeded.
  // (RedisCommand or RedisCommandView; defined in the .cc, the only user.)
  template <typename Argv>
  absl::StatusOr<std::vector<RedisReply>> RoundTrip(const std::vector<Argv>& commands);
  template <typename Argv>
  absl::StatusOr<std::vector<RedisReply>> RunTransaction(const std::vector<Argv>& commands);
  // Drops the link; keeps `failure`'s code (Unavailable or DeadlineExceeded), names the server.
  absl::Status ConnectionFailure(absl::string_view during, const absl::Status& failure);
  void Drop();

  RedisOptions options_;
  // The TLS client context last loaded (CA, client certificate); null without TLS.
  std::shared_ptr<const internal::TlsClientConfig> tls_;
  std::unique_ptr<Link> link_;
  std::string out_;  // RESP being sent (reused between calls)
};

}  // namespace reverser::redisstore
