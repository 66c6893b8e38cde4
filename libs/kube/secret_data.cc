#include "libs/kube/secret_data.h"

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace reverser::kube {

absl::StatusOr<std::map<std::string, std::string>> DecodeSecretData(const nlohmann::json& secret) {
  std::map<std::string, std::string> out;
  if (!secret.is_object()) return absl::InvalidArgumentError("the Secret is not an object");
  auto data = secret.find("data");
  if (data == secret.end() || data->is_null()) return out;
  if (!data->is_object()) return absl::InvalidArgumentError("the Secret's data is not a map");
  for (const auto& [key, value] : data->items()) {
    std::string decoded;
    if (!value.is_string() || !absl::Base64Unescape(value.get<std::string>(), &decoded)) {
      return absl::InvalidArgumentError(absl::StrCat("data.", key, " is not base64"));
    }
    out.emplace(key, std::move(decoded));
  }
  return out;
}

nlohmann::json EncodeSecretData(const std::map<std::string, std::string>& data) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [key, value] : data) out[key] = absl::Base64Escape(value);
  return out;
}

}  // namespace reverser::kube
