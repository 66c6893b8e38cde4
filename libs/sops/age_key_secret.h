#pragma once

// The age key Secret of a GitTarget (`spec.encryption.secretRef`), as gitops-reverser and Flux
// lay it out: every `*.agekey` data entry holds one age identity (`AGE-SECRET-KEY-1…`); a key
// the controller generates goes into a date-named entry and the Secret is annotated with its
// public recipient and a backup warning (docs/behaviour.md, Sensitive resources and encryption).
//
// Only the public recipients leave these functions. Errors name the entry, never its value.

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "libs/sops/age.h"

namespace reverser::sops {

inline constexpr absl::string_view kAgeKeyEntrySuffix = ".agekey";
inline constexpr char kAgeRecipientAnnotation[] = "configbutler.ai/age-recipient";
inline constexpr char kBackupWarningAnnotation[] = "configbutler.ai/backup-warning";
inline constexpr char kBackupWarningValue[] = "REMOVE_AFTER_BACKUP";

// The entry a generated key is stored under: `%04d%02d%d.agekey` of the UTC date — year,
// zero-padded month and a day that is NOT zero-padded (2024-03-05 -> "2024035.agekey"), as the
// reference writes it.
std::string AgeKeyEntryName(absl::Time now);

// Whether the Secret's `data` has any `*.agekey` entry.
bool HasAgeKeyEntry(const nlohmann::json& secret);

// The recipient of every `*.agekey` entry of the Secret's `data` (base64, as the API server
// serves it; each entry exactly one identity, `#` and blank lines ignored), deduplicated and
// sorted. No entry: an empty list. InvalidArgument naming the entry when one is not base64 or
// not exactly one valid identity.
absl::StatusOr<std::vector<std::string>> RecipientsFromAgeKeySecret(const nlohmann::json& secret);

// A new Opaque Secret `namespace_/name` (apiVersion, kind, metadata, type).
nlohmann::json NewAgeKeySecret(absl::string_view namespace_, absl::string_view name);

// Stores `identity` under data[`entry`] and sets the two annotations (the identity's recipient,
// the backup warning), keeping everything else of the Secret.
void AddGeneratedAgeKey(nlohmann::json& secret, absl::string_view entry,
                        const age::X25519Identity& identity);

// Whether the Secret still carries `configbutler.ai/backup-warning: REMOVE_AFTER_BACKUP`.
bool BackupWarningPresent(const nlohmann::json& secret);

// Overwrites every `data` and `stringData` value of a Secret held in memory, so key material
// does not linger in freed buffers once the caller is done with it.
void WipeSecretValues(nlohmann::json& secret);

}  // namespace reverser::sops
