#pragma once

// The Redis command-line flags every Redis-using service shares (--redis_address,
// --redis_username, --redis_password_file, --redis_tls, --redis_tls_ca, --redis_tls_cert,
// --redis_tls_key, --redis_tls_server_name, --redis_sentinels, --redis_sentinel_master,
// --redis_sentinel_username, --redis_sentinel_password_file, --redis_key_prefix,
// --reference_key_prefix), parsed
// once into connection options and a validated key prefix (its reference() names the families
// shared with gitops-reverser).

#include <memory>

#include "absl/status/statusor.h"
#include "libs/redisstore/body_cipher.h"
#include "libs/redisstore/keys.h"
#include "libs/redisstore/redis_connection.h"

namespace reverser::redisstore {

struct RedisSettings {
  RedisOptions options;
  KeyPrefix prefix = KeyPrefix::Default();
  // From --redis_body_key_file: seals sensitive bodies before Redis; null when unset.
  std::shared_ptr<const BodyCipher> body_cipher;
};

// InvalidArgument naming the flag when a value is malformed (or the password file, a TLS file
// unreadable or unusable: the TLS files are loaded here as a connection loads them).
absl::StatusOr<RedisSettings> RedisSettingsFromFlags();

// The password in `path`, without trailing newlines; an empty or unreadable file is an error
// naming `flag`.
absl::StatusOr<std::string> ReadRedisPassword(const std::string& path,
                                              absl::string_view flag = "--redis_password_file");

}  // namespace reverser::redisstore
