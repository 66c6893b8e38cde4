#pragma once

// Discovery documents (legacy and aggregated apidiscovery.k8s.io/v2) and OpenAPI v3 documents
// built from the type registry.

#include <string>

#include "nlohmann/json.hpp"
#include "tools/kube-sim/resource_types.h"

namespace reverser::kubesim {

enum class Profile {
  kModern,  // >= 1.34: WatchList on, bookmarks without creationTimestamp, metadata {}
  kLegacy,  // 1.27..1.33 with the WatchList gate off
};

// GET /api (legacy APIVersions; note: no apiVersion field, a real quirk).
Json LegacyApiVersions(const std::string& server_address);
// GET /apis
Json LegacyGroupList(const TypeRegistry& registry);
// GET /apis/{group}; null if the group is not served.
Json LegacyGroup(const TypeRegistry& registry, const std::string& group);
// GET /api/v1 or /apis/{g}/{v}; null if not served.
Json LegacyResourceList(const TypeRegistry& registry, const std::string& group,
                        const std::string& version);
// Aggregated discovery: GET /api (core only) or GET /apis (named groups). `version` is "v2" or
// "v2beta1" (same shape, different apiVersion).
Json AggregatedDiscovery(const TypeRegistry& registry, bool core, Profile profile,
                         const std::string& version = "v2");

// The aggregated discovery version to answer an Accept header with: "v2", "v2beta1" (only when
// allowed: servers before 1.35 still serve it) or "" for the legacy documents. The first
// acceptable entry of the header wins, as in content negotiation.
std::string NegotiateAggregatedDiscovery(const std::string& accept, bool allow_v2beta1);
std::string AggregatedContentType(const std::string& version);

// Minimal OpenAPI v3 document for a group/version (paths carry the fieldValidation parameter and
// x-kubernetes-group-version-kind so kubectl uses server-side field validation).
Json MinimalOpenApiV3(const TypeRegistry& registry, const std::string& group,
                      const std::string& version);

// Uppercase hex SHA-512, as kube-apiserver uses for discovery ETags and OpenAPI hashes.
std::string Sha512Hex(const std::string& data);

}  // namespace reverser::kubesim
