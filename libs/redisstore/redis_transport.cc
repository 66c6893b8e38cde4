#include "libs/redisstore/redis_transport.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "libs/redisstore/redis_connection.h"

namespace reverser::redisstore::internal {
namespace {

using Clock = std::chrono::steady_clock;

// An owned file descriptor.
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  Fd(Fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Fd& operator=(Fd&& other) noexcept {
    if (this != &other) {
      if (fd_ >= 0) close(fd_);
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

std::string ErrnoText(int error) {
  char buffer[256];
  // The GNU strerror_r returns the message (in `buffer` or a static string).
  return strerror_r(error, buffer, sizeof(buffer));
}

absl::Duration Remaining(Clock::time_point deadline) {
  return absl::FromChrono(deadline - Clock::now());
}

// Waits until `fd` is ready for `events` (or has an error the next call reports), at most until
// `deadline`: DeadlineExceeded "<nothing> within <timeout>" otherwise.
absl::Status WaitUntil(int fd, short events, Clock::time_point deadline, absl::Duration timeout,
                       absl::string_view nothing) {
  for (;;) {
    absl::Duration left = Remaining(deadline);
    int millis = 0;
    if (left > absl::ZeroDuration()) {
      // Rounded up: a sub-millisecond wait must not become a busy poll of 0 ms.
      millis = static_cast<int>(std::min<int64_t>(
          absl::ToInt64Milliseconds(left + absl::Milliseconds(1) - absl::Nanoseconds(1)), INT_MAX));
    }
    pollfd p{fd, events, 0};
    int n = poll(&p, 1, millis);
    if (n > 0) return absl::OkStatus();
    if (n == 0) {
      if (Clock::now() >= deadline) {
        return absl::DeadlineExceededError(
            absl::StrCat(nothing, " within ", absl::FormatDuration(timeout)));
      }
      continue;
    }
    if (errno == EINTR) continue;
    return absl::UnavailableError(absl::StrCat("poll: ", ErrnoText(errno)));
  }
}

absl::Status WaitFor(int fd, short events, absl::Duration timeout, absl::string_view nothing) {
  if (timeout < absl::ZeroDuration()) timeout = absl::ZeroDuration();
  return WaitUntil(fd, events, Clock::now() + absl::ToChronoNanoseconds(timeout), timeout, nothing);
}

// The OpenSSL errors queued on this thread, oldest first, as "reason; reason"; clears the queue.
std::string TakeOpensslErrors() {
  std::string out;
  while (unsigned long error = ERR_get_error()) {
    const char* reason = ERR_reason_error_string(error);
    std::string text;
    if (reason != nullptr) {
      text = reason;
    } else {
      char buffer[256];
      ERR_error_string_n(error, buffer, sizeof(buffer));
      text = buffer;
    }
    if (!out.empty()) absl::StrAppend(&out, "; ");
    absl::StrAppend(&out, text);
  }
  return out;
}

bool UnexpectedEofQueued() {
  unsigned long error = ERR_peek_error();
  return error != 0 && ERR_GET_LIB(error) == ERR_LIB_SSL &&
         ERR_GET_REASON(error) == SSL_R_UNEXPECTED_EOF_WHILE_READING;
}

// SSL_CTX_use_PrivateKey_file read the key, but it is not the certificate's.
bool KeyMismatchQueued() {
  unsigned long error = ERR_peek_last_error();
  return error != 0 && ERR_GET_LIB(error) == ERR_LIB_X509 &&
         ERR_GET_REASON(error) == X509_R_KEY_VALUES_MISMATCH;
}

// A key file protected by a passphrase must fail, not prompt on the terminal.
int NoPassphrase(char*, int, int, void*) { return 0; }

absl::Status ReadableFile(absl::string_view what, const std::string& path) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("redis TLS: cannot read the ", what, " \"", path, "\": ", ErrnoText(errno)));
  }
  std::fclose(file);
  return absl::OkStatus();
}

void TuneSocket(int fd) {
  // As hiredis did: no Nagle delay (a command is one write), and keepalive probes after 15 s
  // idle so a vanished peer is noticed.
  int on = 1;
  (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
  (void)setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof(on));
  int idle = 15, interval = 5, count = 3;
  (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
  (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof(interval));
  (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof(count));
}

absl::StatusOr<Fd> ConnectTcp(const std::string& host, int port, Clock::time_point deadline,
                              absl::Duration timeout) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_protocol = IPPROTO_TCP;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  int rc = getaddrinfo(host.c_str(), service.c_str(), &hints, &found);
  if (rc != 0) {
    return absl::UnavailableError(absl::StrCat(
        "resolving ", host, ": ", rc == EAI_SYSTEM ? ErrnoText(errno) : gai_strerror(rc)));
  }
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> addresses(found, &freeaddrinfo);
  std::string last = "no address";
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    Fd fd(socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol));
    if (fd.get() < 0) {
      last = ErrnoText(errno);
      continue;
    }
    if (connect(fd.get(), a->ai_addr, a->ai_addrlen) != 0) {
      if (errno != EINPROGRESS) {
        last = ErrnoText(errno);
        continue;
      }
      absl::Status ready = WaitUntil(fd.get(), POLLOUT, deadline, timeout, "no connection");
      if (!ready.ok()) {
        last = std::string(ready.message());
        if (absl::IsDeadlineExceeded(ready)) break;  // no time left for another address
        continue;
      }
      int error = 0;
      socklen_t length = sizeof(error);
      if (getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &error, &length) != 0) error = errno;
      if (error != 0) {
        last = ErrnoText(error);
        continue;
      }
    }
    TuneSocket(fd.get());
    return fd;
  }
  return absl::UnavailableError(last);
}

