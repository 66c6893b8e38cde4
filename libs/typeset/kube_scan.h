#pragma once

// Feeds the catalog from the Kubernetes client: kube::DiscoveryResult -> DiscoveryScan. Kept out
// of the :typeset target so the registry stays a leaf without client dependencies.

#include <string>
#include <vector>

#include "libs/kube/discovery.h"
#include "libs/typeset/scan.h"
#include "nlohmann/json_fwd.hpp"

namespace reverser::typeset {

// One scan from a discovery result. Any failure makes the scan incomplete; per-group/version
// failures also become `failed` entries (an empty group_version means all of /apis failed).
// `crd_group_resources` is the origin evidence from CrdGroupResources().
DiscoveryScan ScanFromDiscovery(const kube::DiscoveryResult& result,
                                std::vector<std::string> crd_group_resources = {});

// "group/resource" of every item of a CustomResourceDefinitionList (or a single CRD object).
// Items without spec.group or spec.names.plural are skipped.
std::vector<std::string> CrdGroupResources(const nlohmann::json& crds);

}  // namespace reverser::typeset
