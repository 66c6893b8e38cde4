#pragma once

// The signing key lifecycle of a GitProvider (spec.commit.signing): read the key from its
// Secret, generate an ed25519 key when the Secret or its `signing.key` is missing and
// `generateWhenMissing` is set, and derive the public key published in status.signingPublicKey.
// Blocking (Kubernetes API calls): runs inside the provider probe, on a worker thread.

#include <nlohmann/json.hpp>
#include <string>

#include "libs/kube/rest_client.h"

namespace reverser::catalog {

struct SigningKeyCheck {
  bool configured = false;  // spec.commit.signing is set
  bool ok = true;
  std::string reason;      // SecretNotFound or SecretMalformed when !ok
  std::string message;     // why, when !ok
  std::string public_key;  // "ssh-ed25519 AAAA…" when configured and ok
  bool generated = false;  // this check wrote a new key into the Secret
};

// Reads (and when allowed, generates) the signing key of `provider`. A Secret that is missing,
// or lacks `signing.key`, without generateWhenMissing → SecretNotFound; a key that does not
// parse (or needs a passphrase it does not have) → SecretMalformed. A generated key is stored
// in the unencrypted OpenSSH format, or as encrypted PKCS#8 when the Secret holds a
// `passphrase`; `signing.pub` gets the authorized_keys line. The Secret gets no owner
// reference: the signing identity outlives the GitProvider.
SigningKeyCheck EnsureSigningKey(kube::RestClient& client, const nlohmann::json& provider);

}  // namespace reverser::catalog
