#pragma once

// YAML → JSON for request bodies (application/yaml, apply-patch+yaml) and config files.

#include <string>

#include "nlohmann/json.hpp"
#include "tools/kube-sim/api_error.h"

namespace reverser::kubesim {

// Parses a JSON or YAML document (JSON is tried first). Plain scalars become numbers/bools/null
// as YAML 1.2's core schema says; quoted scalars stay strings.
ApiOr<Json> ParseYamlOrJson(const std::string& text);

}  // namespace reverser::kubesim
