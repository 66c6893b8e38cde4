#include "libs/redisstore/redis_flags.h"

#include <fstream>
#include <sstream>
#include <utility>

#include "absl/flags/flag.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
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

ABSL_FLAG(std::string, redis_sentinels, "",
          "Redis behind Sentinel: comma-separated host:port of the Sentinels, asked in turn for "
          "the primary of --redis_sentinel_master at every (re)connect; --redis_address is then "
          "not used. A failover is followed: a closed or READONLY connection finds the new "
          "primary.");
ABSL_FLAG(std::string, redis_sentinel_master, "",
          "With --redis_sentinels: the name the Sentinels monitor the primary as.");
ABSL_FLAG(std::string, redis_sentinel_username, "",
          "With --redis_sentinels: the ACL user to authenticate to the Sentinels as.");
ABSL_FLAG(std::string, redis_sentinel_password_file, "",
          "With --redis_sentinels: file holding the Sentinels' password (their requirepass); "
          "empty: no AUTH to the Sentinels.");

ABSL_FLAG(bool, redis_tls, false,
          "Speak TLS to Redis (its tls-port), verifying its certificate against --redis_tls_ca "
          "(empty: the system's trust store) and --redis_tls_server_name. Implied by "
          "--redis_tls_ca.");
ABSL_FLAG(std::string, redis_tls_ca, "",
          "CA bundle (PEM) that Redis's certificate must chain to; setting it turns on TLS.");
ABSL_FLAG(std::string, redis_tls_cert, "",
          "Client certificate (PEM) to present to a Redis with `tls-auth-clients yes`; with "
          "--redis_tls_key.");
ABSL_FLAG(std::string, redis_tls_key, "", "The unencrypted private key (PEM) of --redis_tls_cert.");
ABSL_FLAG(std::string, redis_tls_server_name, "",
          "The name Redis's certificate must carry (a DNS name, or an IP address checked against "
          "its IP addresses); empty: the host of --redis_address.");

namespace reverser::redisstore {
namespace {

// The --redis_tls* flags into `options`; InvalidArgument naming the flag that is wrong.
absl::Status TlsFromFlags(RedisOptions& options) {
  const std::string ca = absl::GetFlag(FLAGS_redis_tls_ca);
  const std::string cert = absl::GetFlag(FLAGS_redis_tls_cert);
  const std::string key = absl::GetFlag(FLAGS_redis_tls_key);
  const std::string server_name = absl::GetFlag(FLAGS_redis_tls_server_name);
  options.tls = absl::GetFlag(FLAGS_redis_tls) || !ca.empty();
  if (!options.tls) {
    const std::pair<absl::string_view, absl::string_view> tls_only[] = {
        {"--redis_tls_cert", cert},
        {"--redis_tls_key", key},
        {"--redis_tls_server_name", server_name}};
    for (const auto& [flag, value] : tls_only) {
      if (!value.empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat(flag, " needs --redis_tls or --redis_tls_ca"));
      }
    }
    return absl::OkStatus();
  }
  if (cert.empty() != key.empty()) {
    return absl::InvalidArgumentError(
        "--redis_tls_cert and --redis_tls_key go together (a client certificate and its key)");
  }
  options.tls_ca_file = ca;
  options.tls_server_name = server_name;
  // The CA alone first, so an error names the flag whose file is wrong.
  if (absl::Status s = CheckRedisTlsFiles(options); !s.ok()) {
    return core::Annotate(s, ca.empty() ? "--redis_tls" : "--redis_tls_ca");
  }
  options.tls_cert_file = cert;
  options.tls_key_file = key;
  if (absl::Status s = CheckRedisTlsFiles(options); !s.ok()) {
    const bool key_is_wrong = absl::StrContains(s.message(), "the client key");
    return core::Annotate(s, key_is_wrong ? "--redis_tls_key" : "--redis_tls_cert");
  }
  return absl::OkStatus();
}

// The --redis_sentinel* flags into `options`.
absl::Status SentinelsFromFlags(RedisOptions& options) {
  const std::string master = absl::GetFlag(FLAGS_redis_sentinel_master);
  const std::string username = absl::GetFlag(FLAGS_redis_sentinel_username);
  const std::string password_file = absl::GetFlag(FLAGS_redis_sentinel_password_file);
  for (absl::string_view sentinel :
       absl::StrSplit(absl::GetFlag(FLAGS_redis_sentinels), ',', absl::SkipWhitespace())) {
    sentinel = absl::StripAsciiWhitespace(sentinel);
    if (auto at = RedisOptions::FromAddress(sentinel); !at.ok()) {
      return core::Annotate(at.status(), "--redis_sentinels");
    }
    options.sentinels.emplace_back(sentinel);
  }
  if (options.sentinels.empty()) {
    const std::pair<absl::string_view, absl::string_view> sentinel_only[] = {
        {"--redis_sentinel_master", master},
        {"--redis_sentinel_username", username},
        {"--redis_sentinel_password_file", password_file}};
    for (const auto& [flag, value] : sentinel_only) {
      if (!value.empty())
        return absl::InvalidArgumentError(absl::StrCat(flag, " needs --redis_sentinels"));
    }
    return absl::OkStatus();
  }
  if (master.empty()) {
    return absl::InvalidArgumentError(
        "--redis_sentinels needs --redis_sentinel_master (the name the Sentinels monitor the "
        "primary as)");
  }
  options.sentinel_master = master;
  options.sentinel_username = username;
  if (!password_file.empty()) {
    ASSIGN_OR_RETURN(options.sentinel_password,
                     ReadRedisPassword(password_file, "--redis_sentinel_password_file"));
  } else if (!username.empty()) {
    return absl::InvalidArgumentError(
        "--redis_sentinel_username needs --redis_sentinel_password_file");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> ReadRedisPassword(const std::string& path, absl::string_view flag) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::InvalidArgumentError(absl::StrCat(flag, ": cannot read ", path));
  std::stringstream text;
  text << in.rdbuf();
  std::string password = text.str();
  while (!password.empty() && (password.back() == '\n' || password.back() == '\r')) {
    password.pop_back();
  }
  if (password.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(flag, ": ", path, " is empty"));
  }
  return password;
}

absl::StatusOr<RedisSettings> RedisSettingsFromFlags() {
  RedisSettings settings;
  auto options = RedisOptions::FromAddress(absl::GetFlag(FLAGS_redis_address));
  if (!options.ok()) return core::Annotate(options.status(), "--redis_address");
  settings.options = *options;
  settings.options.username = absl::GetFlag(FLAGS_redis_username);
  RETURN_IF_ERROR(TlsFromFlags(settings.options));
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
  RETURN_IF_ERROR(SentinelsFromFlags(settings.options));
  auto prefix = KeyPrefix::Parse(absl::GetFlag(FLAGS_redis_key_prefix));
  if (!prefix.ok()) return core::Annotate(prefix.status(), "--redis_key_prefix");
  prefix = KeyPrefix::Parse(absl::GetFlag(FLAGS_redis_key_prefix),
                            absl::GetFlag(FLAGS_reference_key_prefix));
  if (!prefix.ok()) return core::Annotate(prefix.status(), "--reference_key_prefix");
  settings.prefix = *prefix;
  return settings;
}

}  // namespace reverser::redisstore
