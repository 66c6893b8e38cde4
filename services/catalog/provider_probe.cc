#include "services/catalog/provider_probe.h"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "libs/core/url_redaction.h"
#include "libs/kube/api_error.h"
#include "services/catalog/objects.h"
#include "services/catalog/signing_key.h"

namespace reverser::catalog {
namespace {

bool HasKey(const nlohmann::json& data, const char* key) {
  return data.is_object() && data.contains(key);
}

// Splits "host:port" / "[v6]:port" with a default port.
absl::StatusOr<RemoteEndpoint> HostPort(absl::string_view authority, int default_port) {
  RemoteEndpoint out;
  out.port = default_port;
  if (auto at = authority.rfind('@'); at != absl::string_view::npos) {
    authority.remove_prefix(at + 1);
  }
  absl::string_view host = authority;
  absl::string_view port;
  if (absl::StartsWith(authority, "[")) {
    auto close = authority.find(']');
    if (close == absl::string_view::npos) return absl::InvalidArgumentError("unterminated [");
    host = authority.substr(1, close - 1);
    if (close + 1 < authority.size() && authority[close + 1] == ':') {
      port = authority.substr(close + 2);
    }
  } else if (auto colon = authority.find(':'); colon != absl::string_view::npos) {
    host = authority.substr(0, colon);
    port = authority.substr(colon + 1);
  }
  if (host.empty()) return absl::InvalidArgumentError("no host");
  if (!port.empty() && (!absl::SimpleAtoi(port, &out.port) || out.port <= 0 || out.port > 65535)) {
    return absl::InvalidArgumentError(absl::StrCat("bad port \"", port, "\""));
  }
  out.host = std::string(host);
  return out;
}

}  // namespace

absl::StatusOr<std::string> CredentialDialect(const nlohmann::json& secret) {
  const nlohmann::json& data = NodeAt(secret, {"data"});
  const nlohmann::json& string_data = NodeAt(secret, {"stringData"});
  auto has = [&](const char* key) { return HasKey(data, key) || HasKey(string_data, key); };
  if (has("ssh-privatekey") || has("identity") || has("sshPrivateKey")) return std::string("ssh");
  if (has("username") && has("password")) return std::string("basic");
  if (has("bearerToken")) return std::string("bearer");
  return absl::InvalidArgumentError(
      "has none of the credential keys: ssh-privatekey | identity | sshPrivateKey (SSH), "
      "username + password (HTTP basic), bearerToken");
}

absl::StatusOr<RemoteEndpoint> ParseRemote(const std::string& url) {
  if (url.empty()) return absl::InvalidArgumentError("spec.url is empty");
  if (absl::StartsWith(url, "file://")) return RemoteEndpoint{true, url.substr(7)};
  if (url.front() == '/') return RemoteEndpoint{true, url};
  auto scheme_end = url.find("://");
  if (scheme_end != std::string::npos) {
    std::string scheme = url.substr(0, scheme_end);
    absl::string_view rest = absl::string_view(url).substr(scheme_end + 3);
    absl::string_view authority = rest.substr(0, rest.find('/'));
    int port = scheme == "https" ? 443 : scheme == "http" ? 80 : scheme == "ssh" ? 22 : 0;
    if (port == 0) {
      return absl::InvalidArgumentError(absl::StrCat("unsupported URL scheme \"", scheme, "\""));
    }
    return HostPort(authority, port);
  }
  // scp-like: [user@]host:path
  auto colon = url.find(':');
  if (colon == std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat("\"", url, "\" is not a Git remote URL"));
  }
  std::string authority = url.substr(0, colon);
  if (auto at = authority.rfind('@'); at != std::string::npos) authority = authority.substr(at + 1);
  if (authority.empty()) return absl::InvalidArgumentError("no host");
  RemoteEndpoint out;
  out.host = authority;
  out.port = 22;
  return out;
}

