#include "libs/kube/httplib_transport.h"

#include <httplib.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "libs/core/status.h"

namespace reverser::kube {
namespace {

constexpr size_t kMaxErrorBodyBytes = 1 << 20;
constexpr size_t kMaxPooledClients = 8;
// Bound service-account tokens rotate; client-go re-reads token files about once a minute.
constexpr absl::Duration kTokenRefresh = absl::Minutes(1);

struct BioDeleter {
  void operator()(BIO* bio) const { BIO_free(bio); }
};
struct X509Deleter {
  void operator()(X509* cert) const { X509_free(cert); }
};
struct KeyDeleter {
  void operator()(EVP_PKEY* key) const { EVP_PKEY_free(key); }
};
struct StoreDeleter {
  void operator()(X509_STORE* store) const { X509_STORE_free(store); }
};

std::unique_ptr<BIO, BioDeleter> MemoryBio(const std::string& pem) {
  return std::unique_ptr<BIO, BioDeleter>(
      BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
}

// Every certificate in a PEM bundle, in a fresh store (httplib's SSL_CTX takes ownership).
absl::StatusOr<std::unique_ptr<X509_STORE, StoreDeleter>> ParseCaBundle(const std::string& pem) {
  std::unique_ptr<X509_STORE, StoreDeleter> store(X509_STORE_new());
  auto bio = MemoryBio(pem);
  int added = 0;
  while (X509* raw = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) {
    std::unique_ptr<X509, X509Deleter> cert(raw);
    if (X509_STORE_add_cert(store.get(), cert.get()) == 1) ++added;
  }
  ERR_clear_error();  // the loop ends on a "no start line" error
  if (added == 0) {
    return absl::InvalidArgumentError("certificate authority: no PEM certificate found");
  }
  return store;
}

absl::StatusOr<std::unique_ptr<X509, X509Deleter>> ParseCertificate(const std::string& pem) {
  auto bio = MemoryBio(pem);
  std::unique_ptr<X509, X509Deleter> cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
  ERR_clear_error();
  if (!cert) return absl::InvalidArgumentError("client certificate: not a PEM certificate");
  return cert;
}

absl::StatusOr<std::unique_ptr<EVP_PKEY, KeyDeleter>> ParsePrivateKey(const std::string& pem) {
  auto bio = MemoryBio(pem);
  std::unique_ptr<EVP_PKEY, KeyDeleter> key(
      PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr));
  ERR_clear_error();
  if (!key) return absl::InvalidArgumentError("client key: not a PEM private key");
  return key;
}

void SetTimeout(httplib::ClientImpl& client, absl::Duration timeout) {
  if (timeout <= absl::ZeroDuration()) timeout = absl::Seconds(32);  // kubectl's default
  int64_t usec = absl::ToInt64Microseconds(timeout);
  if (usec <= 0) usec = 1;
  client.set_read_timeout(usec / 1'000'000, usec % 1'000'000);
}

// Whether a request that failed on a reused connection may go again on a new one: when it could
// not be written (the server cannot have acted on it), or when it is idempotent (RFC 9110).
bool RetryableOnNewConnection(absl::string_view method, httplib::Error error) {
  if (error == httplib::Error::Write) return true;
  if (error != httplib::Error::Read) return false;
  return method == "GET" || method == "HEAD" || method == "PUT" || method == "DELETE" ||
         method == "OPTIONS";
}

absl::Status TransportError(const HttpRequest& request, httplib::Error error) {
  return absl::UnavailableError(
      absl::StrCat(request.method, " ", request.path, ": ", httplib::to_string(error)));
}

}  // namespace

absl::StatusOr<std::unique_ptr<HttplibTransport>> HttplibTransport::Create(
    const ClusterConfig& config) {
  Endpoint endpoint;
  absl::string_view rest = config.server;
  if (absl::ConsumePrefix(&rest, "https://")) {
    endpoint.tls = true;
  } else if (!absl::ConsumePrefix(&rest, "http://")) {
    return absl::InvalidArgumentError(
        absl::StrCat("server \"", config.server, "\" must start with https:// or http://"));
  }
  size_t slash = rest.find('/');
  absl::string_view authority = rest.substr(0, slash);
  if (slash != absl::string_view::npos) {
    endpoint.path_prefix = std::string(absl::StripSuffix(rest.substr(slash), "/"));
  }
  absl::string_view host = authority;
  absl::string_view port;
  if (absl::StartsWith(authority, "[")) {  // [v6]:port
    size_t close = authority.find(']');
    if (close == absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat("server \"", config.server, "\": bad IPv6"));
    }
    host = authority.substr(1, close - 1);
    absl::string_view after = authority.substr(close + 1);
    if (absl::ConsumePrefix(&after, ":")) port = after;
  } else if (size_t colon = authority.rfind(':'); colon != absl::string_view::npos) {
    host = authority.substr(0, colon);
    port = authority.substr(colon + 1);
  }
  if (host.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("server \"", config.server, "\" has no host"));
  }
  endpoint.host = std::string(host);
  endpoint.port = endpoint.tls ? 443 : 80;
  if (!port.empty() &&
      (!absl::SimpleAtoi(port, &endpoint.port) || endpoint.port <= 0 || endpoint.port > 65535)) {
    return absl::InvalidArgumentError(absl::StrCat("server \"", config.server, "\": bad port"));
  }
  auto transport =
      std::unique_ptr<HttplibTransport>(new HttplibTransport(config, std::move(endpoint)));
  // Parse the TLS material now so a bad kubeconfig fails at start, not on first request.
  RETURN_IF_ERROR(transport->NewClient().status());
  return transport;
}

