#pragma once

// Where the gitworker reads Secrets (credentials, signing keys) from: files of mounted Secret
// volumes (--credentials_dir) or the Kubernetes API (--secrets_source=api). A signing key the
// catalog generates exists only in the API until the kubelet refreshes a mounted volume, so the
// API source picks it up at once.

#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "libs/core/clock.h"
#include "libs/kube/rest_client.h"
#include "services/gitworker/branch_actor.h"
#include "services/gitworker/branch_worker.h"

namespace reverser::gitworker {

// A Secret's data by "namespace/name" (values as bytes). InvalidArgument for a name that is not
// namespace/name, NotFound for a missing Secret.
using SecretReader =
    std::function<absl::StatusOr<std::map<std::string, std::string>>(const std::string& secret)>;

// <dir>/<namespace>/<name>/<key> files, as Kubernetes projects a Secret volume (dot-files,
// such as the volume's ..data links, are skipped).
SecretReader DirectorySecretReader(std::string dir);
// GET of the Secret through the API with the process's own credentials.
SecretReader ApiSecretReader(std::shared_ptr<kube::RestClient> client);

// Credentials from a Secret (the reference's key dialects, CredentialsFromSecretData).
CredentialsResolver SecretCredentialsResolver(SecretReader reader);

// Signing keys (`signing.key`, optional `passphrase`) read through `reader`. A key read is
// reused for `ttl`, so a rotated or newly generated key is used within `ttl`; failures are not
// cached (the branch worker retries at its push cadence). Thread-safe.
SigningKeyResolver CachingSigningKeyResolver(SecretReader reader, absl::Duration ttl,
                                             const core::Clock* clock = &core::Clock::Real());

}  // namespace reverser::gitworker
