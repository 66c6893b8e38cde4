#include "libs/redisstore/redis_connection.h"

#include <hiredis/hiredis.h>
#include <openssl/sha.h>
#include <signal.h>

#include <mutex>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "libs/core/status.h"
#include "libs/redisstore/redis_transport.h"

namespace reverser::redisstore {
namespace {

// OpenSSL writes with write(2): a peer that went away would raise SIGPIPE and kill the process.
// Ignore it once, process-wide (gRPC does the same); the write then fails with EPIPE. (Plaintext
// is sent with MSG_NOSIGNAL.)
void IgnoreSigpipeOnce() {
  static std::once_flag once;
  std::call_once(once, [] { signal(SIGPIPE, SIG_IGN); });
}

// Converts and frees as it goes: each array element's hiredis copy is released once converted,
// so a large reply (a checkpoint's HGETALL) is never held twice in full.
RedisReply ConvertAndFree(redisReply* reply) {
  RedisReply converted = RedisReply::Nil();
  switch (reply->type) {
    case REDIS_REPLY_STRING:
      converted = RedisReply::String(std::string(reply->str, reply->len));
      break;
    case REDIS_REPLY_STATUS:
      converted = RedisReply::StatusReply(std::string(reply->str, reply->len));
      break;
    case REDIS_REPLY_ERROR:
      converted = RedisReply::Error(std::string(reply->str, reply->len));
      break;
    case REDIS_REPLY_INTEGER:
      converted = RedisReply::Integer(reply->integer);
      break;
    case REDIS_REPLY_ARRAY: {
      std::vector<RedisReply> elements;
      elements.reserve(reply->elements);
      for (size_t i = 0; i < reply->elements; ++i) {
        elements.push_back(ConvertAndFree(reply->element[i]));
        reply->element[i] = nullptr;  // already freed; freeReplyObject skips null elements
      }
      converted = RedisReply::Array(std::move(elements));
      break;
    }
    case REDIS_REPLY_NIL:
    default:
      break;
  }
  freeReplyObject(reply);
  return converted;
}

absl::string_view TypeName(RedisReply::Type type) {
  switch (type) {
    case RedisReply::Type::kNil:
      return "nil";
    case RedisReply::Type::kString:
      return "string";
    case RedisReply::Type::kStatus:
      return "status";
    case RedisReply::Type::kInteger:
      return "integer";
    case RedisReply::Type::kArray:
      return "array";
    case RedisReply::Type::kError:
      return "error";
  }
  return "unknown";
}

absl::Status WrongShape(absl::string_view wanted, const RedisReply& reply) {
  return absl::InvalidArgumentError(absl::StrCat("redis reply: expected ", wanted, ", got ",
                                                 TypeName(reply.type()), " ",
                                                 reply.DebugString().substr(0, 200)));
}

}  // namespace

absl::StatusOr<RedisOptions> RedisOptions::FromAddress(absl::string_view address) {
  size_t colon = address.rfind(':');
  if (colon == absl::string_view::npos || colon == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("redis address \"", address, "\" is not host:port"));
  }
  int port = 0;
  if (!absl::SimpleAtoi(address.substr(colon + 1), &port) || port <= 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("redis address \"", address, "\" has no valid port"));
  }
  RedisOptions options;
  options.host = std::string(address.substr(0, colon));
  options.port = port;
  return options;
}

RedisReply RedisReply::Integer(int64_t v) {
  RedisReply reply(Type::kInteger);
  reply.integer_ = v;
  return reply;
}

RedisReply RedisReply::Array(std::vector<RedisReply> elements) {
  RedisReply reply(Type::kArray);
  reply.elements_ = std::move(elements);
  return reply;
}

absl::StatusOr<std::string> RedisReply::AsString() const {
  if (type_ == Type::kString || type_ == Type::kStatus) return str_;
  if (type_ == Type::kError) return ErrorStatus();
  return WrongShape("string", *this);
}

absl::StatusOr<std::optional<std::string>> RedisReply::AsOptionalString() const {
  if (type_ == Type::kNil) return std::optional<std::string>();
  auto s = AsString();
  if (!s.ok()) return s.status();
  return std::optional<std::string>(std::move(*s));
}

absl::StatusOr<int64_t> RedisReply::AsInteger() const {
  if (type_ == Type::kInteger) return integer_;
  if (type_ == Type::kError) return ErrorStatus();
  return WrongShape("integer", *this);
}

