#include "libs/git/libgit2.h"

#include <pwd.h>
#include <stdlib.h>
#include <unistd.h>

#include <mutex>

#include "absl/strings/str_cat.h"

namespace reverser::git {
namespace {

constexpr char kSystemCaBundle[] = "/etc/ssl/certs/ca-certificates.crt";

absl::StatusCode CodeFor(int rc, int klass) {
  switch (rc) {
    case GIT_ENOTFOUND:
      return absl::StatusCode::kNotFound;
    case GIT_EEXISTS:
      return absl::StatusCode::kAlreadyExists;
    case GIT_EAUTH:
      return absl::StatusCode::kUnauthenticated;
    case GIT_ECERTIFICATE:
      return absl::StatusCode::kPermissionDenied;
    case GIT_ENONFASTFORWARD:
    case GIT_EUNBORNBRANCH:
    case GIT_EBAREREPO:
      return absl::StatusCode::kFailedPrecondition;
    case GIT_ELOCKED:
    case GIT_EMODIFIED:
    case GIT_EUSER:
      return absl::StatusCode::kAborted;
    case GIT_EINVALIDSPEC:
    case GIT_EINVALID:
    case GIT_EAMBIGUOUS:
      return absl::StatusCode::kInvalidArgument;
    default:
      break;
  }
  switch (klass) {
    case GIT_ERROR_NET:
    case GIT_ERROR_SSH:
    case GIT_ERROR_SSL:
    case GIT_ERROR_HTTP:
    case GIT_ERROR_OS:
      // The network or the disk: worth retrying later.
      return absl::StatusCode::kUnavailable;
    default:
      return absl::StatusCode::kInternal;
  }
}

}  // namespace

void EnsureLibgit2Initialized() {
  static std::once_flag once;
  std::call_once(once, [] {
    // libgit2's SSH transport reads $HOME/.ssh/known_hosts before our host-key callback runs and
    // fails every SSH connection when HOME is unset (common in containers). Our callback makes
    // the trust decision either way, so any home will do: the account's, else a non-existent one.
    if (getenv("HOME") == nullptr) {
      const passwd* account = getpwuid(getuid());
      setenv("HOME", account && account->pw_dir ? account->pw_dir : "/nonexistent", 0);
    }
    git_libgit2_init();
    // Debian builds libgit2 on mbedTLS, which has no implicit trust store: point it at the
    // system bundle so HTTPS remotes verify like they do for the git CLI.
    if (access(kSystemCaBundle, R_OK) == 0) {
      git_libgit2_opts(GIT_OPT_SET_SSL_CERT_LOCATIONS, kSystemCaBundle, nullptr);
      git_error_clear();
    }
  });
}

absl::Status SetTrustedCertificates(const std::string& ca_bundle_file) {
  EnsureLibgit2Initialized();
  return GitStatus(
      git_libgit2_opts(GIT_OPT_SET_SSL_CERT_LOCATIONS, ca_bundle_file.c_str(), nullptr),
      absl::StrCat("loading CA certificates from ", ca_bundle_file));
}

absl::Status GitStatus(int rc, absl::string_view context) {
  if (rc >= 0) return absl::OkStatus();
  const git_error* error = git_error_last();
  std::string text = error && error->message ? error->message : "unknown libgit2 error";
  int klass = error ? error->klass : GIT_ERROR_NONE;
  git_error_clear();
  return absl::Status(CodeFor(rc, klass), absl::StrCat(context, ": ", text));
}

StrArray::StrArray(std::vector<std::string> strings) : strings_(std::move(strings)) {
  pointers_.reserve(strings_.size());
  for (std::string& s : strings_) pointers_.push_back(s.data());
  array_.strings = pointers_.data();
  array_.count = pointers_.size();
}

std::string OidToHex(const git_oid& oid) {
  char hex[GIT_OID_HEXSZ + 1];
  git_oid_tostr(hex, sizeof(hex), &oid);
  return std::string(hex, GIT_OID_HEXSZ);
}

absl::Status OidFromHex(absl::string_view hex, git_oid* out) {
  if (hex.size() != GIT_OID_HEXSZ || git_oid_fromstrn(out, hex.data(), hex.size()) < 0) {
    git_error_clear();
    return absl::InvalidArgumentError(absl::StrCat("not a 40-digit object id: '", hex, "'"));
  }
  return absl::OkStatus();
}

}  // namespace reverser::git
