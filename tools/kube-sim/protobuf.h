#pragma once

// Decoding of Kubernetes protobuf request bodies (application/vnd.kubernetes.protobuf) for the
// kinds kubectl's generator commands send that way (`kubectl create configmap|secret|namespace|
// serviceaccount|deployment`): the "k8s\0" envelope, runtime.Unknown, and those kinds' generated
// messages.

#include <string>

#include "nlohmann/json.hpp"
#include "tools/kube-sim/api_error.h"

namespace reverser::kubesim {

inline constexpr char kProtobufContentType[] = "application/vnd.kubernetes.protobuf";

// Returns the object as JSON (with apiVersion and kind), or 415 for kinds without a schema here
// and 400 for malformed bytes.
ApiOr<Json> DecodeKubernetesProtobuf(const std::string& body);

}  // namespace reverser::kubesim
