#pragma once

// Sensitive object bodies are sealed before they reach Redis (docs/security.md, Sensitive
// bodies in Redis): AES-256-GCM under a key from a file, with a key id so keys can rotate.
//
// The nonce is synthetic: the first 12 bytes of HMAC-SHA256(nonce key, plaintext), the nonce key
// derived from the body key. The same body under the same key therefore seals to the same bytes,
// which keeps the stream's duplicate check (a retried append is byte-identical to the top) and
// no-op detection working; it reveals only that two stored versions are equal, and a nonce never
// repeats for different plaintexts.

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace reverser::redisstore {

class BodyCipher {
 public:
  // A key file: one key per line, `<key id>:<base64 of 32 random bytes>` (e.g. from
  // `printf 'k1:%s\n' "$(head -c32 /dev/urandom | base64)"`); `#` comments and blank lines are
  // skipped. The first key seals; every key opens (keep the old one listed while rotating).
  static absl::StatusOr<std::unique_ptr<BodyCipher>> FromKeyFile(const std::string& path);
  // (key id, 32 raw bytes) pairs, the first sealing. Ids: [A-Za-z0-9._-]{1,64}.
  static absl::StatusOr<std::unique_ptr<BodyCipher>> FromKeys(
      std::vector<std::pair<std::string, std::string>> keys);

  // "rvenc1:<key id>:<base64(nonce | ciphertext | tag)>".
  std::string Seal(absl::string_view plaintext) const;
  // The plaintext of a sealed body. DataLoss when it was altered or sealed with another key of
  // the same id; FailedPrecondition naming the key id when that key is not in the file.
  absl::StatusOr<std::string> Open(absl::string_view sealed) const;

  static bool IsSealed(absl::string_view stored);
  const std::string& sealing_key_id() const { return keys_.front().id; }

 private:
  struct Key {
    std::string id;
    std::string body_key;   // 32 bytes
    std::string nonce_key;  // 32 bytes, HMAC-SHA256(body_key, "reverser body nonce")
  };
  explicit BodyCipher(std::vector<Key> keys) : keys_(std::move(keys)) {}
  std::vector<Key> keys_;
};

}  // namespace reverser::redisstore
