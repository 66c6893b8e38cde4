#include "services/catalog/catalog_metrics.h"

namespace reverser::catalog {

void CatalogMetrics::Refreshed(absl::string_view outcome) {
  registry_
      ->GetCounter("gitopsreverser_api_catalog_refresh_total",
                   "Discovery passes, by outcome: changed, unchanged, error.",
                   {{"outcome", std::string(outcome)}})
      .Increment();
}

void CatalogMetrics::CatalogCounts(const typeset::CatalogSnapshot& catalog,
                                   const typeset::WatchPolicy& policy) {
  size_t allowed = 0;
  size_t excluded = 0;
  for (const typeset::CatalogEntry& entry : catalog.entries) {
    if (entry.subresource_only) continue;
    ++(policy.Excluded(entry.gvr.group, entry.gvr.resource) ? excluded : allowed);
  }
  auto resources = [&](const char* state, size_t count) {
    registry_
        ->GetGauge("gitopsreverser_api_catalog_resources",
                   "Served top-level resources in the API resource catalog, by the default watch "
                   "policy's verdict: allowed, excluded.",
                   {{"state", state}})
        .Set(static_cast<double>(count));
  };
  resources("allowed", allowed);
  resources("excluded", excluded);
  auto group_versions = [&](const char* state, size_t count) {
    registry_
        ->GetGauge("gitopsreverser_api_catalog_group_versions",
                   "Group/versions in the API resource catalog: trusted (discovered cleanly), "
                   "degraded (discovery reported them failed).",
                   {{"state", state}})
        .Set(static_cast<double>(count));
  };
  group_versions("trusted", catalog.scanned.size());
  group_versions("degraded", catalog.degraded.size());
}

void CatalogMetrics::WatchedTypes(const reverser::v1::TableUpdate& update) {
  auto set = [&](const std::string& ns, const std::string& name, size_t types) {
    registry_
        ->GetGauge("gitopsreverser_watched_types",
                   "Types a GitTarget watches (its watched-type table).",
                   {{"gittarget_namespace", ns}, {"gittarget_name", name}})
        .Set(static_cast<double>(types));
  };
  std::set<std::pair<std::string, std::string>> listed;
  for (const auto& table : update.upserted()) {
    listed.emplace(table.target().namespace_(), table.target().name());
    set(table.target().namespace_(), table.target().name(), table.types_size());
  }
  for (const auto& target : update.removed()) {
    set(target.namespace_(), target.name(), 0);
    watched_targets_.erase({target.namespace_(), target.name()});
  }
  if (update.full()) {
    for (const auto& [ns, name] : watched_targets_) {
      if (!listed.count({ns, name})) set(ns, name, 0);
    }
    watched_targets_ = std::move(listed);
  } else {
    watched_targets_.insert(listed.begin(), listed.end());
  }
}

void CatalogMetrics::ClaimedTypes(size_t types) {
  registry_->GetGauge("reverser_catalog_claimed_types", "Distinct types claimed by some GitTarget.")
      .Set(static_cast<double>(types));
}

void CatalogMetrics::AttributionWebhookSynced(absl::string_view outcome) {
  registry_
      ->GetCounter("reverser_catalog_attribution_webhook_syncs_total",
                   "Syncs of the attribution webhook configuration's rules with the followed "
                   "types, by outcome: written, unchanged, missing, forbidden, conflict, invalid, "
                   "error.",
                   {{"outcome", std::string(outcome)}})
      .Increment();
}

}  // namespace reverser::catalog
