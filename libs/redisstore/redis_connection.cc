#include "libs/redisstore/redis_connection.h"

#include <hiredis/hiredis.h>
#include <openssl/sha.h>
#include <signal.h>
#include <sys/time.h>

#include <cerrno>
#include <cstring>
#include <mutex>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "libs/core/status.h"

namespace reverser::redisstore {
namespace {

// hiredis 0.14 writes with write(2): a peer that went away would raise SIGPIPE and kill the
// process. Ignore it once, process-wide (gRPC does the same); the write then fails with EPIPE.
void IgnoreSigpipeOnce() {
  static std::once_flag once;
  std::call_once(once, [] { signal(SIGPIPE, SIG_IGN); });
}

timeval SocketTimeval(absl::Duration d) {
  if (d < absl::ZeroDuration()) d = absl::ZeroDuration();
  timeval tv = absl::ToTimeval(d);
  if (tv.tv_sec == 0 && tv.tv_usec == 0) tv.tv_usec = 1;  // 0 would mean "block forever"
  return tv;
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

absl::StatusOr<std::unique_ptr<RedisConnection>> RedisConnection::Connect(RedisOptions options) {
  IgnoreSigpipeOnce();
  std::unique_ptr<RedisConnection> connection(new RedisConnection(std::move(options)));
  RETURN_IF_ERROR(connection->EnsureConnected());
  return connection;
}

RedisConnection::~RedisConnection() { Drop(); }

void RedisConnection::Drop() {
  if (context_ != nullptr) redisFree(context_);
  context_ = nullptr;
}

absl::Status RedisConnection::Reconnect() {
  Drop();
  return EnsureConnected();
}

absl::Status RedisConnection::EnsureConnected() {
  if (context_ != nullptr) return absl::OkStatus();
  std::string where = absl::StrCat(options_.host, ":", options_.port);
  redisContext* context = redisConnectWithTimeout(options_.host.c_str(), options_.port,
                                                  SocketTimeval(options_.connect_timeout));
  if (context == nullptr) {
    return absl::ResourceExhaustedError("redis: cannot allocate a connection context");
  }
  if (context->err != 0) {
    std::string message = context->errstr;
    redisFree(context);
    return absl::UnavailableError(absl::StrCat("redis: connecting to ", where, ": ", message));
  }
  context_ = context;
  RETURN_IF_ERROR(SetSocketTimeout(options_.command_timeout));
  redisEnableKeepAlive(context_);
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

absl::Status RedisConnection::SetSocketTimeout(absl::Duration timeout) {
  if (redisSetTimeout(context_, SocketTimeval(timeout)) != REDIS_OK) {
    return ConnectionFailure("setting the socket timeout");
  }
  return absl::OkStatus();
}

absl::Status RedisConnection::ConnectionFailure(absl::string_view during) {
  const int saved_errno = errno;  // hiredis leaves the failed syscall's errno in place
  std::string message = context_ != nullptr ? std::string(context_->errstr) : "not connected";
  bool timed_out = context_ != nullptr && context_->err == REDIS_ERR_IO &&
                   (saved_errno == EAGAIN || saved_errno == EWOULDBLOCK);
  // A context that saw an I/O or protocol error is unusable; an unanswered command's reply could
  // still arrive and be taken for the next command's, so drop the socket in every case.
  Drop();
  std::string text = absl::StrCat("redis ", options_.host, ":", options_.port, ": ", during, ": ",
                                  message.empty() ? "connection lost" : message);
  if (timed_out) return absl::DeadlineExceededError(text);
  return absl::UnavailableError(text);
}

template <typename Argv>
absl::StatusOr<std::vector<RedisReply>> RedisConnection::RoundTrip(
    const std::vector<Argv>& commands) {
  RETURN_IF_ERROR(EnsureConnected());
  // Checked before anything is queued: a command left in hiredis's buffer would be sent with the
  // next round trip, and its reply taken for another command's.
  for (const Argv& command : commands) {
    if (command.empty()) return absl::InvalidArgumentError("redis: empty command");
  }
  // Encoded here (RESP: `*<argc>`, then `$<len>` and the bytes per argument) and handed to
  // hiredis ready-made: redisAppendCommandArgv formats every argument header with sdscatfmt,
  // ~15 % of the client's CPU on a batch of stream appends. One command at a time, so a pipeline
  // is buffered once (in hiredis) plus its largest command.
  std::string resp;
  for (const Argv& command : commands) {
    size_t size = 16;
    for (const auto& arg : command) size += arg.size() + 16;
    resp.clear();
    resp.reserve(size);
    absl::StrAppend(&resp, "*", command.size(), "\r\n");
    for (const auto& arg : command) {
      absl::StrAppend(&resp, "$", arg.size(), "\r\n", absl::string_view(arg.data(), arg.size()),
                      "\r\n");
    }
    if (redisAppendFormattedCommand(context_, resp.data(), resp.size()) != REDIS_OK) {
      return ConnectionFailure("sending a command");
    }
  }
  std::vector<RedisReply> replies;
  replies.reserve(commands.size());
  for (size_t i = 0; i < commands.size(); ++i) {
    void* raw = nullptr;
    errno = 0;
    if (redisGetReply(context_, &raw) != REDIS_OK || raw == nullptr) {
      return ConnectionFailure(
          absl::StrCat("waiting for the reply to ", absl::string_view(commands[i][0])));
    }
    auto* reply = static_cast<redisReply*>(raw);
    replies.push_back(ConvertAndFree(reply));
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
  RETURN_IF_ERROR(SetSocketTimeout(block + options_.command_timeout));
  auto reply = Command(argv);
  if (context_ != nullptr) RETURN_IF_ERROR(SetSocketTimeout(options_.command_timeout));
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
