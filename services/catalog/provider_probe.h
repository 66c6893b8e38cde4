#pragma once

// The blocking GitProvider checks: the credentials Secret (present, one recognised key
// dialect) and whether the remote can be reached (a local path must exist; a network remote
// must accept a TCP connection). Run on a worker thread, never on the actor.

#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "libs/kube/rest_client.h"
#include "services/catalog/controllers.h"

namespace reverser::catalog {

// Which credential dialect a Secret's data keys form, or InvalidArgument naming the accepted
// keys. SSH (ssh-privatekey | identity | sshPrivateKey), basic (username + password), bearer
// (bearerToken).
absl::StatusOr<std::string> CredentialDialect(const nlohmann::json& secret);

// "file:///x" and "/x" are local paths; everything else is host:port (https 443, http 80,
// ssh and scp-like "git@host:path" 22).
struct RemoteEndpoint {
  bool local = false;
  std::string path;  // local
  std::string host;
  int port = 0;
};
absl::StatusOr<RemoteEndpoint> ParseRemote(const std::string& url);

// OK when reachable; Unavailable with the reason otherwise.
using ReachabilityCheck = std::function<absl::Status(const RemoteEndpoint&)>;
absl::Status CheckReachable(const RemoteEndpoint& endpoint, absl::Duration timeout);

ProviderProbe ProbeProvider(kube::RestClient& client, const nlohmann::json& provider,
                            const ReachabilityCheck& reachable, absl::Time now);

}  // namespace reverser::catalog
