#pragma once

// The blocking half of the EncryptionConfigured gate: reading a GitTarget's age key Secret and,
// with generateWhenMissing, creating it (or adding an entry to it) with a generated key, as the
// reference does (docs/behaviour.md, Sensitive resources and encryption). Runs on a worker
// thread, never on the actor. Only the public recipients are returned; the Secret's values are
// wiped from memory before returning.

#include <nlohmann/json.hpp>

#include "libs/core/clock.h"
#include "libs/kube/rest_client.h"
#include "libs/sops/crypto.h"
#include "services/catalog/catalog_state.h"

namespace reverser::catalog {

// What the read did to the Secret.
enum class EncryptionSecretAction {
  kRead,       // read as it was
  kCreated,    // created with a generated key
  kCompleted,  // a generated key added to a Secret without any *.agekey entry
};

struct EncryptionSecretOutcome {
  EncryptionSecretResult result;
  EncryptionSecretAction action = EncryptionSecretAction::kRead;
};

// Reads request.secret. Missing or unreadable (and not created): MissingSecret. A Secret whose
// *.agekey entries do not each hold one identity, or a create/update that fails: InvalidConfig.
// With generate_when_missing, a missing Secret is created (Opaque, one entry named
// sops::AgeKeyEntryName(clock.Now()), the recipient and backup-warning annotations) and a
// Secret without any *.agekey entry gets one; while the backup warning stays on the Secret,
// each read logs "ENCRYPTION KEY BACKUP REQUIRED".
EncryptionSecretOutcome ReadEncryptionSecret(kube::RestClient& client,
                                             const EncryptionSecretRequest& request,
                                             const core::Clock& clock,
                                             sops::crypto::Random& random);

}  // namespace reverser::catalog
