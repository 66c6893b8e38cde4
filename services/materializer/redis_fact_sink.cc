#include "services/materializer/redis_fact_sink.h"

namespace reverser::materializer {

RedisFactSink::RedisFactSink(redisstore::RedisOptions options, redisstore::KeyPrefix prefix,
                             absl::Duration fact_ttl, size_t max_idle)
    : options_(std::move(options)),
      prefix_(std::move(prefix)),
      fact_ttl_(fact_ttl),
      max_idle_(max_idle) {}

absl::StatusOr<std::unique_ptr<redisstore::RedisConnection>> RedisFactSink::Borrow() {
  {
    absl::MutexLock lock(&mu_);
    if (!idle_.empty()) {
      std::unique_ptr<redisstore::RedisConnection> connection = std::move(idle_.back());
      idle_.pop_back();
      return connection;
    }
  }
  return redisstore::RedisConnection::Connect(options_);  // outside the lock: others go on
}

void RedisFactSink::Return(std::unique_ptr<redisstore::RedisConnection> connection) {
  absl::MutexLock lock(&mu_);
  if (idle_.size() < max_idle_) idle_.push_back(std::move(connection));
}

absl::Status RedisFactSink::Write(const std::vector<redisstore::AuthorFact>& facts) {
  auto connection = Borrow();
  if (!connection.ok()) return connection.status();
  redisstore::AuthorFactStore store(connection->get(), prefix_, fact_ttl_);
  // One round trip for the whole request; a fact the store cannot key (no uid and no rv) is
  // skipped, not retried forever.
  absl::Status written = store.RecordAll(facts).status();
  // A connection that failed may be broken mid-reply: drop it, the next write connects anew.
  if (written.ok()) Return(std::move(*connection));
  return written;
}

absl::StatusOr<int64_t> RedisFactSink::CountFacts() {
  auto connection = Borrow();
  if (!connection.ok()) return connection.status();
  redisstore::AuthorFactStore store(connection->get(), prefix_, fact_ttl_);
  absl::StatusOr<int64_t> keys = store.CountFacts();
  if (keys.ok()) Return(std::move(*connection));
  return keys;
}

absl::Status RedisFactSink::RecordCommandAuthor(absl::string_view commit_request_uid,
                                                const redisstore::CommandAuthor& author) {
  auto connection = Borrow();
  if (!connection.ok()) return connection.status();
  redisstore::AuthorFactStore store(connection->get(), prefix_, fact_ttl_);
  absl::Status written = store.RecordCommandAuthor(commit_request_uid, author);
  if (written.ok()) Return(std::move(*connection));
  return written;
}

absl::Status RedisFactSink::RecordAdmission(const redisstore::AdmissionFact& admitted) {
  auto connection = Borrow();
  if (!connection.ok()) return connection.status();
  redisstore::AuthorFactStore store(connection->get(), prefix_, fact_ttl_);
  absl::Status written = store.RecordAdmission(admitted);
  if (written.ok() || absl::IsInvalidArgument(written)) Return(std::move(*connection));
  return written;
}

}  // namespace reverser::materializer
