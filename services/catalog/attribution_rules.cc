#include "services/catalog/attribution_rules.h"

#include <map>
#include <vector>

#include "absl/status/status.h"

namespace reverser::catalog {

std::set<GroupResource> FollowedResources(const reverser::v1::ClaimSet& claims) {
  std::set<GroupResource> followed;
  for (const auto& claim : claims.claims()) {
    const auto& gvr = claim.type().gvr();
    if (gvr.resource().empty()) continue;
    followed.insert({gvr.group(), gvr.resource()});
  }
  return followed;
}

nlohmann::json AttributionRules(const std::set<GroupResource>& followed) {
  std::map<std::string, std::vector<std::string>> by_group;  // resources sorted: set order
  for (const GroupResource& type : followed) {
    std::vector<std::string>& resources = by_group[type.group];
    resources.push_back(type.resource);
    resources.push_back(type.resource + "/scale");
  }
  nlohmann::json rules = nlohmann::json::array();
  for (const auto& [group, resources] : by_group) {
    rules.push_back({{"apiGroups", {group}},
                     {"apiVersions", {"*"}},
                     {"operations", {"CREATE", "UPDATE", "DELETE"}},
                     {"resources", resources},
                     {"scope", "*"}});
  }
  rules.push_back({{"apiGroups", {""}},
                   {"apiVersions", {"*"}},
                   {"operations", {"DELETE"}},
                   {"resources", {"namespaces"}},
                   {"scope", "*"}});
  return rules;
}

bool RulesDiffer(const nlohmann::json& configuration, const nlohmann::json& rules) {
  if (!configuration.is_object()) return false;
  auto webhooks = configuration.find("webhooks");
  if (webhooks == configuration.end() || !webhooks->is_array()) return false;
  for (const nlohmann::json& webhook : *webhooks) {
    if (!webhook.is_object()) return true;  // WithRules refuses it; the write reports why
    auto have = webhook.find("rules");
    if (have == webhook.end() || *have != rules) return true;
  }
  return false;
}

absl::StatusOr<nlohmann::json> WithRules(nlohmann::json configuration,
                                         const nlohmann::json& rules) {
  if (!configuration.is_object()) {
    return absl::InvalidArgumentError("the webhook configuration is not an object");
  }
  auto webhooks = configuration.find("webhooks");
  if (webhooks == configuration.end() || webhooks->is_null()) return configuration;
  if (!webhooks->is_array()) {
    return absl::InvalidArgumentError("the webhook configuration's webhooks is not a list");
  }
  for (nlohmann::json& webhook : *webhooks) {
    if (!webhook.is_object()) {
      return absl::InvalidArgumentError("a webhook of the configuration is not an object");
    }
    webhook["rules"] = rules;
  }
  return configuration;
}

}  // namespace reverser::catalog
