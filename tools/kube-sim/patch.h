#pragma once

// The four PATCH flavours kube-apiserver accepts.

#include <string>

#include "nlohmann/json.hpp"
#include "tools/kube-sim/api_error.h"

namespace reverser::kubesim {

// RFC 7386 JSON merge patch (application/merge-patch+json).
Json ApplyMergePatch(const Json& target, const Json& patch);

// RFC 6902 JSON patch (application/json-patch+json). Errors are 422/400 like the apiserver's.
ApiOr<Json> ApplyJsonPatch(const Json& target, const Json& operations);

// Strategic merge patch (application/strategic-merge-patch+json) for built-in kinds: lists with
// a known merge key (containers/env/volumes by name, ports by containerPort/port, ...) merge
// per element; `$patch: delete|replace`, `$retainKeys`, `$setElementOrder/…` and
// `$deleteFromPrimitiveList/…` directives are honoured. Other lists are replaced.
ApiOr<Json> ApplyStrategicMergePatch(const Json& target, const Json& patch);

// The merge key kube uses for a list field, or "" when the list is atomic/replaced.
// `sample` is one element of the list (ports differ between containers and services).
std::string MergeKeyFor(const std::string& field, const Json& sample);

}  // namespace reverser::kubesim