class PlainTransport : public ByteTransport {
 public:
  explicit PlainTransport(Fd fd) : fd_(std::move(fd)) {}

  absl::Status Write(absl::string_view data, absl::Duration timeout) override {
    while (!data.empty()) {
      ssize_t n = send(fd_.get(), data.data(), data.size(), MSG_NOSIGNAL);
      if (n > 0) {
        data.remove_prefix(static_cast<size_t>(n));
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        if (absl::Status s = WaitFor(fd_.get(), POLLOUT, timeout, "not sent"); !s.ok()) return s;
        continue;
      }
      return absl::UnavailableError(n < 0 ? ErrnoText(errno) : "connection lost");
    }
    return absl::OkStatus();
  }

  absl::StatusOr<size_t> Read(char* buffer, size_t size, absl::Duration timeout) override {
    for (;;) {
      ssize_t n = recv(fd_.get(), buffer, size, 0);
      if (n > 0) return static_cast<size_t>(n);
      if (n == 0) return absl::UnavailableError("connection closed by the server");
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        if (absl::Status s = WaitFor(fd_.get(), POLLIN, timeout, "no reply"); !s.ok()) return s;
        continue;
      }
      return absl::UnavailableError(ErrnoText(errno));
    }
  }

 private:
  Fd fd_;
};

class TlsTransport : public ByteTransport {
 public:
  // Owns `ssl` (already bound to `fd`); keeps `config` alive as long as `ssl` uses it.
  TlsTransport(Fd fd, std::shared_ptr<const TlsClientConfig> config, SSL* ssl)
      : fd_(std::move(fd)), config_(std::move(config)), ssl_(ssl) {}
  ~TlsTransport() override {
    ERR_clear_error();
    // A close_notify when the session is still sound (never blocks: the socket is
    // non-blocking); a session that failed must not be shut down.
    if (handshake_done_ && !failed_) (void)SSL_shutdown(ssl_);
    SSL_free(ssl_);
    ERR_clear_error();
  }