absl::StatusOr<std::vector<std::string>> RedisReply::AsStringArray() const {
  if (type_ == Type::kError) return ErrorStatus();
  if (type_ != Type::kArray) return WrongShape("array", *this);
  std::vector<std::string> out;
  out.reserve(elements_.size());
  for (const RedisReply& e : elements_) {
    ASSIGN_OR_RETURN(std::string s, e.AsString());
    out.push_back(std::move(s));
  }
  return out;
}

absl::StatusOr<absl::flat_hash_map<std::string, std::string>> RedisReply::AsStringMap() const {
  ASSIGN_OR_RETURN(std::vector<std::string> flat, AsStringArray());
  if (flat.size() % 2 != 0) {
    return absl::InvalidArgumentError("redis reply: field/value array has an odd length");
  }
  absl::flat_hash_map<std::string, std::string> out;
  out.reserve(flat.size() / 2);
  for (size_t i = 0; i < flat.size(); i += 2) out[flat[i]] = std::move(flat[i + 1]);
  return out;
}

absl::Status RedisReply::ErrorStatus() const {
  if (type_ != Type::kError) return absl::OkStatus();
  return RedisErrorToStatus(str_);
}

std::string RedisReply::DebugString() const {
  switch (type_) {
    case Type::kNil:
      return "(nil)";
    case Type::kString:
      return absl::StrCat("\"", absl::CEscape(str_), "\"");
    case Type::kStatus:
      return str_;
    case Type::kError:
      return absl::StrCat("(error) ", str_);
    case Type::kInteger:
      return absl::StrCat("(integer) ", integer_);
    case Type::kArray: {
      std::vector<std::string> parts;
      for (const RedisReply& e : elements_) parts.push_back(e.DebugString());
      return absl::StrCat("[", absl::StrJoin(parts, ", "), "]");
    }
  }
  return "";
}

absl::Status RedisErrorToStatus(absl::string_view message) {
  std::string text = absl::StrCat("redis: ", message);
  auto starts = [&](absl::string_view code) { return absl::StartsWith(message, code); };
  if (starts("LOADING") || starts("BUSY") || starts("MASTERDOWN") || starts("READONLY") ||
      starts("TRYAGAIN") || starts("CLUSTERDOWN")) {
    return absl::UnavailableError(text);
  }
  if (starts("OOM")) return absl::ResourceExhaustedError(text);
  if (starts("WRONGTYPE") || starts("NOSCRIPT") || starts("EXECABORT")) {
    return absl::FailedPreconditionError(text);
  }
  if (starts("NOAUTH") || starts("WRONGPASS") || starts("NOPERM")) {
    return absl::PermissionDeniedError(text);
  }
  return absl::InternalError(text);
}

LuaScript::LuaScript(std::string source) : source_(std::move(source)) {
  unsigned char digest[SHA_DIGEST_LENGTH];
  SHA1(reinterpret_cast<const unsigned char*>(source_.data()), source_.size(), digest);
  static constexpr char kHex[] = "0123456789abcdef";
  sha1_.reserve(2 * SHA_DIGEST_LENGTH);
  for (unsigned char byte : digest) {
    sha1_.push_back(kHex[byte >> 4]);
    sha1_.push_back(kHex[byte & 0xf]);
  }
}

absl::Status CheckRedisTlsFiles(const RedisOptions& options) {
  if (!options.tls) return absl::OkStatus();
  return internal::TlsClientConfig::Load(options).status();
}

// The transport of one connection and hiredis's reply parser, fed from it.
class RedisConnection::Link {
 public:
  Link(std::unique_ptr<internal::ByteTransport> transport, redisReader* reader,
       absl::Duration timeout)
      : transport_(std::move(transport)), reader_(reader), timeout_(timeout) {}
  ~Link() { redisReaderFree(reader_); }
  Link(const Link&) = delete;
  Link& operator=(const Link&) = delete;

  // Bounds each wait for the socket from now on.
  void set_timeout(absl::Duration timeout) { timeout_ = timeout; }

  absl::Status Write(absl::string_view bytes) { return transport_->Write(bytes, timeout_); }

