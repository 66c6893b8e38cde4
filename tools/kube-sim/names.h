#pragma once

// Object name validation with kube-apiserver's exact messages (apimachinery validation).

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "tools/kube-sim/api_error.h"

namespace reverser::kubesim {

// Whole-string matches of apimachinery's patterns, scanned in linear time (names arrive from the
// network and can be megabytes long; libstdc++'s regex recurses once per character):
//   label      `[a-z0-9]([-a-z0-9]*[a-z0-9])?`
//   subdomain  `[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*`
//   DNS-1035   `[a-z]([-a-z0-9]*[a-z0-9])?`
// Lengths are checked by the Validate functions, not here.
bool IsDns1123Label(absl::string_view value);
bool IsDns1123Subdomain(absl::string_view value);
bool IsDns1035Label(absl::string_view value);

// DNS-1123 subdomain (most kinds). Empty result: valid.
std::vector<std::string> ValidateSubdomain(const std::string& value);
// DNS-1123 label (namespaces, services).
std::vector<std::string> ValidateLabel(const std::string& value);
// Path-segment names (RBAC roles and bindings allow ':' etc.; only '/', '%', '.' and '..' fail).
std::vector<std::string> ValidatePathSegment(const std::string& value);

}  // namespace reverser::kubesim
