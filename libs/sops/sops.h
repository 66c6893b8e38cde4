#pragma once

// SOPS documents (the format `sops --encrypt` writes, sops 3.7 - 3.13): values encrypted with
// AES-256-GCM under one data key, the key wrapped per age recipient, and a MAC over every value.
// Works on ordered trees (sops_yaml.h); format rules in docs/behaviour.md, SOPS file format.

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "libs/sops/age.h"
#include "libs/sops/crypto.h"
#include "libs/sops/sops_yaml.h"

namespace reverser::sops {

// The creation rule gitops-reverser bootstraps: everything under a `data` or `stringData` key.
inline constexpr absl::string_view kDefaultEncryptedRegex = "^(data|stringData)$";
// The sops release gitops-reverser v0.36.0 ships; written as `sops.version`.
inline constexpr absl::string_view kDefaultSopsVersion = "3.11.0";

// Which leaves are encrypted: exactly one rule, applied to every key of a leaf's path.
struct EncryptionRule {
  enum class Kind { kEncryptedRegex, kUnencryptedRegex, kEncryptedSuffix, kUnencryptedSuffix };
  Kind kind = Kind::kEncryptedRegex;
  std::string value = std::string(kDefaultEncryptedRegex);
  // The metadata key the rule is stored under (`encrypted_regex`, ...).
  std::string MetadataKey() const;
};

struct EncryptOptions {
  EncryptionRule rule;
  std::string version = std::string(kDefaultSopsVersion);
  absl::Time now = absl::Now();                      // -> lastmodified (UTC, whole seconds)
  crypto::Random* random = &crypto::SystemRandom();  // data key, age wrapping, IVs
  // If set, receives the data key (for a caller's self-check); treat it as a secret.
  std::string* data_key_out = nullptr;
};

// Encrypts a plaintext document (a mapping without a top-level `sops` key) and appends the
// `sops:` metadata (age recipients, lastmodified, mac, rule, version) last. Randomness is drawn
// in this order: data key, then per recipient the age file key, ephemeral secret and payload
// nonce, then one IV per encrypted value in document order, then the MAC's IV.
absl::StatusOr<Tree> EncryptTree(const Tree& plaintext,
                                 const std::vector<age::X25519Recipient>& recipients,
                                 const EncryptOptions& options);

struct DecryptedDocument {
  Tree plaintext;        // without the `sops` key
  std::string data_key;  // 32 bytes; handle as a secret
  std::string mac;       // the verified MAC (128 upper-case hex digits)
  std::string lastmodified;
};

// Unwraps the data key with the first identity that opens an `age` entry (flat or in
// key_groups), decrypts every value and verifies the MAC. NotFound if no identity fits,
// Unimplemented for post-quantum-only files, DataLoss on a MAC mismatch or a failed value.
absl::StatusOr<DecryptedDocument> DecryptTree(const Tree& encrypted,
                                              const std::vector<age::X25519Identity>& identities);
// The same with a known data key (e.g. a PGP-wrapped file whose key is known).
absl::StatusOr<DecryptedDocument> DecryptTreeWithDataKey(const Tree& encrypted,
                                                         absl::string_view data_key);

// Text in, text out.
absl::StatusOr<std::string> EncryptYaml(const Tree& plaintext,
                                        const std::vector<age::X25519Recipient>& recipients,
                                        const EncryptOptions& options);
absl::StatusOr<DecryptedDocument> DecryptYaml(absl::string_view text,
                                              const std::vector<age::X25519Identity>& identities);

// One `ENC[AES256_GCM,data:…,iv:…,tag:…,type:…]` value.
struct EncryptedValue {
  std::string data;  // ciphertext (same length as the plaintext)
  std::string iv;
  std::string tag;
  std::string type;  // str, int, float, bool, comment, time
};
absl::StatusOr<EncryptedValue> ParseEncryptedValue(absl::string_view text);
std::string FormatEncryptedValue(const EncryptedValue& value);

}  // namespace reverser::sops
