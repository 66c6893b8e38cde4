#include "libs/git/transport.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "libs/core/url_redaction.h"

namespace reverser::git {
namespace {

// Sets libgit2's thread-local error so GitStatus reports why a callback refused.
int Refuse(int rc, int klass, const std::string& message) {
  git_error_set_str(klass, message.c_str());
  return rc;
}

}  // namespace

bool IsLocalUrl(absl::string_view url) {
  return absl::StartsWith(url, "file://") || absl::StartsWith(url, "/") ||
         absl::StartsWith(url, "./") || absl::StartsWith(url, "../");
}

std::string LocalPathFromUrl(absl::string_view url) {
  absl::ConsumePrefix(&url, "file://");
  return std::string(url);
}

absl::StatusOr<SshEndpoint> ParseSshEndpoint(absl::string_view url) {
  SshEndpoint endpoint;
  absl::string_view rest = url;
  if (absl::ConsumePrefix(&rest, "ssh://") || absl::ConsumePrefix(&rest, "git+ssh://") ||
      absl::ConsumePrefix(&rest, "ssh+git://")) {
    absl::string_view authority = rest.substr(0, rest.find('/'));
    if (size_t at = authority.rfind('@'); at != absl::string_view::npos) {
      authority.remove_prefix(at + 1);
    }
    absl::string_view host = authority;
    if (absl::StartsWith(authority, "[")) {  // [ipv6]:port
      size_t close = authority.find(']');
      if (close == absl::string_view::npos) return absl::InvalidArgumentError("bad SSH URL");
      host = authority.substr(1, close - 1);
      authority.remove_prefix(close + 1);
      if (absl::ConsumePrefix(&authority, ":") && !absl::SimpleAtoi(authority, &endpoint.port)) {
        return absl::InvalidArgumentError(absl::StrCat("bad port in SSH URL '", url, "'"));
      }
    } else if (size_t colon = authority.find(':'); colon != absl::string_view::npos) {
      host = authority.substr(0, colon);
      if (!absl::SimpleAtoi(authority.substr(colon + 1), &endpoint.port)) {
        return absl::InvalidArgumentError(absl::StrCat("bad port in SSH URL '", url, "'"));
      }
    }
    endpoint.host = std::string(host);
  } else if (!absl::StrContains(url, "://") && absl::StrContains(url, ':')) {
    absl::string_view authority = url.substr(0, url.find(':'));  // scp-like user@host:path
    if (size_t at = authority.rfind('@'); at != absl::string_view::npos) {
      authority.remove_prefix(at + 1);
    }
    endpoint.host = std::string(authority);
  }
  if (endpoint.host.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("not an SSH URL: '", url, "'"));
  }
  return endpoint;
}

RemoteSession::RemoteSession(std::string url, GitCredentials credentials)
    : url_(std::move(url)), credentials_(std::move(credentials)) {
  known_hosts_ = ParseKnownHosts(credentials_.known_hosts);
  std::vector<std::string> headers;
  if (credentials_.kind == GitCredentials::Kind::kBearer) {
    headers.push_back(absl::StrCat("Authorization: Bearer ", credentials_.bearer_token));
  }
  headers_ = std::make_unique<StrArray>(std::move(headers));
}

RemoteSession::~RemoteSession() {
  if (key_fd_ >= 0) close(key_fd_);
}

void RemoteSession::Install(git_remote_callbacks* callbacks) {
  callbacks->credentials = &RemoteSession::OnCredential;
  callbacks->certificate_check = &RemoteSession::OnCertificateCheck;
  callbacks->push_update_reference = &RemoteSession::OnPushUpdateReference;
  callbacks->payload = this;
}

int RemoteSession::OnPushUpdateReference(const char* refname, const char* status, void* payload) {
  // status is NULL when the remote accepted the update.
  if (status != nullptr) {
    static_cast<RemoteSession*>(payload)->push_rejections_.push_back(
        absl::StrCat(refname ? refname : "?", ": ", status));
  }
  return 0;
}

int RemoteSession::OnCredential(git_credential** out, const char* /*url*/,
                                const char* username_from_url, unsigned int allowed_types,
                                void* payload) {
  return static_cast<RemoteSession*>(payload)->Credential(out, username_from_url, allowed_types);
}

int RemoteSession::OnCertificateCheck(git_cert* cert, int valid, const char* host, void* payload) {
  return static_cast<RemoteSession*>(payload)->CertificateCheck(cert, valid, host);
}