HttplibTransport::HttplibTransport(ClusterConfig config, Endpoint endpoint)
    : config_(std::move(config)), endpoint_(std::move(endpoint)) {}

HttplibTransport::~HttplibTransport() = default;

absl::StatusOr<std::unique_ptr<httplib::ClientImpl>> HttplibTransport::NewClient() const {
  std::unique_ptr<httplib::ClientImpl> client;
  if (endpoint_.tls) {
    std::unique_ptr<httplib::SSLClient> tls;
    if (!config_.client_cert_pem.empty()) {
      ASSIGN_OR_RETURN(auto cert, ParseCertificate(config_.client_cert_pem));
      ASSIGN_OR_RETURN(auto key, ParsePrivateKey(config_.client_key_pem));
      // SSL_CTX_use_certificate/PrivateKey take their own references.
      tls = std::make_unique<httplib::SSLClient>(endpoint_.host, endpoint_.port, cert.get(),
                                                 key.get());
    } else {
      tls = std::make_unique<httplib::SSLClient>(endpoint_.host, endpoint_.port);
    }
    if (!tls->is_valid()) {
      return absl::InvalidArgumentError("TLS setup failed (client certificate and key mismatch?)");
    }
    if (!config_.ca_pem.empty()) {
      ASSIGN_OR_RETURN(auto store, ParseCaBundle(config_.ca_pem));
      tls->set_ca_cert_store(store.release());  // owned by the SSL_CTX from here
    }
    tls->enable_server_certificate_verification(!config_.insecure_skip_tls_verify);
    client = std::move(tls);
  } else {
    client = std::make_unique<httplib::ClientImpl>(endpoint_.host, endpoint_.port);
  }
  client->set_connection_timeout(10, 0);
  client->set_write_timeout(30, 0);
  client->set_keep_alive(true);
  // Headers and body go out in separate writes; without this Nagle + delayed ACK add ~40 ms.
  client->set_tcp_nodelay(true);
  client->set_url_encode(false);  // RestClient encodes paths and queries itself
  client->set_follow_location(false);
  return client;
}

std::unique_ptr<httplib::ClientImpl> HttplibTransport::TakePooledClient() {
  absl::MutexLock lock(&pool_mu_);
  if (pool_.empty()) return nullptr;
  auto client = std::move(pool_.back());
  pool_.pop_back();
  return client;
}

void HttplibTransport::ReturnPooledClient(std::unique_ptr<httplib::ClientImpl> client) {
  absl::MutexLock lock(&pool_mu_);
  if (pool_.size() < kMaxPooledClients) pool_.push_back(std::move(client));
}

absl::StatusOr<std::string> HttplibTransport::BearerToken(bool reload) {
  if (config_.token_file.empty()) return config_.token;
  absl::MutexLock lock(&token_mu_);
  absl::Time now = absl::Now();
  if (reload || now - token_read_at_ >= kTokenRefresh || cached_token_.empty()) {
    absl::StatusOr<std::string> token = ReadFileToString(config_.token_file);
    if (!token.ok()) {
      // Keep using the last good token if the file is briefly missing during rotation.
      if (cached_token_.empty()) return core::Annotate(token.status(), "reading token file");
    } else {
      cached_token_ = std::string(absl::StripAsciiWhitespace(*token));
      token_read_at_ = now;
    }
  }
  return cached_token_;
}

namespace {

absl::StatusOr<httplib::Request> ToHttplibRequest(const HttpRequest& request,
                                                  const std::string& path_prefix,
                                                  const std::string& token,
                                                  const std::string& user_agent) {
  httplib::Request out;
  out.method = request.method;
  out.path = path_prefix + request.path;
  for (const auto& [key, value] : request.headers) out.headers.emplace(key, value);
  if (!out.has_header("User-Agent")) out.headers.emplace("User-Agent", user_agent);
  if (!token.empty()) out.headers.emplace("Authorization", absl::StrCat("Bearer ", token));
  out.body = request.body;
  return out;
}

void CopyHead(const httplib::Response& from, HttpResponse& to) {
  to.status = from.status;
  to.headers.clear();
  for (const auto& [key, value] : from.headers) to.headers.emplace_back(key, value);
}

}  // namespace

