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
// Aggregated discovery: GET /api (core only) or GET /apis (named groups).
Json AggregatedDiscovery(const TypeRegistry& registry, bool core, Profile profile);

// The Accept header asks for apidiscovery.k8s.io/v2 APIGroupDiscoveryList.
bool AcceptsAggregatedV2(const std::string& accept);
inline constexpr char kAggregatedContentType[] =
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

// Minimal OpenAPI v3 document for a group/version (paths carry the fieldValidation parameter and
// x-kubernetes-group-version-kind so kubectl uses server-side field validation).
Json MinimalOpenApiV3(const TypeRegistry& registry, const std::string& group,
                      const std::string& version);

// Uppercase hex SHA-512, as kube-apiserver uses for discovery ETags and OpenAPI hashes.
std::string Sha512Hex(const std::string& data);

}  // namespace reverser::kubesim
