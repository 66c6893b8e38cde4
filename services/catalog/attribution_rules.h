#pragma once

// The rules of the attribution ValidatingWebhookConfiguration (catalog
// --attribution_webhook_configuration): which writes the API server offers the materializer's
// admission webhook, which records who made them (attribution from admission, for clusters
// whose audit webhook cannot be configured). Pure: the followed types in, the rules JSON out.
//
// The catalog owns only `rules` of every webhook in that configuration; everything else
// (clientConfig, caBundle, failurePolicy, timeoutSeconds, sideEffects, ...) is the chart's and
// is kept as read.

#include <compare>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "absl/status/statusor.h"
#include "proto/reverser/v1/catalog.pb.h"

namespace reverser::catalog {

// A followed type by API group ("" for core) and plural resource name.
struct GroupResource {
  std::string group;
  std::string resource;
  auto operator<=>(const GroupResource&) const = default;
};

// The distinct types of a claim set (what the materializer is asked to materialize).
std::set<GroupResource> FollowedResources(const reverser::v1::ClaimSet& claims);

// One rule per API group of `followed`, in group order: apiGroups [group], apiVersions ["*"],
// operations CREATE, UPDATE, DELETE, resources each plural and its "/scale" (sorted), scope
// "*"; then, always, core namespaces with DELETE only (who deleted a namespace is the author of
// its cascade). Deterministic: equal sets give byte-equal rules.
nlohmann::json AttributionRules(const std::set<GroupResource>& followed);

// Whether some webhook of `configuration` (a ValidatingWebhookConfiguration as served) has
// rules other than `rules`. A configuration without webhooks has nothing to differ.
bool RulesDiffer(const nlohmann::json& configuration, const nlohmann::json& rules);

// `configuration` with the rules of every webhook replaced by `rules`, all else as it was.
// InvalidArgument when `webhooks` is present but not a list of objects (never throws).
absl::StatusOr<nlohmann::json> WithRules(nlohmann::json configuration, const nlohmann::json& rules);

}  // namespace reverser::catalog
