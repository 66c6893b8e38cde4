#include "libs/sops/age_key_secret.h"

#include <algorithm>
#include <set>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/civil_time.h"
#include "libs/sops/secret_file.h"

namespace reverser::sops {
namespace {

const nlohmann::json* DataOf(const nlohmann::json& secret) {
  if (!secret.is_object()) return nullptr;
  auto it = secret.find("data");
  return it != secret.end() && it->is_object() ? &*it : nullptr;
}

bool IsAgeKeyEntry(const std::string& key) { return absl::EndsWith(key, kAgeKeyEntrySuffix); }

void Wipe(std::string& text) { std::fill(text.begin(), text.end(), '\0'); }

}  // namespace

std::string AgeKeyEntryName(absl::Time now) {
  const absl::CivilDay day = absl::ToCivilDay(now, absl::UTCTimeZone());
  return absl::StrFormat("%04d%02d%d%s", day.year(), day.month(), day.day(), kAgeKeyEntrySuffix);
}

bool HasAgeKeyEntry(const nlohmann::json& secret) {
  const nlohmann::json* data = DataOf(secret);
  if (data == nullptr) return false;
  for (auto it = data->begin(); it != data->end(); ++it) {
    if (IsAgeKeyEntry(it.key())) return true;
  }
  return false;
}

absl::StatusOr<std::vector<std::string>> RecipientsFromAgeKeySecret(const nlohmann::json& secret) {
  std::set<std::string> recipients;
  const nlohmann::json* data = DataOf(secret);
  if (data == nullptr) return std::vector<std::string>();
  for (auto it = data->begin(); it != data->end(); ++it) {
    if (!IsAgeKeyEntry(it.key())) continue;
    std::string content;
    if (!it->is_string() || !absl::Base64Unescape(it->get<std::string>(), &content)) {
      return absl::InvalidArgumentError(
          absl::StrCat("data[", it.key(), "] is not base64-encoded text"));
    }
    auto recipient = RecipientFromAgeKey(content);
    Wipe(content);
    if (!recipient.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("data[", it.key(), "]: ", recipient.status().message()));
    }
    recipients.insert(*recipient);
  }
  return std::vector<std::string>(recipients.begin(), recipients.end());
}

nlohmann::json NewAgeKeySecret(absl::string_view namespace_, absl::string_view name) {
  return {{"apiVersion", "v1"},
          {"kind", "Secret"},
          {"metadata", {{"name", std::string(name)}, {"namespace", std::string(namespace_)}}},
          {"type", "Opaque"}};
}

void AddGeneratedAgeKey(nlohmann::json& secret, absl::string_view entry,
                        const age::X25519Identity& identity) {
  std::string text = identity.String();
  if (!secret["data"].is_object()) secret["data"] = nlohmann::json::object();
  secret["data"][std::string(entry)] = absl::Base64Escape(text);
  Wipe(text);
  nlohmann::json& annotations = secret["metadata"]["annotations"];
  if (!annotations.is_object()) annotations = nlohmann::json::object();
  annotations[kAgeRecipientAnnotation] = identity.Recipient().String();
  annotations[kBackupWarningAnnotation] = kBackupWarningValue;
}

bool BackupWarningPresent(const nlohmann::json& secret) {
  if (!secret.is_object()) return false;
  auto metadata = secret.find("metadata");
  if (metadata == secret.end() || !metadata->is_object()) return false;
  auto annotations = metadata->find("annotations");
  if (annotations == metadata->end() || !annotations->is_object()) return false;
  auto warning = annotations->find(kBackupWarningAnnotation);
  return warning != annotations->end() && warning->is_string() &&
         warning->get<std::string>() == kBackupWarningValue;
}

void WipeSecretValues(nlohmann::json& secret) {
  if (!secret.is_object()) return;
  for (const char* field : {"data", "stringData"}) {
    auto values = secret.find(field);
    if (values == secret.end() || !values->is_object()) continue;
    for (auto it = values->begin(); it != values->end(); ++it) {
      if (it->is_string()) Wipe(it->get_ref<std::string&>());
    }
  }
}

}  // namespace reverser::sops
