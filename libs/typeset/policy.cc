#include "libs/typeset/policy.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace reverser::typeset {
namespace {

std::string Key(absl::string_view group, absl::string_view resource) {
  return group.empty() ? std::string(resource) : absl::StrCat(group, "/", resource);
}

}  // namespace

WatchPolicy WatchPolicy::Default() {
  return WatchPolicy({
      "pods",
      "events",
      "events.k8s.io/events",
      "endpoints",
      "discovery.k8s.io/endpointslices",
      "coordination.k8s.io/leases",
      "apps/controllerrevisions",
      "flowcontrol.apiserver.k8s.io/flowschemas",
      "flowcontrol.apiserver.k8s.io/prioritylevelconfigurations",
      "batch/jobs",
      "batch/cronjobs",
  });
}

bool WatchPolicy::Excluded(absl::string_view group, absl::string_view resource) const {
  return excluded_.count(Key(group, resource)) > 0;
}

absl::StatusOr<SensitivePolicy> SensitivePolicy::Create(
    const std::vector<std::string>& additional) {
  SensitivePolicy policy;
  for (const std::string& raw : additional) {
    std::string entry(absl::StripAsciiWhitespace(raw));
    std::vector<std::string> parts = absl::StrSplit(entry, '/');
    bool ok =
        !entry.empty() && parts.size() <= 2 &&
        std::none_of(parts.begin(), parts.end(), [](const std::string& p) { return p.empty(); });
    if (!ok) {
      return absl::InvalidArgumentError(absl::StrCat(
          "invalid sensitive resource \"", raw, "\": want \"resource\" or \"group/resource\""));
    }
    policy.additional_.insert(absl::AsciiStrToLower(entry));
  }
  return policy;
}

bool SensitivePolicy::IsSensitive(absl::string_view group, absl::string_view resource) const {
  if (group.empty() && resource == "secrets") return true;
  return additional_.count(Key(group, resource)) > 0;
}

}  // namespace reverser::typeset
