#pragma once

// A terse way to write discovery scans in tests:
//   ScanBuilder().Core({Res("configmaps", "ConfigMap")}).Group("apps", "v1", {...}).Build()

#include <string>
#include <vector>

#include "libs/typeset/scan.h"

namespace reverser::typeset::testing {

inline const std::vector<std::string>& AllVerbs() {
  static const auto* verbs = new std::vector<std::string>{
      "create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"};
  return *verbs;
}

inline ServedResource Res(std::string name, std::string kind,
                          core::Scope scope = core::Scope::kNamespaced,
                          std::vector<std::string> verbs = AllVerbs()) {
  return {std::move(name), std::move(kind), scope, std::move(verbs)};
}

inline ServedResource Sub(std::string name, std::string kind) {
  return {std::move(name), std::move(kind), core::Scope::kNamespaced, {"get", "patch", "update"}};
}

class ScanBuilder {
 public:
  ScanBuilder& Core(std::vector<ServedResource> resources) {
    return Group("", "v1", std::move(resources));
  }
  ScanBuilder& Group(std::string group, std::string version, std::vector<ServedResource> resources,
                     bool preferred = true, Origin origin = Origin::kUnknown) {
    scan_.group_versions.push_back(
        {std::move(group), std::move(version), preferred, origin, std::move(resources)});
    return *this;
  }
  ScanBuilder& Failed(std::string group, std::string version, std::string error = "timeout") {
    scan_.failed.push_back({std::move(group), std::move(version), std::move(error)});
    return *this;
  }
  ScanBuilder& Crd(std::string group_resource) {
    scan_.crd_group_resources.push_back(std::move(group_resource));
    return *this;
  }
  ScanBuilder& Incomplete() {
    scan_.complete = false;
    return *this;
  }
  DiscoveryScan Build() const { return scan_; }

 private:
  DiscoveryScan scan_;
};

}  // namespace reverser::typeset::testing
