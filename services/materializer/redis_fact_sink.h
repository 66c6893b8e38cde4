#pragma once

// Stores audit author facts in Redis (the reference's author keys). Webhook requests arrive on
// several HTTP threads; hiredis connections are not thread-safe, so one connection serves them
// in turn.

#include <memory>
#include <mutex>

#include "libs/redisstore/author_fact_store.h"
#include "services/materializer/audit_webhook.h"

namespace reverser::materializer {

class RedisFactSink final : public FactSink {
 public:
  RedisFactSink(redisstore::RedisOptions options, redisstore::KeyPrefix prefix,
                absl::Duration fact_ttl);
  absl::Status Write(const std::vector<redisstore::AuthorFact>& facts) override;

 private:
  redisstore::RedisOptions options_;
  redisstore::KeyPrefix prefix_;
  absl::Duration fact_ttl_;
  std::mutex mu_;
  std::unique_ptr<redisstore::RedisConnection> redis_;  // connected lazily, guarded by mu_
};

}  // namespace reverser::materializer
