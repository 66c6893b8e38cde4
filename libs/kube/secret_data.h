#pragma once

// A Secret's `data` as bytes: the API carries each value base64-encoded.

#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "absl/status/statusor.h"

namespace reverser::kube {

// The decoded `data` of a Secret object (an absent `data` is empty). InvalidArgument naming the
// key for a value that is not a base64 string.
absl::StatusOr<std::map<std::string, std::string>> DecodeSecretData(const nlohmann::json& secret);

// `data` for a Secret object: every value base64-encoded.
nlohmann::json EncodeSecretData(const std::map<std::string, std::string>& data);

}  // namespace reverser::kube
