#pragma once

// The catalog's discovery and watched-type metrics, with gitops-reverser v0.36.0's names and
// labels where it has them (docs/behaviour.md, Metrics), each declared once here.

#include <cstdint>
#include <set>
#include <string>
#include <utility>

#include "absl/strings/string_view.h"
#include "libs/runtime/metrics.h"
#include "libs/typeset/catalog.h"
#include "libs/typeset/policy.h"
#include "proto/reverser/v1/catalog.pb.h"

namespace reverser::catalog {

class CatalogMetrics {
 public:
  explicit CatalogMetrics(runtime::MetricsRegistry* registry) : registry_(registry) {}

  // One discovery pass: gitopsreverser_api_catalog_refresh_total{outcome} (`error` when it
  // failed, else `changed` when it moved the catalog generation, else `unchanged`).
  void Refreshed(absl::string_view outcome);
  // After a successful pass: gitopsreverser_api_catalog_resources{state} (served top-level
  // resources the default watch policy allows or excludes; subresources are not counted) and
  // gitopsreverser_api_catalog_group_versions{state} (trusted: discovered cleanly; degraded:
  // discovery reported them failed).
  void CatalogCounts(const typeset::CatalogSnapshot& catalog, const typeset::WatchPolicy& policy);
  // gitopsreverser_watched_types{gittarget_namespace,gittarget_name} after a table update: the
  // types in each upserted table; 0 for a removed one (or one a full update no longer lists), so
  // its series does not linger. Not thread-safe (the catalog actor calls it).
  void WatchedTypes(const reverser::v1::TableUpdate& update);
  // reverser_catalog_claimed_types: distinct types claimed by some GitTarget.
  void ClaimedTypes(size_t types);
  // reverser_catalog_attribution_webhook_syncs_total{outcome}: syncs of the attribution
  // webhook's rules (attribution_webhook.h): written, unchanged, missing (404), forbidden (403),
  // conflict (409 after the retries), invalid (a malformed configuration), error. Thread-safe
  // (the sync's worker calls it).
  void AttributionWebhookSynced(absl::string_view outcome);

 private:
  runtime::MetricsRegistry* registry_;
  // (namespace, name) of the GitTargets with a watched_types series.
  std::set<std::pair<std::string, std::string>> watched_targets_;
};

}  // namespace reverser::catalog