absl::StatusOr<HttpResponse> HttplibTransport::Send(const HttpRequest& request) {
  ASSIGN_OR_RETURN(std::string token, BearerToken(/*reload=*/false));
  ASSIGN_OR_RETURN(HttpResponse response, SendWithToken(request, token));
  if (response.status == 401 && !config_.token_file.empty()) {
    // The token file may have been rotated since it was last read: re-read it now and, if it
    // changed, try once more.
    ASSIGN_OR_RETURN(std::string fresh, BearerToken(/*reload=*/true));
    if (fresh != token) return SendWithToken(request, fresh);
  }
  return response;
}

absl::StatusOr<HttpResponse> HttplibTransport::SendWithToken(const HttpRequest& request,
                                                             const std::string& token) {
  ASSIGN_OR_RETURN(httplib::Request req,
                   ToHttplibRequest(request, endpoint_.path_prefix, token, user_agent_));
  std::unique_ptr<httplib::ClientImpl> client = TakePooledClient();
  const bool reused = client != nullptr;
  if (!client) {
    ASSIGN_OR_RETURN(client, NewClient());
  }
  SetTimeout(*client, request.timeout);
  httplib::Result result = client->send(req);
  if (!result && reused && RetryableOnNewConnection(request.method, result.error())) {
    // A server closes a kept-alive connection when it likes (an idle timeout, a request limit),
    // possibly just as a request goes out on it: such a request is tried once more on a new
    // connection, as Go's client does.
    ASSIGN_OR_RETURN(client, NewClient());
    SetTimeout(*client, request.timeout);
    result = client->send(req);
  }
  if (!result) return TransportError(request, result.error());
  HttpResponse response;
  CopyHead(*result, response);
  response.body = std::move(result->body);
  ReturnPooledClient(std::move(client));
  return response;
}

absl::StatusOr<HttpResponse> HttplibTransport::Stream(
    const HttpRequest& request, const std::function<bool(absl::string_view)>& on_data,
    CancelToken* cancel) {
  ASSIGN_OR_RETURN(std::string token, BearerToken(/*reload=*/false));
  ASSIGN_OR_RETURN(httplib::Request req,
                   ToHttplibRequest(request, endpoint_.path_prefix, token, user_agent_));
  // A dedicated connection: stop() on it must not disturb other requests.
  ASSIGN_OR_RETURN(std::unique_ptr<httplib::ClientImpl> client, NewClient());
  client->set_keep_alive(false);
  SetTimeout(*client, request.timeout);

  HttpResponse response;
  bool consumer_stopped = false;
  auto is_cancelled = [cancel] { return cancel != nullptr && cancel->cancelled(); };
  req.response_handler = [&](const httplib::Response& head) {
    CopyHead(head, response);
    return !is_cancelled();
  };
  req.content_receiver = [&](const char* data, size_t size, uint64_t, uint64_t) {
    if (is_cancelled()) return false;
    if (response.status >= 200 && response.status < 300) {
      if (!on_data(absl::string_view(data, size))) {
        consumer_stopped = true;
        return false;
      }
    } else if (response.body.size() < kMaxErrorBodyBytes) {
      response.body.append(data, std::min(size, kMaxErrorBodyBytes - response.body.size()));
    }
    return true;
  };
  // stop() shuts the socket down, which wakes the blocked read.
  if (cancel != nullptr) cancel->SetAbort([c = client.get()] { c->stop(); });
  httplib::Result result = client->send(req);
  if (cancel != nullptr) cancel->ClearAbort();  // waits for a running abort

  if (is_cancelled()) return absl::CancelledError("stream cancelled");
  if (consumer_stopped) return absl::CancelledError("stream stopped by its consumer");
  if (!result) return TransportError(request, result.error());
  // A rotated token file: make the next request re-read it (the caller retries streams).
  if (response.status == 401 && !config_.token_file.empty()) (void)BearerToken(/*reload=*/true);
  return response;
}

absl::StatusOr<std::shared_ptr<RestClient>> NewHttplibRestClient(const ClusterConfig& config,
                                                                 std::string user_agent,
                                                                 RestClientOptions options) {
  ASSIGN_OR_RETURN(std::unique_ptr<HttplibTransport> transport, HttplibTransport::Create(config));
  if (!user_agent.empty()) transport->set_user_agent(std::move(user_agent));
  return std::make_shared<RestClient>(std::shared_ptr<HttpTransport>(std::move(transport)),
                                      std::move(options));
}

}  // namespace reverser::kube
