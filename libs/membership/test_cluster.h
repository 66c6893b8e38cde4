#pragma once

// For the membership tests: an in-process kube-sim and RestClients for it (one per replica, as
// each process has its own).

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "libs/core/status.h"
#include "libs/kube/config.h"
#include "libs/kube/httplib_transport.h"
#include "libs/kube/rest_client.h"
#include "nlohmann/json.hpp"
#include "tools/kube-sim/kube_sim.h"

namespace reverser::membership::testing {

inline absl::StatusOr<std::shared_ptr<kube::RestClient>> ClientFor(const kubesim::KubeSim& sim) {
  ASSIGN_OR_RETURN(kube::ClusterConfig config, kube::ParseKubeconfig(sim.Kubeconfig(), ""));
  return kube::NewHttplibRestClient(config);
}

// An in-process kube-sim holding namespace `ns` (where the Leases live) and an admin client.
struct TestCluster {
  std::unique_ptr<kubesim::KubeSim> sim;
  std::shared_ptr<kube::RestClient> admin;
};
inline absl::StatusOr<TestCluster> StartTestCluster(const std::string& ns) {
  TestCluster cluster;
  ASSIGN_OR_RETURN(cluster.sim, kubesim::KubeSim::Start(kubesim::KubeSimOptions{}));
  ASSIGN_OR_RETURN(cluster.admin, ClientFor(*cluster.sim));
  nlohmann::json namespace_object = {
      {"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", ns}}}};
  RETURN_IF_ERROR(cluster.admin->Create({"", "v1", "namespaces"}, "", namespace_object).status());
  return cluster;
}

// Short watches, so a test that ends does not wait for a long poll.
inline kube::ReflectorOptions TestReflectorOptions() {
  kube::ReflectorOptions options;
  options.min_watch_timeout_seconds = options.max_watch_timeout_seconds = 30;
  return options;
}

}  // namespace reverser::membership::testing
