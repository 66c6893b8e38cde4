#pragma once

// A settled registry over a small, varied cluster, and terse rule builders, for rules tests.

#include <memory>
#include <string>
#include <vector>

#include "libs/core/clock.h"
#include "libs/rules/rule.h"
#include "libs/rules/table_store.h"
#include "libs/typeset/catalog.h"
#include "libs/typeset/registry.h"
#include "libs/typeset/scan_builder.h"
#include "nlohmann/json.hpp"

namespace reverser::rules::testing {

using typeset::testing::Res;
using typeset::testing::ScanBuilder;

inline typeset::DiscoveryScan ClusterScan(bool with_widgets = true) {
  ScanBuilder b;
  b.Core({Res("configmaps", "ConfigMap"), Res("secrets", "Secret"), Res("services", "Service"),
          Res("pods", "Pod"), Res("namespaces", "Namespace", core::Scope::kCluster)})
      .Group("apps", "v1",
             {Res("deployments", "Deployment"), Res("controllerrevisions", "ControllerRevision")})
      .Group("autoscaling", "v2", {Res("horizontalpodautoscalers", "HorizontalPodAutoscaler")})
      .Group("autoscaling", "v1", {Res("horizontalpodautoscalers", "HorizontalPodAutoscaler")},
             /*preferred=*/false)
      .Group("rbac.authorization.k8s.io", "v1",
             {Res("clusterroles", "ClusterRole", core::Scope::kCluster), Res("roles", "Role")})
      .Group("a.example.com", "v1", {Res("gadgets", "Gadget")})
      .Group("b.example.com", "v1", {Res("gadgets", "Gadget")})
      .Group("readonly.example.com", "v1",
             {Res("readonlys", "ReadOnly", core::Scope::kNamespaced, {"get", "list"})})
      .Crd("a.example.com/gadgets")
      .Crd("b.example.com/gadgets")
      .Crd("readonly.example.com/readonlys");
  if (with_widgets) {
    b.Group("example.com", "v1", {Res("widgets", "Widget")})
        .Group("example.com", "v1beta1", {Res("widgets", "Widget")}, /*preferred=*/false)
        .Crd("example.com/widgets");
  } else {
    b.Group("example.com", "v1", {}).Group("example.com", "v1beta1", {}, false);
  }
  return b.Build();
}

// Registry + catalog + fake clock, settled over ClusterScan().
class TestRegistry {
 public:
  TestRegistry() : registry_(clock_) { Scan(ClusterScan()); }

  void Scan(const typeset::DiscoveryScan& scan, bool settle = true) {
    registry_.UpdateFromScan(catalog_.Update(scan));
    if (settle) Advance(typeset::Registry::kSettleWindow);
  }
  void Advance(absl::Duration d) {
    clock_.Advance(d);
    registry_.Tick();
  }
  const typeset::Registry& registry() const { return registry_; }
  std::vector<typeset::TypeRecord> Records() const { return registry_.All(); }

 private:
  core::FakeClock clock_;
  typeset::ApiResourceCatalog catalog_;
  typeset::Registry registry_;
};

// {"resources": [...], ...extra}
inline nlohmann::json RuleJson(std::vector<std::string> resources,
                               nlohmann::json extra = nlohmann::json::object()) {
  nlohmann::json rule = extra;
  rule["resources"] = resources;
  return rule;
}

inline nlohmann::json WatchRuleJson(const std::string& ns, const std::string& name,
                                    const std::string& target, std::vector<nlohmann::json> rules) {
  return {
      {"apiVersion", "configbutler.ai/v1alpha3"},
      {"kind", "WatchRule"},
      {"metadata", {{"namespace", ns}, {"name", name}, {"uid", name + "-uid"}, {"generation", 1}}},
      {"spec", {{"targetRef", {{"name", target}}}, {"rules", rules}}}};
}

inline nlohmann::json ClusterWatchRuleJson(const std::string& name, const std::string& target_ns,
                                           const std::string& target,
                                           std::vector<nlohmann::json> rules) {
  return {
      {"apiVersion", "configbutler.ai/v1alpha3"},
      {"kind", "ClusterWatchRule"},
      {"metadata", {{"name", name}, {"generation", 1}}},
      {"spec", {{"targetRef", {{"name", target}, {"namespace", target_ns}}}, {"rules", rules}}}};
}

inline WatchRuleObject Must(absl::StatusOr<WatchRuleObject> parsed) {
  if (!parsed.ok()) {
    ADD_FAILURE() << parsed.status();
    return {};
  }
  return *parsed;
}

inline GitTargetInfo Target(const std::string& ns, const std::string& name) {
  return {{ns, name}, name + "-uid", {ns, "provider", "main", name}};
}

}  // namespace reverser::rules::testing