  // The next complete reply (the caller frees it): parses what was received, receiving more
  // while it is incomplete. Unavailable for bytes that are not RESP.
  absl::StatusOr<redisReply*> NextReply() {
    for (;;) {
      void* raw = nullptr;
      if (redisReaderGetReply(reader_, &raw) != REDIS_OK) {
        return absl::UnavailableError(absl::StrCat("protocol error: ", reader_->errstr));
      }
      if (raw != nullptr) return static_cast<redisReply*>(raw);
      ASSIGN_OR_RETURN(size_t n, transport_->Read(buffer_, sizeof(buffer_), timeout_));
      if (redisReaderFeed(reader_, buffer_, n) != REDIS_OK) {
        return absl::UnavailableError(absl::StrCat("protocol error: ", reader_->errstr));
      }
    }
  }

 private:
  std::unique_ptr<internal::ByteTransport> transport_;
  redisReader* reader_;
  // As hiredis reads: 16 KiB at a time (the reader moves what is left of its buffer after each
  // reply, so larger chunks cost more on pipelines of small replies).
  char buffer_[16 * 1024];
  absl::Duration timeout_;
};

RedisConnection::RedisConnection(RedisOptions options) : options_(std::move(options)) {}

absl::StatusOr<std::unique_ptr<RedisConnection>> RedisConnection::Connect(RedisOptions options) {
  IgnoreSigpipeOnce();
  std::unique_ptr<RedisConnection> connection(new RedisConnection(std::move(options)));
  RETURN_IF_ERROR(connection->EnsureConnected());
  return connection;
}

RedisConnection::~RedisConnection() { Drop(); }

void RedisConnection::Drop() { link_.reset(); }

absl::Status RedisConnection::Reconnect() {
  Drop();
  return EnsureConnected();
}

absl::Status RedisConnection::DiscoverPrimary() {
  std::vector<std::string> failures;
  for (const std::string& sentinel : options_.sentinels) {
    auto at = RedisOptions::FromAddress(sentinel);
    if (!at.ok()) return at.status();
    RedisOptions asked = options_;
    asked.host = at->host;
    asked.port = at->port;
    asked.username = options_.sentinel_username;
    asked.password = options_.sentinel_password;
    asked.database = 0;
    asked.sentinels.clear();
    auto connection = Connect(std::move(asked));
    if (!connection.ok()) {
      failures.push_back(std::string(connection.status().message()));
      continue;
    }
    auto reply =
        (*connection)->Command({"SENTINEL", "get-master-addr-by-name", options_.sentinel_master});
    if (!reply.ok()) {
      failures.push_back(absl::StrCat(sentinel, ": ", reply.status().message()));
      continue;
    }
    auto address = reply->AsStringArray();
    int port = 0;
    if (!address.ok() || address->size() != 2 || !absl::SimpleAtoi((*address)[1], &port)) {
      failures.push_back(absl::StrCat(sentinel, ": no primary named ", options_.sentinel_master));
      continue;
    }
    options_.host = (*address)[0];
    options_.port = port;
    return absl::OkStatus();
  }
  return absl::UnavailableError(absl::StrCat("redis: no sentinel named the primary of ",
                                             options_.sentinel_master, ": ",
                                             absl::StrJoin(failures, "; ")));
}

absl::Status RedisConnection::CheckPrimary() {
  auto replies = RoundTrip<RedisCommand>({{"ROLE"}});
  if (!replies.ok()) return replies.status();
  const RedisReply& role = replies->front();
  if (role.IsArray() && !role.elements().empty() &&
      role.elements()[0].type() == RedisReply::Type::kString &&
      role.elements()[0].str() == "master") {
    return absl::OkStatus();
  }
  Drop();
  return absl::UnavailableError(absl::StrCat("redis: ", options_.host, ":", options_.port,
                                             " is not the primary of ", options_.sentinel_master,
                                             " (a failover in progress)"));
}

absl::Status RedisConnection::EnsureConnected() {
  if (link_ != nullptr) return absl::OkStatus();
  if (options_.sentinels.empty()) return OpenLink();
  RETURN_IF_ERROR(DiscoverPrimary());
  RETURN_IF_ERROR(OpenLink());
  return CheckPrimary();
}