  absl::Status Handshake(const std::string& server_name, Clock::time_point deadline,
                         absl::Duration timeout) {
    for (;;) {
      ERR_clear_error();
      errno = 0;
      int rc = SSL_connect(ssl_);
      if (rc == 1) {
        handshake_done_ = true;
        return absl::OkStatus();
      }
      const int saved_errno = errno;
      const int error = SSL_get_error(ssl_, rc);
      if (error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE) {
        absl::Status ready = WaitUntil(fd_.get(), error == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT,
                                       deadline, timeout, "TLS handshake: no answer");
        if (!ready.ok()) {
          failed_ = true;
          return absl::UnavailableError(absl::StrCat(ready.message(), " (is it a TLS port?)"));
        }
        continue;
      }
      failed_ = true;
      const long verify = SSL_get_verify_result(ssl_);
      if (verify != X509_V_OK) {
        ERR_clear_error();
        return absl::UnavailableError(
            absl::StrCat("TLS handshake: the server's certificate is not accepted: ",
                         X509_verify_cert_error_string(verify), " (checked against ",
                         config_->trust(), " and the name \"", server_name, "\")"));
      }
      if (UnexpectedEofQueued() ||
          (error == SSL_ERROR_SYSCALL && ERR_peek_error() == 0 && saved_errno == 0)) {
        ERR_clear_error();
        return absl::UnavailableError(
            "TLS handshake: the server closed the connection (is it a TLS port? does it want a "
            "client certificate?)");
      }
      std::string errors = TakeOpensslErrors();
      if (errors.empty()) errors = saved_errno != 0 ? ErrnoText(saved_errno) : "failed";
      return absl::UnavailableError(absl::StrCat("TLS handshake: ", errors));
    }
  }

  absl::Status Write(absl::string_view data, absl::Duration timeout) override {
    // SSL_MODE_ENABLE_PARTIAL_WRITE: SSL_write returns after each record it could send.
    while (!data.empty()) {
      ERR_clear_error();
      errno = 0;
      int n =
          SSL_write(ssl_, data.data(), static_cast<int>(std::min<size_t>(data.size(), INT_MAX)));
      if (n > 0) {
        data.remove_prefix(static_cast<size_t>(n));
        continue;
      }
      if (absl::Status s = AfterFailure(n, timeout, "not sent"); !s.ok()) return s;
    }
    return absl::OkStatus();
  }

  absl::StatusOr<size_t> Read(char* buffer, size_t size, absl::Duration timeout) override {
    for (;;) {
      ERR_clear_error();
      errno = 0;
      int n = SSL_read(ssl_, buffer, static_cast<int>(std::min<size_t>(size, INT_MAX)));
      if (n > 0) return static_cast<size_t>(n);
      if (absl::Status s = AfterFailure(n, timeout, "no reply"); !s.ok()) return s;
    }
  }

 private:
  // After an SSL_read/SSL_write that made no progress: waits for what the session needs (OK:
  // try again), or the failure.
  absl::Status AfterFailure(int rc, absl::Duration timeout, absl::string_view nothing) {
    const int saved_errno = errno;
    const int error = SSL_get_error(ssl_, rc);
    switch (error) {
      case SSL_ERROR_WANT_READ:
        return WaitFor(fd_.get(), POLLIN, timeout, nothing);
      case SSL_ERROR_WANT_WRITE:
        return WaitFor(fd_.get(), POLLOUT, timeout, nothing);
      case SSL_ERROR_ZERO_RETURN:
        return absl::UnavailableError("connection closed by the server (TLS close_notify)");
      default:
        break;
    }
    failed_ = true;
    if (UnexpectedEofQueued() ||
        (error == SSL_ERROR_SYSCALL && ERR_peek_error() == 0 && saved_errno == 0)) {
      ERR_clear_error();
      return absl::UnavailableError("connection closed by the server");
    }
    std::string errors = TakeOpensslErrors();
    if (errors.empty()) errors = saved_errno != 0 ? ErrnoText(saved_errno) : "connection lost";
    return absl::UnavailableError(absl::StrCat("TLS: ", errors));
  }

  Fd fd_;
  std::shared_ptr<const TlsClientConfig> config_;
  SSL* ssl_;
  bool handshake_done_ = false;
  bool failed_ = false;
};

bool IsIpAddress(const std::string& name) {
  unsigned char address[sizeof(in6_addr)];
  return inet_pton(AF_INET, name.c_str(), address) == 1 ||
         inet_pton(AF_INET6, name.c_str(), address) == 1;
}

}  // namespace

TlsClientConfig::~TlsClientConfig() { SSL_CTX_free(ctx_); }

