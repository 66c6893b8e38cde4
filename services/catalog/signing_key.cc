#include "services/catalog/signing_key.h"

#include "absl/strings/str_cat.h"
#include "libs/core/status.h"
#include "libs/git/ssh_signing.h"
#include "libs/kube/api_error.h"
#include "libs/kube/secret_data.h"
#include "libs/runtime/log.h"
#include "services/catalog/controllers.h"
#include "services/catalog/objects.h"

namespace reverser::catalog {
namespace {

const core::GroupVersionResource kSecrets{"", "v1", "secrets"};
// Create/update races with another writer of the Secret are retried this often in one probe.
constexpr int kAttempts = 3;

SigningKeyCheck Failed(const char* reason, std::string message) {
  SigningKeyCheck out;
  out.configured = true;
  out.ok = false;
  out.reason = reason;
  out.message = std::move(message);
  return out;
}

// A fresh key in the form the Secret stores it: signing.key and signing.pub.
absl::StatusOr<git::SshSigningKey> AddGeneratedKey(std::map<std::string, std::string>& data) {
  ASSIGN_OR_RETURN(git::SshSigningKey key, git::SshSigningKey::Generate());
  auto passphrase = data.find(git::kSigningPassphraseDataKey);
  if (passphrase != data.end() && !passphrase->second.empty()) {
    ASSIGN_OR_RETURN(data[git::kSigningKeyDataKey],
                     key.EncryptedPkcs8PrivateKey(passphrase->second));
  } else {
    data[git::kSigningKeyDataKey] = key.OpenSshPrivateKey();
  }
  data[git::kSigningPublicKeyDataKey] = absl::StrCat(key.AuthorizedKey(), "\n");
  return key;
}

SigningKeyCheck Generated(const git::SshSigningKey& key, const std::string& provider,
                          const std::string& secret) {
  runtime::LogInfo("generated commit signing key", {{"kind", "GitProvider"},
                                                    {"object", provider},
                                                    {"secret", secret},
                                                    {"public_key", key.AuthorizedKey()}});
  return {true, true, "", "", key.AuthorizedKey(), true};
}

}  // namespace

SigningKeyCheck EnsureSigningKey(kube::RestClient& client, const nlohmann::json& provider) {
  const nlohmann::json& signing = NodeAt(provider, {"spec", "commit", "signing"});
  if (!signing.is_object()) return {};
  const std::string ns = StringAt(provider, {"metadata", "namespace"});
  const std::string name = StringAt(signing, {"secretRef", "name"});
  const std::string secret_name = absl::StrCat(ns, "/", name);
  const std::string provider_name = absl::StrCat(ns, "/", StringAt(provider, {"metadata", "name"}));
  const nlohmann::json& generate_flag = NodeAt(signing, {"generateWhenMissing"});
  const bool generate = generate_flag.is_boolean() && generate_flag.get<bool>();
  if (name.empty()) {
    // CheckCommitConfig reports this first; kept so the check stands on its own.
    return Failed(reason::kCommitConfigInvalid,
                  "spec.commit.signing.secretRef.name must be set when signing is enabled");
  }

  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    auto secret = client.Get(kSecrets, ns, name);
    if (!secret.ok() && !kube::IsApiNotFound(secret.status())) {
      return Failed(reason::kSecretNotFound,
                    absl::StrCat("cannot read signing Secret ", secret_name, ": ",
                                 secret.status().message()));
    }
    if (!secret.ok()) {
      if (!generate) {
        return Failed(reason::kSecretNotFound,
                      absl::StrCat("signing Secret ", secret_name,
                                   " not found and spec.commit.signing.generateWhenMissing is "
                                   "false"));
      }
      std::map<std::string, std::string> data;
      auto key = AddGeneratedKey(data);
      if (!key.ok()) {
        return Failed(reason::kSecretMalformed,
                      absl::StrCat("cannot generate a signing key: ", key.status().message()));
      }
      nlohmann::json object = {{"apiVersion", "v1"},
                               {"kind", "Secret"},
                               {"metadata", {{"name", name}, {"namespace", ns}}},
                               {"type", "Opaque"},
                               {"data", kube::EncodeSecretData(data)}};
      auto created = client.Create(kSecrets, ns, object);
      if (kube::IsApiAlreadyExists(created.status())) continue;  // someone else was faster
      if (!created.ok()) {
        return Failed(reason::kSecretNotFound,
                      absl::StrCat("cannot create signing Secret ", secret_name, ": ",
                                   created.status().message()));
      }
      return Generated(*key, provider_name, secret_name);
    }

    auto data = kube::DecodeSecretData(*secret);
    if (!data.ok()) {
      return Failed(reason::kSecretMalformed,
                    absl::StrCat("signing Secret ", secret_name, ": ", data.status().message()));
    }
    auto stored = data->find(git::kSigningKeyDataKey);
    if (stored == data->end() || stored->second.empty()) {
      if (!generate) {
        return Failed(
            reason::kSecretNotFound,
            absl::StrCat("signing Secret ", secret_name, " has no ", git::kSigningKeyDataKey,
                         " and spec.commit.signing.generateWhenMissing is false"));
      }
      auto key = AddGeneratedKey(*data);
      if (!key.ok()) {
        return Failed(reason::kSecretMalformed,
                      absl::StrCat("cannot generate a signing key: ", key.status().message()));
      }
      nlohmann::json object = *secret;
      object["data"] = kube::EncodeSecretData(*data);
      auto updated = client.Update(kSecrets, ns, object);
      if (kube::IsApiConflict(updated.status())) continue;  // changed meanwhile: look again
      if (!updated.ok()) {
        return Failed(reason::kSecretNotFound,
                      absl::StrCat("cannot update signing Secret ", secret_name, ": ",
                                   updated.status().message()));
      }
      return Generated(*key, provider_name, secret_name);
    }
    auto key = git::SshSigningKey::FromSecretData(*data);
    if (!key.ok()) {
      return Failed(reason::kSecretMalformed,
                    absl::StrCat("signing Secret ", secret_name, " ", git::kSigningKeyDataKey, ": ",
                                 key.status().message()));
    }
    return {true, true, "", "", key->AuthorizedKey(), false};
  }
  return Failed(reason::kSecretNotFound,
                absl::StrCat("signing Secret ", secret_name, " kept changing while being read"));
}

}  // namespace reverser::catalog
