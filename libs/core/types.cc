#include "libs/core/types.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace reverser::core {
namespace {

std::string JoinApiVersion(const std::string& group, const std::string& version) {
  return group.empty() ? version : absl::StrCat(group, "/", version);
}

bool IsDnsLabelChar(char c) { return absl::ascii_islower(c) || absl::ascii_isdigit(c) || c == '-'; }

absl::Status ValidateDnsLabel(absl::string_view what, absl::string_view label) {
  if (label.empty()) return absl::InvalidArgumentError(absl::StrCat(what, " must not be empty"));
  if (label.size() > 63) {
    return absl::InvalidArgumentError(absl::StrCat(what, " \"", label, "\" is longer than 63"));
  }
  for (char c : label) {
    if (!IsDnsLabelChar(c)) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " \"", label,
                       "\" must consist of lower case alphanumeric characters or '-'"));
    }
  }
  if (label.front() == '-' || label.back() == '-') {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " \"", label, "\" must start and end with an alphanumeric character"));
  }
  return absl::OkStatus();
}

}  // namespace

std::string GroupVersionKind::ApiVersion() const { return JoinApiVersion(group, version); }

std::string GroupVersionKind::ToString() const {
  return absl::StrCat(ApiVersion(), ", Kind=", kind);
}

std::string GroupVersionResource::ApiVersion() const { return JoinApiVersion(group, version); }

std::string GroupVersionResource::GroupResource() const {
  return group.empty() ? resource : absl::StrCat(group, "/", resource);
}

std::string GroupVersionResource::ToString() const {
  return absl::StrCat(ApiVersion(), "/", resource);
}

absl::StatusOr<std::pair<std::string, std::string>> ParseApiVersion(absl::string_view api_version) {
  std::vector<absl::string_view> parts = absl::StrSplit(api_version, '/');
  if (parts.size() == 1 && !parts[0].empty()) return std::pair{std::string(), std::string(parts[0])};
  if (parts.size() == 2 && !parts[0].empty() && !parts[1].empty()) {
    return std::pair{std::string(parts[0]), std::string(parts[1])};
  }
  return absl::InvalidArgumentError(absl::StrCat("malformed apiVersion \"", api_version, "\""));
}

absl::string_view ScopeName(Scope scope) {
  return scope == Scope::kCluster ? "Cluster" : "Namespaced";
}

std::string WatchScope::KeySegment() const {
  return IsCluster() ? std::string("cluster") : absl::StrCat("ns:", namespace_);
}

absl::StatusOr<WatchScope> WatchScope::ParseKeySegment(absl::string_view segment) {
  if (segment == "cluster") return Cluster();
  if (absl::ConsumePrefix(&segment, "ns:")) {
    if (auto status = ValidateNamespaceName(segment); !status.ok()) return status;
    return Namespace(std::string(segment));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("scope segment \"", segment, "\" is neither \"cluster\" nor \"ns:<namespace>\""));
}

std::string ResourceRef::ToString() const {
  return namespace_.empty() ? absl::StrCat(gvr.ToString(), " ", name)
                            : absl::StrCat(gvr.ToString(), " ", namespace_, "/", name);
}

absl::Status ValidateObjectName(absl::string_view name) {
  if (name.empty()) return absl::InvalidArgumentError("name must not be empty");
  if (name.size() > 253) {
    return absl::InvalidArgumentError(absl::StrCat("name is longer than 253 characters"));
  }
  for (absl::string_view label : absl::StrSplit(name, '.')) {
    if (auto status = ValidateDnsLabel("name segment", label); !status.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("invalid name \"", name, "\": ", status.message()));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateNamespaceName(absl::string_view ns) { return ValidateDnsLabel("namespace", ns); }

}  // namespace reverser::core
