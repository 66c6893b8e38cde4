#include "libs/redisstore/redis_flags.h"

#include "absl/flags/flag.h"
#include "libs/core/status.h"

ABSL_FLAG(std::string, redis_address, "127.0.0.1:6379", "Redis host:port.");
ABSL_FLAG(std::string, redis_key_prefix, "reverser", "Prefix of every Redis key.");

namespace reverser::redisstore {

absl::StatusOr<RedisSettings> RedisSettingsFromFlags() {
  RedisSettings settings;
  auto options = RedisOptions::FromAddress(absl::GetFlag(FLAGS_redis_address));
  if (!options.ok()) return core::Annotate(options.status(), "--redis_address");
  settings.options = *options;
  auto prefix = KeyPrefix::Parse(absl::GetFlag(FLAGS_redis_key_prefix));
  if (!prefix.ok()) return core::Annotate(prefix.status(), "--redis_key_prefix");
  settings.prefix = *prefix;
  return settings;
}

}  // namespace reverser::redisstore
