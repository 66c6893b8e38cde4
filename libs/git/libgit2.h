#pragma once

// The thin layer every file in libs/git stands on: libgit2 initialisation (once per process),
// libgit2 error codes → absl::Status carrying git_error_last() text, and RAII owners for the
// libgit2 objects we allocate.

#include <git2.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace reverser::git {

// Calls git_libgit2_init() exactly once per process (thread-safe); never shuts libgit2 down, so
// objects owned by statics stay valid until exit. Sets HOME first when it is unset (libgit2's SSH
// transport needs it; see libgit2.cc).
void EnsureLibgit2Initialized();

// Replaces the CA certificates libgit2 trusts for HTTPS remotes (process-wide; a PEM bundle).
// By default the system bundle /etc/ssl/certs/ca-certificates.crt is used when present.
absl::Status SetTrustedCertificates(const std::string& ca_bundle_file);

// OK for rc >= 0; otherwise a Status whose code follows the libgit2 error code/class and whose
// message is "<context>: <git_error_last() text>". Clears libgit2's thread-local error.
absl::Status GitStatus(int rc, absl::string_view context);

// Owners for libgit2 objects: GitPtr<git_tree> frees with git_tree_free, and so on.
template <typename T>
struct GitDeleter;

#define REVERSER_GIT_DELETER(type, free_fn) \
  template <>                               \
  struct GitDeleter<type> {                 \
    void operator()(type* p) const {        \
      if (p) free_fn(p);                    \
    }                                       \
  }

REVERSER_GIT_DELETER(git_repository, git_repository_free);
REVERSER_GIT_DELETER(git_remote, git_remote_free);
REVERSER_GIT_DELETER(git_reference, git_reference_free);
REVERSER_GIT_DELETER(git_object, git_object_free);
REVERSER_GIT_DELETER(git_commit, git_commit_free);
REVERSER_GIT_DELETER(git_tree, git_tree_free);
REVERSER_GIT_DELETER(git_tree_entry, git_tree_entry_free);
REVERSER_GIT_DELETER(git_treebuilder, git_treebuilder_free);
REVERSER_GIT_DELETER(git_blob, git_blob_free);
REVERSER_GIT_DELETER(git_signature, git_signature_free);
REVERSER_GIT_DELETER(git_revwalk, git_revwalk_free);
REVERSER_GIT_DELETER(git_packbuilder, git_packbuilder_free);
REVERSER_GIT_DELETER(git_config, git_config_free);
REVERSER_GIT_DELETER(git_odb, git_odb_free);
REVERSER_GIT_DELETER(git_odb_object, git_odb_object_free);

#undef REVERSER_GIT_DELETER

template <typename T>
using GitPtr = std::unique_ptr<T, GitDeleter<T>>;

// A git_buf disposed on scope exit.
class GitBuf {
 public:
  GitBuf() = default;
  ~GitBuf() { git_buf_dispose(&buf_); }
  GitBuf(const GitBuf&) = delete;
  GitBuf& operator=(const GitBuf&) = delete;
  git_buf* get() { return &buf_; }
  std::string str() const { return buf_.ptr ? std::string(buf_.ptr, buf_.size) : std::string(); }

 private:
  git_buf buf_ = GIT_BUF_INIT;
};

// A git_strarray view over owned strings (libgit2 takes `char**` but does not modify them).
class StrArray {
 public:
  explicit StrArray(std::vector<std::string> strings);
  StrArray(const StrArray&) = delete;
  StrArray& operator=(const StrArray&) = delete;
  const git_strarray* get() const { return &array_; }

 private:
  std::vector<std::string> strings_;
  std::vector<char*> pointers_;
  git_strarray array_{};
};

// Hex form of an object id, and back (InvalidArgument on anything but 40 hex digits).
std::string OidToHex(const git_oid& oid);
absl::Status OidFromHex(absl::string_view hex, git_oid* out);

}  // namespace reverser::git
