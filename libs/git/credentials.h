#pragma once

// Git credentials as a GitProvider's Secret carries them (the reference's key dialects), and the
// known_hosts matching that makes SSH host verification fail closed.

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace reverser::git {

struct GitCredentials {
  enum class Kind { kNone, kSsh, kBasic, kBearer };
  Kind kind = Kind::kNone;
  std::string ssh_private_key;  // PEM / OpenSSH private key text
  std::string ssh_passphrase;   // empty: unencrypted key
  std::string username;         // basic auth
  std::string password;         // basic auth
  std::string bearer_token;     // sent as "Authorization: Bearer <token>"
  // known_hosts text used to verify SSH host keys. From the Secret; the caller may fill it from
  // knownHostsRef or the install-level ConfigMap when the Secret has none. Empty ⇒ every SSH
  // connection is refused (fail closed).
  std::string known_hosts;
};

// Reads a Secret's (already base64-decoded) data map:
//   SSH key: `ssh-privatekey` | `identity` (Flux) | `sshPrivateKey` (Argo CD), first present wins;
//   passphrase: `ssh-password`, else `password` when an SSH key is present;
//   `known_hosts`; basic: `username` + `password`; bearer: `bearerToken`.
// Precedence SSH → basic → bearer. No credential keys ⇒ kind kNone (anonymous). A present but
// empty key, or a username without a password, is InvalidArgument (the reference's
// SecretMalformed).
absl::StatusOr<GitCredentials> CredentialsFromSecretData(
    const std::map<std::string, std::string>& data);

// One known_hosts line (OpenSSH format). Hosts are either plain patterns ("host", "[host]:port",
// wildcards '*' '?', negation '!') or one hashed entry ("|1|salt|hmac-sha1").
struct KnownHost {
  enum class Marker { kNone, kRevoked, kCertAuthority };
  Marker marker = Marker::kNone;
  std::vector<std::string> patterns;  // plain form; empty when hashed
  std::string hash_salt;              // raw bytes, hashed form only
  std::string hash;                   // raw HMAC-SHA1 bytes, hashed form only
  std::string key_type;               // e.g. "ssh-ed25519"
  std::string key_blob;               // raw (base64-decoded) public key blob
};

// Parses known_hosts text; blank lines and comments are skipped, malformed lines are skipped
// too (as OpenSSH does), so the result may be empty.
std::vector<KnownHost> ParseKnownHosts(absl::string_view text);

// The name OpenSSH looks up for a host: "host" on port 22, "[host]:port" otherwise.
std::string KnownHostsName(absl::string_view host, int port);

// True when `host`/`port` has an entry whose key blob equals `key_blob` and no @revoked entry
// lists that key. @cert-authority entries never match (host certificates are not supported).
bool HostKeyTrusted(const std::vector<KnownHost>& known_hosts, absl::string_view host, int port,
                    absl::string_view key_blob);

}  // namespace reverser::git