absl::StatusOr<std::shared_ptr<const TlsClientConfig>> TlsClientConfig::Load(
    const RedisOptions& options) {
  ERR_clear_error();
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  if (ctx == nullptr) {
    return absl::InternalError(absl::StrCat("redis TLS: ", TakeOpensslErrors()));
  }
  std::string trust = options.tls_ca_file.empty()
                          ? std::string("the system's trust store")
                          : absl::StrCat("the CA file \"", options.tls_ca_file, "\"");
  std::shared_ptr<const TlsClientConfig> config(new TlsClientConfig(ctx, trust));
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  SSL_CTX_set_default_passwd_cb(ctx, &NoPassphrase);
  if (options.tls_ca_file.empty()) {
    if (SSL_CTX_set_default_verify_paths(ctx) != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("redis TLS: cannot use the system's trust store: ", TakeOpensslErrors()));
    }
  } else {
    if (absl::Status s = ReadableFile("CA file", options.tls_ca_file); !s.ok()) return s;
    if (SSL_CTX_load_verify_locations(ctx, options.tls_ca_file.c_str(), nullptr) != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("redis TLS: the CA file \"", options.tls_ca_file,
                       "\" holds no PEM certificate: ", TakeOpensslErrors()));
    }
  }
  if (options.tls_cert_file.empty() != options.tls_key_file.empty()) {
    return absl::InvalidArgumentError(
        "redis TLS: a client certificate needs both the certificate and the key file");
  }
  if (!options.tls_cert_file.empty()) {
    if (absl::Status s = ReadableFile("client certificate", options.tls_cert_file); !s.ok()) {
      return s;
    }
    if (absl::Status s = ReadableFile("client key", options.tls_key_file); !s.ok()) return s;
    if (SSL_CTX_use_certificate_chain_file(ctx, options.tls_cert_file.c_str()) != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("redis TLS: the client certificate \"", options.tls_cert_file,
                       "\" is not a PEM certificate: ", TakeOpensslErrors()));
    }
    if (SSL_CTX_use_PrivateKey_file(ctx, options.tls_key_file.c_str(), SSL_FILETYPE_PEM) != 1 &&
        !KeyMismatchQueued()) {
      return absl::InvalidArgumentError(
          absl::StrCat("redis TLS: the client key \"", options.tls_key_file,
                       "\" is not an unencrypted PEM private key: ", TakeOpensslErrors()));
    }
    if (KeyMismatchQueued() || SSL_CTX_check_private_key(ctx) != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("redis TLS: the client key \"", options.tls_key_file,
                       "\" does not belong to the certificate \"", options.tls_cert_file,
                       "\": ", TakeOpensslErrors()));
    }
  }
  return config;
}

absl::StatusOr<std::unique_ptr<ByteTransport>> OpenTransport(
    const std::string& host, int port, std::shared_ptr<const TlsClientConfig> tls,
    const std::string& server_name, absl::Duration connect_timeout) {
  if (connect_timeout < absl::ZeroDuration()) connect_timeout = absl::ZeroDuration();
  const Clock::time_point deadline = Clock::now() + absl::ToChronoNanoseconds(connect_timeout);
  auto fd = ConnectTcp(host, port, deadline, connect_timeout);
  if (!fd.ok()) return fd.status();
  if (tls == nullptr) return std::make_unique<PlainTransport>(std::move(*fd));

  if (server_name.empty()) return absl::InvalidArgumentError("TLS: no server name to check");
  ERR_clear_error();
  SSL* ssl = SSL_new(tls->ctx());
  if (ssl == nullptr) {
    return absl::InternalError(absl::StrCat("TLS: ", TakeOpensslErrors()));
  }
  const int raw_fd = fd->get();
  auto transport = std::make_unique<TlsTransport>(std::move(*fd), tls, ssl);
  if (SSL_set_fd(ssl, raw_fd) != 1) {
    return absl::InternalError(absl::StrCat("TLS: ", TakeOpensslErrors()));
  }
  if (IsIpAddress(server_name)) {
    if (X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), server_name.c_str()) != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("TLS: cannot check the address \"", server_name, "\""));
    }
  } else {
    // SNI for servers behind a TLS proxy, and the name the certificate must carry.
    if (SSL_set_tlsext_host_name(ssl, server_name.c_str()) != 1 ||
        SSL_set1_host(ssl, server_name.c_str()) != 1) {
      ERR_clear_error();
      return absl::InvalidArgumentError(
          absl::StrCat("TLS: cannot check the name \"", server_name, "\""));
    }
  }
  if (absl::Status s = transport->Handshake(server_name, deadline, connect_timeout); !s.ok()) {
    return s;
  }
  return transport;
}

}  // namespace reverser::redisstore::internal