absl::Status RedisConnection::OpenLink() {
  std::string where = absl::StrCat(options_.host, ":", options_.port);
  if (options_.tls) {
    // Read again for every connection, so rotated files apply; the last good ones are kept when
    // a reload fails (a file being replaced), so a reconnect does not fail for it.
    auto loaded = internal::TlsClientConfig::Load(options_);
    if (loaded.ok()) {
      tls_ = std::move(*loaded);
    } else if (tls_ == nullptr) {
      return loaded.status();
    }
  }
  auto transport = internal::OpenTransport(
      options_.host, options_.port, options_.tls ? tls_ : nullptr,
      options_.tls_server_name.empty() ? options_.host : options_.tls_server_name,
      options_.connect_timeout);
  if (!transport.ok()) {
    return core::Annotate(transport.status(), absl::StrCat("redis: connecting to ", where));
  }
  redisReader* reader = redisReaderCreate();
  if (reader == nullptr) {
    return absl::ResourceExhaustedError("redis: cannot allocate a reply reader");
  }
  link_ = std::make_unique<Link>(std::move(*transport), reader, options_.command_timeout);
  std::vector<RedisCommand> setup;
  if (!options_.password.empty()) {
    setup.push_back(options_.username.empty()
                        ? RedisCommand{"AUTH", options_.password}
                        : RedisCommand{"AUTH", options_.username, options_.password});
  }
  if (options_.database != 0) setup.push_back({"SELECT", std::to_string(options_.database)});
  if (setup.empty()) return absl::OkStatus();
  auto replies = RoundTrip(setup);
  if (!replies.ok()) return core::Annotate(replies.status(), absl::StrCat("setting up ", where));
  for (const RedisReply& reply : *replies) {
    if (reply.IsError()) {
      Drop();
      return core::Annotate(reply.ErrorStatus(), absl::StrCat("setting up ", where));
    }
  }
  return absl::OkStatus();
}

void RedisConnection::SetSocketTimeout(absl::Duration timeout) {
  if (link_ != nullptr) link_->set_timeout(timeout);
}

absl::Status RedisConnection::ConnectionFailure(absl::string_view during,
                                                const absl::Status& failure) {
  // A link that saw an I/O or protocol error is unusable; an unanswered command's reply could
  // still arrive and be taken for the next command's, so drop the socket in every case.
  Drop();
  std::string text =
      absl::StrCat("redis ", options_.host, ":", options_.port, ": ", during, ": ",
                   failure.message().empty() ? "connection lost" : failure.message());
  if (absl::IsDeadlineExceeded(failure)) return absl::DeadlineExceededError(text);
  return absl::UnavailableError(text);
}

namespace {

// Arguments at least this long are sent from where they lie instead of being copied into the
// command buffer; the buffer is sent whenever it reaches kFlushAt (so a pipeline is never
// buffered whole).
constexpr size_t kSendInPlace = 32 * 1024;
constexpr size_t kFlushAt = 64 * 1024;

}  // namespace

template <typename Argv>
absl::StatusOr<std::vector<RedisReply>> RedisConnection::RoundTrip(
    const std::vector<Argv>& commands) {
  RETURN_IF_ERROR(EnsureConnected());
  // Checked before anything is sent: a command sent alone would leave the connection out of
  // step (a MULTI without its EXEC) or its reply taken for another command's.
  for (const Argv& command : commands) {
    if (command.empty()) return absl::InvalidArgumentError("redis: empty command");
  }
  // Encoded here (RESP: `*<argc>`, then `$<len>` and the bytes per argument): hiredis's
  // formatter builds every argument header with sdscatfmt (~15 % of the client's CPU on a batch
  // of stream appends) and copies every argument.
  std::string& out = out_;
  out.clear();
  auto send = [&](absl::string_view bytes) -> absl::Status {
    if (absl::Status s = link_->Write(bytes); !s.ok()) {
      return ConnectionFailure("sending a command", s);
    }
    return absl::OkStatus();
  };
  for (const Argv& command : commands) {
    absl::StrAppend(&out, "*", command.size(), "\r\n");
    for (const auto& arg : command) {
      absl::string_view bytes(arg.data(), arg.size());
      absl::StrAppend(&out, "$", bytes.size(), "\r\n");
      if (bytes.size() >= kSendInPlace) {
        RETURN_IF_ERROR(send(out));
        out.clear();
        RETURN_IF_ERROR(send(bytes));
        out.append("\r\n");
      } else {
        absl::StrAppend(&out, bytes, "\r\n");
      }
      if (out.size() >= kFlushAt) {
        RETURN_IF_ERROR(send(out));
        out.clear();
      }
    }
  }
  if (!out.empty()) RETURN_IF_ERROR(send(out));
  out.clear();
  std::vector<RedisReply> replies;
  replies.reserve(commands.size());
  for (size_t i = 0; i < commands.size(); ++i) {
    auto reply = link_->NextReply();
    if (!reply.ok()) {
      return ConnectionFailure(
          absl::StrCat("waiting for the reply to ", absl::string_view(commands[i][0])),
          reply.status());
    }
    replies.push_back(ConvertAndFree(*reply));
  }
  if (!options_.sentinels.empty()) {
    for (const RedisReply& reply : replies) {
      // A demoted primary: the next command asks the sentinels again.
      if (reply.IsError() && absl::StartsWith(reply.str(), "READONLY")) Drop();
    }
  }
  return replies;
}

