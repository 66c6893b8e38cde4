#include "libs/redisstore/redis_flags.h"

#include <fstream>
#include <sstream>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "libs/core/status.h"

ABSL_FLAG(std::string, redis_address, "127.0.0.1:6379", "Redis host:port.");
ABSL_FLAG(std::string, redis_key_prefix, "reverser",
          "Prefix of every Redis key (of the families shared with gitops-reverser too, unless "
          "--reference_key_prefix is set).");
ABSL_FLAG(std::string, reference_key_prefix, "",
          "Prefix of the Redis keys shared with gitops-reverser v0.36.0 (author facts, "
          "CommitRequest authors, watch cursors); empty: --redis_key_prefix. "
          "`gitops-reverser` (the reference's default) makes them byte-identical to the "
          "reference's, so its tooling reads them, while reverser's own keys keep "
          "--redis_key_prefix. Characters [A-Za-z0-9._:-], at most 128.");

ABSL_FLAG(std::string, redis_username, "",
          "Redis ACL user to authenticate as (Redis 6+); empty: the default user.");
ABSL_FLAG(std::string, redis_body_key_file, "",
          "Keys that seal sensitive objects' bodies (Secrets, configured types) before they are "
          "written to Redis: lines `<key id>:<base64 of 32 bytes>`, the first sealing "
          "(docs/security.md). Empty: a sensitive type is not materialized.");
ABSL_FLAG(std::string, redis_password_file, "",
          "File holding the Redis password (a mounted Secret; trailing newlines are ignored). "
          "Empty: no AUTH.");

namespace reverser::redisstore {

absl::StatusOr<std::string> ReadRedisPassword(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::InvalidArgumentError(absl::StrCat("--redis_password_file: cannot read ", path));
  std::stringstream text;
  text << in.rdbuf();
  std::string password = text.str();
  while (!password.empty() && (password.back() == '\n' || password.back() == '\r')) {
    password.pop_back();
  }
  if (password.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--redis_password_file: ", path, " is empty"));
  }
  return password;
}

absl::StatusOr<RedisSettings> RedisSettingsFromFlags() {
  RedisSettings settings;
  auto options = RedisOptions::FromAddress(absl::GetFlag(FLAGS_redis_address));
  if (!options.ok()) return core::Annotate(options.status(), "--redis_address");
  settings.options = *options;
  settings.options.username = absl::GetFlag(FLAGS_redis_username);
  if (const std::string keys = absl::GetFlag(FLAGS_redis_body_key_file); !keys.empty()) {
    auto cipher = BodyCipher::FromKeyFile(keys);
    if (!cipher.ok()) return core::Annotate(cipher.status(), "--redis_body_key_file");
    settings.body_cipher = std::move(*cipher);
  }
  if (const std::string file = absl::GetFlag(FLAGS_redis_password_file); !file.empty()) {
    ASSIGN_OR_RETURN(settings.options.password, ReadRedisPassword(file));
  } else if (!settings.options.username.empty()) {
    return absl::InvalidArgumentError("--redis_username needs --redis_password_file");
  }
  auto prefix = KeyPrefix::Parse(absl::GetFlag(FLAGS_redis_key_prefix));
  if (!prefix.ok()) return core::Annotate(prefix.status(), "--redis_key_prefix");
  prefix = KeyPrefix::Parse(absl::GetFlag(FLAGS_redis_key_prefix),
                            absl::GetFlag(FLAGS_reference_key_prefix));
  if (!prefix.ok()) return core::Annotate(prefix.status(), "--reference_key_prefix");
  settings.prefix = *prefix;
  return settings;
}

}  // namespace reverser::redisstore
