#pragma once

// The names of the units each scaled-out service shares out among its replicas (rendezvous
// over the live members, rendezvous.h). Every replica that routes to or owns a unit must name it
// the same way, so the names are made here and nowhere else.
//
// The kinds are prefixed so one Redis fence namespace (ownership_store.h) holds them all.

#include <string>

#include "absl/strings/string_view.h"

namespace reverser::membership {

// A gitworker's unit: one branch of one GitProvider, `branch:<ns>/<provider>/<branch>`.
std::string BranchUnit(absl::string_view provider_namespace, absl::string_view provider,
                       absl::string_view branch);

// A splicer's unit: one GitTarget, `target:<ns>/<name>`.
std::string TargetUnit(absl::string_view target_namespace, absl::string_view target_name);

// A materializer's unit: one (type, scope) materialization, `mat:{<group/resource>:<scope>}`
// with the materialization keys' own segments (scope `cluster` or `ns:<namespace>`,
// libs/redisstore/keys.h), so the unit's ownership keys carry the materialization's Redis
// Cluster hash tag and share its slot.
std::string MaterializationUnit(absl::string_view group_resource, absl::string_view scope);

}  // namespace reverser::membership