absl::Status CheckReachable(const RemoteEndpoint& endpoint, absl::Duration timeout) {
  if (endpoint.local) {
    struct stat st;
    if (::stat(endpoint.path.c_str(), &st) != 0) {
      return absl::UnavailableError(
          absl::StrCat("local repository path ", endpoint.path, " does not exist"));
    }
    return absl::OkStatus();
  }
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* addrs = nullptr;
  std::string port = std::to_string(endpoint.port);
  if (int rc = ::getaddrinfo(endpoint.host.c_str(), port.c_str(), &hints, &addrs); rc != 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot resolve ", endpoint.host, ": ", ::gai_strerror(rc)));
  }
  absl::Status last = absl::UnavailableError("no address");
  for (addrinfo* a = addrs; a != nullptr; a = a->ai_next) {
    int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    int rc = ::connect(fd, a->ai_addr, a->ai_addrlen);
    if (rc != 0 && errno == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      int polled = ::poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(timeout)));
      if (polled == 1) {
        int err = 0;
        socklen_t len = sizeof(err);
        ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
        rc = err == 0 ? 0 : -1;
        errno = err;
      } else {
        rc = -1;
        if (polled == 0) errno = ETIMEDOUT;
      }
    }
    int saved = errno;
    ::close(fd);
    if (rc == 0) {
      ::freeaddrinfo(addrs);
      return absl::OkStatus();
    }
    last = absl::UnavailableError(absl::StrCat("cannot connect to ", endpoint.host, ":",
                                               endpoint.port, ": ", std::strerror(saved)));
  }
  ::freeaddrinfo(addrs);
  return last;
}

ProviderProbe ProbeProvider(kube::RestClient& client, const nlohmann::json& provider,
                            const ReachabilityCheck& reachable, absl::Time now) {
  ProviderProbe probe;
  probe.uid = UidOf(provider);
  probe.generation = GenerationOf(provider);
  probe.at = now;
  const std::string ns = StringAt(provider, {"metadata", "namespace"});
  // The signing key first (the reference's order): a key generated now is published even when
  // a later check fails.
  SigningKeyCheck signing = EnsureSigningKey(client, provider);
  if (!signing.ok) {
    probe.ok = false;
    probe.reason = signing.reason;
    probe.message = signing.message;
    return probe;
  }
  if (signing.configured) probe.signing_public_key = signing.public_key;
  const std::string secret_name = StringAt(provider, {"spec", "secretRef", "name"});
  std::string credentials = "no credentials";
  if (!secret_name.empty()) {
    auto secret = client.Get({"", "v1", "secrets"}, ns, secret_name);
    if (!secret.ok()) {
      probe.ok = false;
      probe.reason = reason::kSecretNotFound;
      probe.message = kube::IsApiNotFound(secret.status())
                          ? absl::StrCat("Secret ", ns, "/", secret_name, " not found")
                          : absl::StrCat("cannot read Secret ", ns, "/", secret_name, ": ",
                                         secret.status().message());
      return probe;
    }
    auto dialect = CredentialDialect(*secret);
    if (!dialect.ok()) {
      probe.ok = false;
      probe.reason = reason::kSecretMalformed;
      probe.message = absl::StrCat("Secret ", ns, "/", secret_name, " ", dialect.status().message());
      return probe;
    }
    credentials = absl::StrCat(*dialect, " credentials");
  }
  const std::string url = StringAt(provider, {"spec", "url"});
  auto endpoint = ParseRemote(url);
  absl::Status reach = endpoint.ok() ? reachable(*endpoint) : endpoint.status();
  if (!reach.ok()) {
    probe.ok = false;
    probe.reason = reason::kConnectionFailed;
    probe.message = std::string(reach.message());
    return probe;
  }
  probe.message = absl::StrCat("remote ", core::RedactUrl(url), " reachable; ", credentials);
  if (signing.configured) {
    absl::StrAppend(&probe.message, "; commits signed with ",
                    signing.generated ? "a generated" : "the", " ed25519 key");
  }
  return probe;
}

}  // namespace reverser::catalog
