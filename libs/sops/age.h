#pragma once

// age v1 (age-encryption.org/v1) with X25519 recipients: what SOPS uses to wrap its data key.
// Binary and ASCII-armored files, the strict parsing rules of the reference implementation
// (filippo.io/age), and the C2SP/CCTV failure classes expressed as status codes:
//   header failure  -> InvalidArgument ("age header: ...")
//   no match        -> NotFound        (no identity unwraps any stanza)
//   HMAC failure    -> Unauthenticated (header MAC mismatch)
//   payload failure -> DataLoss        (STREAM chunk, tag or framing error)
//   armor failure   -> InvalidArgument from Dearmor ("age armor: ...")
// Post-quantum (age1pq1…), plugin, tag and SSH recipients are refused with Unimplemented.

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "libs/sops/crypto.h"

namespace reverser::sops::age {

// A public key, written `age1…` (62 characters).
class X25519Recipient {
 public:
  static absl::StatusOr<X25519Recipient> Parse(absl::string_view text);
  static absl::StatusOr<X25519Recipient> FromPublicKey(absl::string_view public_key);
  const std::string& public_key() const { return public_key_; }  // 32 bytes
  std::string String() const;                                    // canonical `age1…`

 private:
  std::string public_key_;
};

// A secret key, written `AGE-SECRET-KEY-1…` (74 characters, upper case).
class X25519Identity {
 public:
  static absl::StatusOr<X25519Identity> Parse(absl::string_view text);
  static absl::StatusOr<X25519Identity> FromSecretKey(absl::string_view secret_key);
  static absl::StatusOr<X25519Identity> Generate(crypto::Random& random);
  const std::string& secret_key() const { return secret_key_; }
  X25519Recipient Recipient() const { return recipient_; }
  std::string String() const;

 private:
  std::string secret_key_;
  X25519Recipient recipient_;
};

// An identity file (`age-keygen` output, Flux `*.agekey`, sops `keys.txt`): `#` comment lines
// and blank lines are ignored, a trailing `\r` dropped; every other line must be an identity.
absl::StatusOr<std::vector<X25519Identity>> ParseIdentityFile(absl::string_view text);

// Encrypts to every recipient (one X25519 stanza each, one fresh file key). Binary output.
absl::StatusOr<std::string> Encrypt(absl::string_view plaintext,
                                    const std::vector<X25519Recipient>& recipients,
                                    crypto::Random& random = crypto::SystemRandom());

// Decrypts a binary age file with the first identity that unwraps a stanza.
absl::StatusOr<std::string> Decrypt(absl::string_view file,
                                    const std::vector<X25519Identity>& identities);

// PEM-like armor: `-----BEGIN AGE ENCRYPTED FILE-----`, padded base64 in 64-column lines,
// `-----END AGE ENCRYPTED FILE-----\n`.
std::string Armor(absl::string_view binary);
// Strict: up to 1024 bytes of surrounding whitespace, LF or CRLF, full 64-column lines except
// the last, canonical padding, nothing but whitespace after the END line.
absl::StatusOr<std::string> Dearmor(absl::string_view text);

// Both wrapped in one step, for SOPS `enc` values.
absl::StatusOr<std::string> EncryptArmored(absl::string_view plaintext,
                                           const std::vector<X25519Recipient>& recipients,
                                           crypto::Random& random = crypto::SystemRandom());
absl::StatusOr<std::string> DecryptArmored(absl::string_view text,
                                           const std::vector<X25519Identity>& identities);

// One header stanza and the parsed header, exposed for tests and diagnostics.
struct Stanza {
  std::vector<std::string> args;  // args[0] is the type ("X25519")
  std::string body;
};
struct Header {
  std::vector<Stanza> stanzas;
  std::string mac;            // 32 bytes
  size_t mac_input_end = 0;   // header bytes [0, mac_input_end) are MACed (through "---")
  size_t payload_offset = 0;  // first byte after the MAC line
};
absl::StatusOr<Header> ParseHeader(absl::string_view file);

}  // namespace reverser::sops::age
