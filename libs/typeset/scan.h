#pragma once

// The input of the type catalog: one discovery pass over the API server, as plain data. The
// discovery client fills it (from /api, /apis and each group/version's resource list, or from
// aggregated discovery); nothing here talks to the network.

#include <optional>
#include <string>
#include <vector>

#include "libs/core/types.h"

namespace reverser::typeset {

// Where a served type comes from. Followability needs positive evidence of one of the three.
enum class Origin { kUnknown, kBuiltin, kCrd, kAggregated };

absl::string_view OriginName(Origin origin);  // "unknown", "builtin", "crd", "aggregated"

// One entry of an APIResourceList: a top-level resource ("deployments") or a subresource
// ("deployments/status").
struct ServedResource {
  std::string name;
  std::string kind;
  // Unset when discovery did not say (treated as scope-unknown).
  std::optional<core::Scope> scope;
  std::vector<std::string> verbs;
};

// One group/version that discovery listed successfully.
struct ServedGroupVersion {
  std::string group;  // "" for core
  std::string version;
  // Whether this is the group's preferred version (APIGroup.preferredVersion).
  bool preferred = false;
  // Evidence of origin for the whole group/version, when the feeder knows it (APIService with a
  // service: aggregated; CRD list: crd). kUnknown lets the catalog infer built-in groups.
  Origin origin = Origin::kUnknown;
  std::vector<ServedResource> resources;
};

// A group/version whose resource list could not be read (client-go's
// ErrGroupDiscoveryFailed): its types are carried over, never judged absent.
struct FailedGroupVersion {
  std::string group;
  std::string version;
  std::string error;
};

struct DiscoveryScan {
  std::vector<ServedGroupVersion> group_versions;
  std::vector<FailedGroupVersion> failed;
  // True for an error-free discovery, so a group/version missing from both lists is really
  // gone. An incomplete scan carries unscanned group/versions forward unjudged.
  bool complete = true;
  // "group/resource" (or "resource" for core) of every CustomResourceDefinition, when known:
  // evidence for Origin::kCrd on groups whose origin the feeder did not set.
  std::vector<std::string> crd_group_resources;
};

}  // namespace reverser::typeset
