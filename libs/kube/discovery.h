#pragma once

// API discovery: which resources the server serves, in which versions, with which verbs.
//
// Tries aggregated discovery (apidiscovery.k8s.io/v2, one request each for /api and /apis) and
// falls back to the legacy documents (/api, /api/v1, /apis, /apis/<g>/<v>) when the response
// Content-Type says the server answered with the legacy shape. A group/version that fails
// (503 from a dead aggregated API, "Stale" freshness, a malformed document) is reported in
// `failures` and left out; the rest of the result stays usable.

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "libs/core/types.h"
#include "libs/kube/rest_client.h"

namespace reverser::kube {

struct ApiSubresource {
  std::string name;            // "status", "scale"
  core::GroupVersionKind gvk;  // the response kind (Scale is autoscaling/v1)
  std::vector<std::string> verbs;
};

struct ApiResource {
  core::GroupVersionResource gvr;
  core::GroupVersionKind gvk;
  core::Scope scope = core::Scope::kNamespaced;
  std::string singular;
  std::vector<std::string> verbs;
  std::vector<std::string> short_names;
  std::vector<std::string> categories;
  std::vector<ApiSubresource> subresources;
  bool preferred_version = false;  // gvr.version is the group's preferred version

  bool HasVerb(absl::string_view verb) const;
  // What a mirror can follow: list and watch.
  bool IsWatchable() const { return HasVerb("list") && HasVerb("watch"); }
};

struct GroupVersionFailure {
  std::string group_version;  // "metrics.k8s.io/v1beta1"; "" when all of /apis failed
  absl::Status status;
};

struct DiscoveryResult {
  std::vector<ApiResource> resources;
  std::vector<GroupVersionFailure> failures;
  bool aggregated = false;  // both /api and /apis answered in the aggregated format

  // The resource with that group and plural in the group's preferred version, if served.
  const ApiResource* FindPreferred(absl::string_view group, absl::string_view resource) const;
  const ApiResource* Find(const core::GroupVersionResource& gvr) const;
};

// The Accept header kubectl 1.32/1.33 sends for aggregated discovery.
inline constexpr char kAggregatedDiscoveryAccept[] =
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,"
    "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,"
    "application/json";

// Runs discovery. Fails only if neither /api nor /apis could be read at all.
absl::StatusOr<DiscoveryResult> Discover(RestClient& client);

// Parsers (exposed for tests and for callers holding cached documents).
// An APIGroupDiscoveryList (v2 or v2beta1): appends resources and per-version failures.
absl::Status ParseAggregatedDiscovery(const nlohmann::json& list, DiscoveryResult& into);
// An APIResourceList for `group_version` ("v1", "apps/v1").
absl::Status ParseApiResourceList(const nlohmann::json& list, absl::string_view group_version,
                                  bool preferred, DiscoveryResult& into);

}  // namespace reverser::kube
