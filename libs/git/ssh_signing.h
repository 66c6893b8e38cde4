#pragma once

// SSH commit signing as `git commit -S` with gpg.format=ssh does it: an Ed25519 key signs the
// commit object (without its gpgsig header) as an SSHSIG blob in namespace "git" over a SHA-512
// digest, armored as "-----BEGIN SSH SIGNATURE-----" and stored in the commit's gpgsig header
// (tree_editor.h signs when CommitSpec::signer is set). `git verify-commit` and
// `ssh-keygen -Y verify -n git` accept the result against the key's authorized_keys line.
//
// Keys: the OpenSSH private key format ("-----BEGIN OPENSSH PRIVATE KEY-----", unencrypted) and
// PEM PKCS#8 ("-----BEGIN PRIVATE KEY-----", or "ENCRYPTED PRIVATE KEY" with a passphrase).
// Passphrase-protected OpenSSH keys need bcrypt-pbkdf, which is not implemented: they are
// refused with a message saying so. Only Ed25519 keys sign; other key types are refused.

#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace reverser::git {

// The data keys of a GitProvider's signing Secret (spec.commit.signing.secretRef).
inline constexpr char kSigningKeyDataKey[] = "signing.key";
inline constexpr char kSigningPublicKeyDataKey[] = "signing.pub";
inline constexpr char kSigningPassphraseDataKey[] = "passphrase";

// The SSHSIG namespace Git signs and verifies commits in.
inline constexpr char kGitSignatureNamespace[] = "git";

class SshSigningKey {
 public:
  // Reads an OpenSSH or PEM PKCS#8 Ed25519 private key. InvalidArgument for text that is no
  // such key (or a wrong passphrase), Unimplemented for other key types and passphrase-protected
  // OpenSSH keys.
  static absl::StatusOr<SshSigningKey> Parse(absl::string_view private_key,
                                             absl::string_view passphrase = "");
  // The key of a signing Secret's data (already base64-decoded): `signing.key` with the
  // optional `passphrase`. NotFound when `signing.key` is missing or empty.
  static absl::StatusOr<SshSigningKey> FromSecretData(
      const std::map<std::string, std::string>& data);
  // A fresh key from the system's random source.
  static absl::StatusOr<SshSigningKey> Generate();

  // "ssh-ed25519 AAAA…" (authorized_keys format, no comment, no newline).
  std::string AuthorizedKey() const;
  // The public key in SSH wire format (string "ssh-ed25519", string key).
  std::string PublicKeyBlob() const;
  // The key in the unencrypted OpenSSH private key format, as `ssh-keygen -N ""` writes it
  // (70-column base64, trailing newline).
  std::string OpenSshPrivateKey(absl::string_view comment = "") const;
  // The key as PEM PKCS#8 encrypted with `passphrase` (AES-256-CBC, PBKDF2): how a generated
  // key is stored when its Secret sets a passphrase, since encrypted OpenSSH keys are not
  // supported.
  absl::StatusOr<std::string> EncryptedPkcs8PrivateKey(absl::string_view passphrase) const;

  // An armored SSHSIG signature of `message` (SHA-512), without a trailing newline, ready for
  // a commit's gpgsig header. Ed25519 is deterministic: the same key and message give the same
  // bytes as `ssh-keygen -Y sign`.
  absl::StatusOr<std::string> Sign(
      absl::string_view message,
      absl::string_view signature_namespace = kGitSignatureNamespace) const;

 private:
  SshSigningKey(std::string seed, std::string public_key)
      : seed_(std::move(seed)), public_key_(std::move(public_key)) {}
  // Builds a key from its 32-byte seed (the public half is derived).
  static absl::StatusOr<SshSigningKey> FromSeed(absl::string_view seed);

  std::string seed_;        // the 32-byte Ed25519 private seed
  std::string public_key_;  // the 32-byte Ed25519 public key
};

}  // namespace reverser::git
