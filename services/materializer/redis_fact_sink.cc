#include "services/materializer/redis_fact_sink.h"

namespace reverser::materializer {

RedisFactSink::RedisFactSink(redisstore::RedisOptions options, redisstore::KeyPrefix prefix,
                             absl::Duration fact_ttl)
    : options_(std::move(options)), prefix_(std::move(prefix)), fact_ttl_(fact_ttl) {}

absl::Status RedisFactSink::Write(const std::vector<redisstore::AuthorFact>& facts) {
  std::lock_guard lock(mu_);
  if (!redis_) {
    auto connected = redisstore::RedisConnection::Connect(options_);
    if (!connected.ok()) return connected.status();
    redis_ = std::move(*connected);
  }
  redisstore::AuthorFactStore store(redis_.get(), prefix_, fact_ttl_);
  // One round trip for the whole request; a fact the store cannot key (no uid and no rv) is
  // skipped, not retried forever.
  return store.RecordAll(facts).status();
}

}  // namespace reverser::materializer
