#pragma once

// Where and how to reach an API server: from kubeconfig files or from the in-cluster
// service-account mount. File references (certificate-authority, client-certificate,
// client-key) are read at load time and relative paths resolve against the kubeconfig's
// folder, as kubectl does. Token files are kept as paths: bound service-account tokens rotate,
// so the transport re-reads them.

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace reverser::kube {

struct ClusterConfig {
  std::string server;  // "https://host:port" or "http://…", maybe with a path prefix
  std::string ca_pem;  // CA bundle to verify the server; "" = system roots
  std::string client_cert_pem;
  std::string client_key_pem;
  std::string token;       // bearer token
  std::string token_file;  // bearer token file, re-read periodically (wins over `token`)
  bool insecure_skip_tls_verify = false;
  std::string namespace_;  // the context's namespace or the service account's; "" = unset
  std::string context;     // the kubeconfig context used ("" for in-cluster)
};

struct KubeconfigOptions {
  std::string context;  // "" = current-context
};

// Parses one kubeconfig document. `base_dir` resolves relative file references.
absl::StatusOr<ClusterConfig> ParseKubeconfig(absl::string_view yaml, absl::string_view base_dir,
                                              const KubeconfigOptions& options = {});

// Loads and merges kubeconfig files in order, as $KUBECONFIG does: the first file that defines
// a cluster, user, context or current-context wins. Missing files are skipped; if none exists
// the result is NotFound.
absl::StatusOr<ClusterConfig> LoadKubeconfigFiles(const std::vector<std::string>& paths,
                                                  const KubeconfigOptions& options = {});

// Reads an environment variable; injectable for tests.
using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;
EnvLookup ProcessEnv();

inline constexpr char kServiceAccountDir[] = "/var/run/secrets/kubernetes.io/serviceaccount";

// In-cluster config: KUBERNETES_SERVICE_HOST/PORT plus token, ca.crt and namespace from
// `root` (the service-account mount). FailedPrecondition when not running in a cluster.
absl::StatusOr<ClusterConfig> InClusterConfig(const EnvLookup& env = ProcessEnv(),
                                              const std::string& root = kServiceAccountDir);

// The usual precedence: an explicit kubeconfig path; else $KUBECONFIG (':'-separated); else
// the in-cluster config when KUBERNETES_SERVICE_HOST is set; else $HOME/.kube/config.
absl::StatusOr<ClusterConfig> LoadDefaultConfig(const std::string& kubeconfig_path = "",
                                                const KubeconfigOptions& options = {},
                                                const EnvLookup& env = ProcessEnv(),
                                                const std::string& sa_root = kServiceAccountDir);

// Reads a whole file (small helper shared with the transport for token files).
absl::StatusOr<std::string> ReadFileToString(const std::string& path);

}  // namespace reverser::kube
