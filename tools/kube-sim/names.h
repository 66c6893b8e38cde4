#pragma once

// Object name validation with kube-apiserver's exact messages (apimachinery validation).

#include <string>
#include <vector>

#include "tools/kube-sim/api_error.h"

namespace reverser::kubesim {

// DNS-1123 subdomain (most kinds). Empty result: valid.
std::vector<std::string> ValidateSubdomain(const std::string& value);
// DNS-1123 label (namespaces, services).
std::vector<std::string> ValidateLabel(const std::string& value);
// Path-segment names (RBAC roles and bindings allow ':' etc.; only '/', '%', '.' and '..' fail).
std::vector<std::string> ValidatePathSegment(const std::string& value);

}  // namespace reverser::kubesim
