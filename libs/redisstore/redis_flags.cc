#include "libs/redisstore/redis_flags.h"

#include "absl/flags/flag.h"
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

namespace reverser::redisstore {

absl::StatusOr<RedisSettings> RedisSettingsFromFlags() {
  RedisSettings settings;
  auto options = RedisOptions::FromAddress(absl::GetFlag(FLAGS_redis_address));
  if (!options.ok()) return core::Annotate(options.status(), "--redis_address");
  settings.options = *options;
  auto prefix = KeyPrefix::Parse(absl::GetFlag(FLAGS_redis_key_prefix));
  if (!prefix.ok()) return core::Annotate(prefix.status(), "--redis_key_prefix");
  prefix = KeyPrefix::Parse(absl::GetFlag(FLAGS_redis_key_prefix),
                            absl::GetFlag(FLAGS_reference_key_prefix));
  if (!prefix.ok()) return core::Annotate(prefix.status(), "--reference_key_prefix");
  settings.prefix = *prefix;
  return settings;
}

}  // namespace reverser::redisstore
