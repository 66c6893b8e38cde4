#pragma once

// What the gitworker needs to keep sensitive objects out of Git in plaintext (docs/behaviour.md,
// Sensitive resources and encryption): the `.sops.yaml` file content for a sanitized object,
// encrypted in-process to real SOPS YAML with age recipients, and the bootstrap `.sops.yaml`
// creation rules.
//
// Rendering is this folder's own sops-style emitter (sops_yaml.h: indent 4, indented sequences,
// as the reference's sops 3.11.0 writes), not libs/manifest: sops re-emits the whole file, and
// the writer must hash exactly the typed values sops will read back.

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "libs/core/clock.h"
#include "libs/manifest/yaml_writer.h"
#include "libs/sops/age.h"
#include "libs/sops/crypto.h"
#include "libs/sops/sops.h"
#include "nlohmann/json.hpp"

namespace reverser::sops {

// Sensitive files are named `<name>.sops.yaml` so the bootstrap creation rule matches them.
inline constexpr absl::string_view kSopsFileSuffix = ".sops.yaml";

struct SecretFileOptions {
  std::string encrypted_regex = std::string(kDefaultEncryptedRegex);
  std::string sops_version = std::string(kDefaultSopsVersion);
  // Metadata key order, as for plaintext manifests (libs/manifest): sorted, as the reference
  // encrypts its ordered marshal.
  manifest::MetadataOrder metadata_order = manifest::MetadataOrder::kSorted;
  const core::Clock* clock = &core::Clock::Real();   // -> sops.lastmodified
  crypto::Random* random = &crypto::SystemRandom();  // inject for deterministic tests
};

// The file content for a sanitized object: `apiVersion`, `kind`, `metadata` (its keys in
// options.metadata_order), then every other top-level key except `status`
// (go-yaml order, as are nested maps), then `sops:` last. Values under keys matching
// `encrypted_regex` (at any depth) are encrypted; everything else stays readable but is covered
// by the MAC. Before returning, the text is parsed back, decrypted and compared with the input
// (fail closed). Errors (never containing secret values):
//   FailedPrecondition  no recipients at all (nothing may be written in plaintext);
//   InvalidArgument     a malformed recipient, an object that is not a mapping with string
//                       apiVersion/kind, a top-level `sops` key, invalid UTF-8, integers
//                       beyond int64;
//   Unimplemented       post-quantum / plugin / SSH recipients.
absl::StatusOr<std::string> EncryptSecretYaml(const nlohmann::json& sanitized_object,
                                              const std::vector<std::string>& age_recipients,
                                              const SecretFileOptions& options = {});

// The bootstrap `.sops.yaml` (gitops-reverser's bootstrapped-repo-template, byte for byte): one
// creation rule `path_regex: '.*\.sops\.ya?ml$'`, `encrypted_regex: '^(data|stringData)$'`, the
// normalized recipients in one age key group. Fails like EncryptSecretYaml on bad recipients.
absl::StatusOr<std::string> BootstrapSopsConfig(const std::vector<std::string>& age_recipients);

// Recipients as the reference resolves them: trimmed, blanks dropped, each parsed as an X25519
// `age1…` key, deduplicated and sorted. An empty result is not an error here.
absl::StatusOr<std::vector<std::string>> NormalizeRecipients(
    const std::vector<std::string>& age_recipients);

// The recipient of a Flux-style `*.agekey` Secret entry: exactly one AGE-SECRET-KEY line (blank
// and `#` lines ignored). Errors never echo the key.
absl::StatusOr<std::string> RecipientFromAgeKey(absl::string_view agekey_content);

// Every encryption makes new ENC bytes, so re-encrypting an unchanged Secret churns Git. This
// keyed digest of (object as written, normalized recipients, rule, version) lets the caller
// skip a write when nothing changed. It is an HMAC so it may be stored without revealing
// low-entropy secrets; `hmac_key` must stay server-side. Hex, 64 characters.
absl::StatusOr<std::string> SecretFingerprint(const nlohmann::json& sanitized_object,
                                              const std::vector<std::string>& age_recipients,
                                              absl::string_view hmac_key,
                                              const SecretFileOptions& options = {});

// Whether `text` is a SOPS-encrypted YAML file, the way Flux's kustomize-controller tells: the
// bytes `mac: ENC[` and a top-level `sops` mapping.
bool LooksLikeSopsYaml(absl::string_view text);

// Reads a file written by EncryptSecretYaml (or by sops): unwraps the data key with one of
// `identities` (e.g. parsed from `*.agekey` entries), decrypts and verifies the MAC, and returns
// the object without the `sops` block. Lets a caller that holds a key compare Git with the
// cluster instead of re-encrypting. Errors as DecryptTree (NotFound: no identity fits;
// DataLoss: MAC mismatch or tampering), and InvalidArgument for a value that decrypts to bytes
// that are not UTF-8.
absl::StatusOr<nlohmann::json> DecryptSecretYaml(
    absl::string_view text, const std::vector<age::X25519Identity>& identities);

// The ordered plaintext tree EncryptSecretYaml encrypts (exposed for tests and callers that
// want to compare a decrypted file with an object).
absl::StatusOr<Tree> OrderedSecretTree(const nlohmann::json& sanitized_object,
                                       manifest::MetadataOrder metadata_order);

}  // namespace reverser::sops