absl::StatusOr<RedisReply> RedisConnection::Command(const RedisCommand& argv) {
  ASSIGN_OR_RETURN(std::vector<RedisReply> replies, RoundTrip<RedisCommand>({argv}));
  RedisReply& reply = replies.front();
  if (reply.IsError()) return reply.ErrorStatus();
  return std::move(reply);
}

absl::StatusOr<RedisReply> RedisConnection::BlockingCommand(const RedisCommand& argv,
                                                            absl::Duration block) {
  RETURN_IF_ERROR(EnsureConnected());
  SetSocketTimeout(block + options_.command_timeout);
  auto reply = Command(argv);
  SetSocketTimeout(options_.command_timeout);  // a no-op when the call dropped the link
  return reply;
}

absl::StatusOr<std::vector<RedisReply>> RedisConnection::Pipeline(
    const std::vector<RedisCommand>& commands) {
  if (commands.empty()) return std::vector<RedisReply>();
  return RoundTrip(commands);
}

template <typename Argv>
absl::StatusOr<std::vector<RedisReply>> RedisConnection::RunTransaction(
    const std::vector<Argv>& commands) {
  std::vector<Argv> wrapped;
  wrapped.reserve(commands.size() + 2);
  wrapped.push_back({"MULTI"});
  wrapped.insert(wrapped.end(), commands.begin(), commands.end());
  wrapped.push_back({"EXEC"});
  ASSIGN_OR_RETURN(std::vector<RedisReply> replies, RoundTrip(wrapped));
  // Replies: +OK for MULTI, +QUEUED (or an error) per command, then EXEC's array.
  for (size_t i = 0; i + 1 < replies.size(); ++i) {
    if (replies[i].IsError()) {
      return core::Annotate(
          replies[i].ErrorStatus(),
          absl::StrCat("transaction rejected at ",
                       absl::string_view(wrapped[i][0].data(), wrapped[i][0].size())));
    }
  }
  RedisReply& exec = replies.back();
  if (exec.IsError()) return core::Annotate(exec.ErrorStatus(), "EXEC");
  if (exec.IsNil()) return absl::AbortedError("redis: transaction aborted (watched key changed)");
  if (!exec.IsArray() || exec.elements().size() != commands.size()) {
    return absl::InternalError(
        absl::StrCat("redis: unexpected EXEC reply ", exec.DebugString().substr(0, 200)));
  }
  return std::move(exec.mutable_elements());
}

absl::StatusOr<std::vector<RedisReply>> RedisConnection::Transaction(
    const std::vector<RedisCommand>& commands) {
  return RunTransaction(commands);
}

absl::StatusOr<std::vector<RedisReply>> RedisConnection::TransactionViews(
    const std::vector<RedisCommandView>& commands) {
  return RunTransaction(commands);
}

absl::StatusOr<RedisReply> RedisConnection::Eval(const LuaScript& script,
                                                 const std::vector<std::string>& keys,
                                                 const std::vector<std::string>& args) {
  auto build = [&](absl::string_view verb, const std::string& body) {
    RedisCommand command = {std::string(verb), body, std::to_string(keys.size())};
    command.insert(command.end(), keys.begin(), keys.end());
    command.insert(command.end(), args.begin(), args.end());
    return command;
  };
  ASSIGN_OR_RETURN(std::vector<RedisReply> replies,
                   RoundTrip<RedisCommand>({build("EVALSHA", script.sha1())}));
  RedisReply& reply = replies.front();
  if (reply.IsError() && absl::StartsWith(reply.str(), "NOSCRIPT")) {
    ASSIGN_OR_RETURN(replies, RoundTrip<RedisCommand>({build("EVAL", script.source())}));
  }
  RedisReply& result = replies.front();
  if (result.IsError()) return result.ErrorStatus();
  return std::move(result);
}

}  // namespace reverser::redisstore
