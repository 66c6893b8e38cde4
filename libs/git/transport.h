#pragma once

// How libgit2 reaches a remote: which transport a URL selects, and the per-connection callbacks
// that supply credentials (SSH key, basic auth, bearer header) and verify SSH host keys against
// known_hosts (fail closed).

#include <git2.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "libs/git/credentials.h"
#include "libs/git/libgit2.h"

namespace reverser::git {

// True for a filesystem path or a file:// URL (libgit2's local transport).
bool IsLocalUrl(absl::string_view url);
// The filesystem path of a local URL ("file:///x" → "/x"; a path is returned as is).
std::string LocalPathFromUrl(absl::string_view url);

// Host and port of an SSH URL: "ssh://[user@]host[:port]/path" or scp-like "user@host:path"
// (port 22). InvalidArgument for anything else.
struct SshEndpoint {
  std::string host;
  int port = 22;
};
absl::StatusOr<SshEndpoint> ParseSshEndpoint(absl::string_view url);

// The callbacks and headers for operations on one remote URL with one set of credentials:
// credentials, host-key verification and the remote's per-ref push verdicts. Install it into the
// git_remote_callbacks of a connect/fetch/push; it must outlive that operation.
class RemoteSession {
 public:
  RemoteSession(std::string url, GitCredentials credentials);
  ~RemoteSession();
  RemoteSession(const RemoteSession&) = delete;
  RemoteSession& operator=(const RemoteSession&) = delete;

  // Sets the credential, certificate and push-status callbacks (and their payload).
  void Install(git_remote_callbacks* callbacks);
  // Refs the remote refused during the last push, as "<ref>: <server message>".
  const std::vector<std::string>& push_rejections() const { return push_rejections_; }
  // Extra HTTP headers ("Authorization: Bearer …" for bearer credentials).
  const git_strarray* headers() const { return headers_->get(); }

 private:
  static int OnCredential(git_credential** out, const char* url, const char* username_from_url,
                          unsigned int allowed_types, void* payload);
  static int OnCertificateCheck(git_cert* cert, int valid, const char* host, void* payload);
  static int OnPushUpdateReference(const char* refname, const char* status, void* payload);
  int Credential(git_credential** out, const char* username_from_url, unsigned int allowed_types);
  int CertificateCheck(git_cert* cert, int valid, const char* host);
  // For libgit2 builds without in-memory SSH keys: the private key in an anonymous memory file
  // (memfd), named by its /proc/self/fd path. It is never on a disk and ends with the process,
  // even one killed with SIGKILL.
  absl::StatusOr<std::string> KeyFile();

  std::string url_;
  GitCredentials credentials_;
  std::vector<KnownHost> known_hosts_;
  std::unique_ptr<StrArray> headers_;
  int credential_attempts_ = 0;
  std::vector<std::string> push_rejections_;
  int key_fd_ = -1;  // the memfd of KeyFile(), closed on destruction
};

}  // namespace reverser::git
