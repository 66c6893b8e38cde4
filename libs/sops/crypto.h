#pragma once

// The cryptographic primitives age and SOPS need, on OpenSSL 3 EVP (non-deprecated calls only),
// plus the strict base64 both formats require. Byte strings are std::string.

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace reverser::sops::crypto {

// Where every random byte comes from, so tests can inject fixed values (data key, file key,
// ephemeral secret, nonces, IVs) and reproduce golden vectors byte for byte.
class Random {
 public:
  virtual ~Random() = default;
  virtual absl::StatusOr<std::string> Bytes(size_t n) = 0;
};

// OpenSSL's RAND_bytes.
Random& SystemRandom();

// X25519 (RFC 7748). Scalars and points are 32 bytes.
absl::StatusOr<std::string> X25519PublicKey(absl::string_view secret);
// Fails on an all-zero shared secret (low-order peer point), as age requires.
absl::StatusOr<std::string> X25519(absl::string_view secret, absl::string_view peer_public);

// HKDF-SHA256 (RFC 5869); an empty salt means "no salt" (equivalent to 32 zero bytes).
absl::StatusOr<std::string> HkdfSha256(absl::string_view ikm, absl::string_view salt,
                                       absl::string_view info, size_t length);
absl::StatusOr<std::string> HmacSha256(absl::string_view key, absl::string_view data);
std::string Sha256(absl::string_view data);
std::string Sha512(absl::string_view data);

// IETF ChaCha20-Poly1305: 32-byte key, 12-byte nonce; output = ciphertext || 16-byte tag.
absl::StatusOr<std::string> ChaChaSeal(absl::string_view key, absl::string_view nonce,
                                       absl::string_view aad, absl::string_view plaintext);
// PermissionDenied when authentication fails (wrong key or tampered data).
absl::StatusOr<std::string> ChaChaOpen(absl::string_view key, absl::string_view nonce,
                                       absl::string_view aad, absl::string_view sealed);

// AES-256-GCM with any IV length (SOPS uses 32 bytes). Returns ciphertext and tag separately.
struct GcmSealed {
  std::string ciphertext;
  std::string tag;  // 16 bytes
};
absl::StatusOr<GcmSealed> AesGcmSeal(absl::string_view key, absl::string_view iv,
                                     absl::string_view aad, absl::string_view plaintext);
// PermissionDenied when authentication fails.
absl::StatusOr<std::string> AesGcmOpen(absl::string_view key, absl::string_view iv,
                                       absl::string_view aad, absl::string_view ciphertext,
                                       absl::string_view tag);

// RFC 4648 standard alphabet. `padded` selects "=" padding (SOPS values, armor) or none (age
// header). Decoding is strict: canonical (unused bits zero), exact padding, no whitespace.
std::string Base64Encode(absl::string_view data, bool padded = true);
absl::StatusOr<std::string> Base64Decode(absl::string_view text, bool padded = true);

std::string HexEncode(absl::string_view data, bool upper = false);
absl::StatusOr<std::string> HexDecode(absl::string_view hex);

// Compares without an early exit (MACs, tags).
bool ConstantTimeEquals(absl::string_view a, absl::string_view b);

}  // namespace reverser::sops::crypto
