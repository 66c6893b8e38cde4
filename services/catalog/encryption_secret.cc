#include "services/catalog/encryption_secret.h"

#include <optional>

#include "absl/strings/str_cat.h"
#include "libs/kube/api_error.h"
#include "libs/runtime/log.h"
#include "libs/sops/age.h"
#include "libs/sops/age_key_secret.h"

namespace reverser::catalog {
namespace {

const core::GroupVersionResource kSecrets{"", "v1", "secrets"};

// Wipes the held Secret's values when it goes out of scope, on every path.
class HeldSecret {
 public:
  ~HeldSecret() {
    if (secret_) sops::WipeSecretValues(*secret_);
  }
  void Hold(nlohmann::json secret) {
    if (secret_) sops::WipeSecretValues(*secret_);
    secret_ = std::move(secret);
  }
  bool held() const { return secret_.has_value(); }
  nlohmann::json& get() { return *secret_; }

 private:
  std::optional<nlohmann::json> secret_;
};

}  // namespace

EncryptionSecretOutcome ReadEncryptionSecret(kube::RestClient& client,
                                             const EncryptionSecretRequest& request,
                                             const core::Clock& clock,
                                             sops::crypto::Random& random) {
  EncryptionSecretOutcome out;
  EncryptionSecretResult& result = out.result;
  result.uid = request.uid;
  result.spec = request.spec;
  result.at = clock.Now();
  const std::string& ns = request.secret.namespace_;
  const std::string& name = request.secret.name;
  const std::string where = absl::StrCat(ns, "/", name);
  auto fail = [&](const char* reason, std::string message) {
    result.ok = false;
    result.reason = reason;
    result.message = std::move(message);
    return out;
  };
  // Adds a generated key under today's entry name.
  struct Generated {
    std::string entry;
    std::string recipient;
  };
  auto add_generated_key = [&](nlohmann::json& into) -> absl::StatusOr<Generated> {
    auto identity = sops::age::X25519Identity::Generate(random);
    if (!identity.ok()) {
      return absl::InternalError(
          absl::StrCat("failed to generate age identity for encryption secret ", where, ": ",
                       identity.status().message()));
    }
    Generated generated{sops::AgeKeyEntryName(clock.Now()), identity->Recipient().String()};
    sops::AddGeneratedAgeKey(into, generated.entry, *identity);
    return generated;
  };
  auto log_generated = [&](absl::string_view what, const Generated& generated) {
    runtime::LogWarning(what, {{"secret", where},
                               {"secretDataKey", generated.entry},
                               {"recipient", generated.recipient},
                               {"warningAnnotation", sops::kBackupWarningAnnotation}});
  };

  HeldSecret secret;
  auto read = client.Get(kSecrets, ns, name);
  if (read.ok()) secret.Hold(*std::move(read));
  if (!read.ok() && kube::IsApiNotFound(read.status()) && request.secret.generate_when_missing) {
    HeldSecret fresh;
    fresh.Hold(sops::NewAgeKeySecret(ns, name));
    auto generated = add_generated_key(fresh.get());
    if (!generated.ok()) {
      return fail(reason::kInvalidConfig, std::string(generated.status().message()));
    }
    auto created = client.Create(kSecrets, ns, fresh.get());
    if (created.ok()) {
      secret.Hold(*std::move(created));
      out.action = EncryptionSecretAction::kCreated;
      log_generated(
          "Generated missing encryption secret with age key. Back up the private key and remove "
          "warning annotation.",
          *generated);
    } else if (kube::IsApiAlreadyExists(created.status())) {
      read = client.Get(kSecrets, ns, name);  // created meanwhile by someone else
      if (read.ok()) secret.Hold(*std::move(read));
    } else {
      return fail(reason::kInvalidConfig, absl::StrCat("failed to create encryption secret ", where,
                                                       ": ", created.status().message()));
    }
  }
  if (!secret.held()) {
    return fail(reason::kMissingSecret, absl::StrCat("failed to fetch encryption secret ", where,
                                                     ": ", read.status().message()));
  }

  if (request.secret.generate_when_missing && out.action == EncryptionSecretAction::kRead) {
    if (!sops::HasAgeKeyEntry(secret.get())) {
      auto generated = add_generated_key(secret.get());
      if (!generated.ok()) {
        return fail(reason::kInvalidConfig, std::string(generated.status().message()));
      }
      auto updated = client.Update(kSecrets, ns, secret.get());
      if (!updated.ok()) {
        // A concurrent writer wins; the next read starts over from what it wrote.
        return fail(reason::kInvalidConfig, absl::StrCat("failed to update encryption secret ",
                                                         where, ": ", updated.status().message()));
      }
      secret.Hold(*std::move(updated));
      out.action = EncryptionSecretAction::kCompleted;
      log_generated(
          "Added missing .agekey entry to encryption secret. Back up the private key and remove "
          "warning annotation.",
          *generated);
    } else if (sops::BackupWarningPresent(secret.get())) {
      runtime::LogWarning(
          "ENCRYPTION KEY BACKUP REQUIRED: remove annotation after backup is completed",
          {{"secret", where}, {"annotation", sops::kBackupWarningAnnotation}});
    }
  }

  auto recipients = sops::RecipientsFromAgeKeySecret(secret.get());
  if (!recipients.ok()) {
    return fail(reason::kInvalidConfig,
                absl::StrCat("failed to resolve recipients from encryption secret ", where, ": ",
                             recipients.status().message()));
  }
  result.recipients = *std::move(recipients);
  result.message = absl::StrCat(result.recipients.size(), " age recipient(s) from secret ", where);
  return out;
}

}  // namespace reverser::catalog