int RemoteSession::Credential(git_credential** out, const char* username_from_url,
                              unsigned int allowed_types) {
  const char* ssh_user = username_from_url && *username_from_url ? username_from_url : "git";
  // SSH without a user in the URL first asks for the user name alone; that is not an attempt.
  if (allowed_types & GIT_CREDENTIAL_USERNAME) return git_credential_username_new(out, ssh_user);
  // libgit2 asks again after the server refused: one real attempt only, never a loop.
  if (credential_attempts_++ > 0) {
    return Refuse(GIT_EAUTH, GIT_ERROR_CALLBACK,
                  absl::StrCat("authentication to ", core::RedactUrl(url_), " was rejected"));
  }
  switch (credentials_.kind) {
    case GitCredentials::Kind::kSsh: {
      const char* passphrase =
          credentials_.ssh_passphrase.empty() ? nullptr : credentials_.ssh_passphrase.c_str();
      if (allowed_types & GIT_CREDENTIAL_SSH_MEMORY) {
        int rc = git_credential_ssh_key_memory_new(
            out, ssh_user, nullptr, credentials_.ssh_private_key.c_str(), passphrase);
        if (rc == 0) return 0;
        git_error_clear();  // built without in-memory keys: fall back to a key file
      }
      if (allowed_types & (GIT_CREDENTIAL_SSH_KEY | GIT_CREDENTIAL_SSH_MEMORY)) {
        absl::StatusOr<std::string> file = KeyFile();
        if (!file.ok())
          return Refuse(GIT_EAUTH, GIT_ERROR_OS, std::string(file.status().message()));
        return git_credential_ssh_key_new(out, ssh_user, nullptr, file->c_str(), passphrase);
      }
      break;
    }
    case GitCredentials::Kind::kBasic:
      if (allowed_types & GIT_CREDENTIAL_USERPASS_PLAINTEXT) {
        return git_credential_userpass_plaintext_new(out, credentials_.username.c_str(),
                                                     credentials_.password.c_str());
      }
      break;
    case GitCredentials::Kind::kBearer:
      return Refuse(GIT_EAUTH, GIT_ERROR_CALLBACK,
                    absl::StrCat("bearer token was rejected by ", core::RedactUrl(url_)));
    case GitCredentials::Kind::kNone:
      return Refuse(GIT_EAUTH, GIT_ERROR_CALLBACK,
                    absl::StrCat(core::RedactUrl(url_), " requires credentials and none are configured"));
  }
  return Refuse(GIT_EAUTH, GIT_ERROR_CALLBACK,
                absl::StrCat("the configured credentials do not fit the transport of ",
                             core::RedactUrl(url_)));
}

int RemoteSession::CertificateCheck(git_cert* cert, int valid, const char* host) {
  if (cert->cert_type != GIT_CERT_HOSTKEY_LIBSSH2) {
    // TLS: keep libgit2's own verification against the system trust store.
    return GIT_PASSTHROUGH;
  }
  (void)valid;  // libgit2 cannot know SSH hosts; the decision is ours alone.
  auto* hostkey = reinterpret_cast<git_cert_hostkey*>(cert);
  absl::StatusOr<SshEndpoint> endpoint = ParseSshEndpoint(url_);
  std::string host_name = host ? host : "";
  if (known_hosts_.empty()) {
    return Refuse(GIT_ECERTIFICATE, GIT_ERROR_SSH,
                  absl::StrCat("no known_hosts entries configured: refusing SSH host ", host_name));
  }
  if (!endpoint.ok() || !(hostkey->type & GIT_CERT_SSH_RAW) || hostkey->hostkey == nullptr) {
    return Refuse(GIT_ECERTIFICATE, GIT_ERROR_SSH,
                  absl::StrCat("cannot verify the host key of ", host_name));
  }
  absl::string_view blob(hostkey->hostkey, hostkey->hostkey_len);
  if (!HostKeyTrusted(known_hosts_, host_name, endpoint->port, blob)) {
    return Refuse(GIT_ECERTIFICATE, GIT_ERROR_SSH,
                  absl::StrCat("host key for ", KnownHostsName(host_name, endpoint->port),
                               " is not in known_hosts"));
  }
  return 0;
}

absl::StatusOr<std::string> RemoteSession::KeyFile() {
  if (key_fd_ < 0) {
    const int fd = memfd_create("reverser-ssh-key", MFD_CLOEXEC);
    if (fd < 0) return absl::UnavailableError("cannot create a memory file for the SSH key");
    const std::string& key = credentials_.ssh_private_key;
    if (write(fd, key.data(), key.size()) != static_cast<ssize_t>(key.size())) {
      close(fd);
      return absl::UnavailableError("cannot write the SSH key to its memory file");
    }
    key_fd_ = fd;
  }
  return absl::StrCat("/proc/self/fd/", key_fd_);
}

}  // namespace reverser::git
