#include "libs/membership/units.h"

#include "absl/strings/str_cat.h"

namespace reverser::membership {

std::string BranchUnit(absl::string_view provider_namespace, absl::string_view provider,
                       absl::string_view branch) {
  return absl::StrCat("branch:", provider_namespace, "/", provider, "/", branch);
}

std::string TargetUnit(absl::string_view target_namespace, absl::string_view target_name) {
  return absl::StrCat("target:", target_namespace, "/", target_name);
}

std::string MaterializationUnit(absl::string_view group_resource, absl::string_view scope) {
  return absl::StrCat("mat:{", group_resource, ":", scope, "}");
}

}  // namespace reverser::membership
