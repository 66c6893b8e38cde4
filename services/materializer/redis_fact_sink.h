#pragma once

// Stores audit author facts, admission change facts and CommitRequest command authors in Redis (the
// reference's author keys). Webhook requests arrive on several HTTP threads and hiredis connections
// are not thread-safe, so each write borrows a connection from a small pool of idle ones
// (connecting another when all are busy): concurrent POSTs overlap their Redis round trips instead
// of queueing behind one connection.

#include <memory>
#include <mutex>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "libs/redisstore/author_fact_store.h"
#include "services/materializer/admission_webhook.h"
#include "services/materializer/audit_webhook.h"

namespace reverser::materializer {

class RedisFactSink final : public FactSink, public CommandAuthorSink, public ChangeAuthorSink {
 public:
  // At most `max_idle` connections are kept between writes (more may be open while busy).
  RedisFactSink(redisstore::RedisOptions options, redisstore::KeyPrefix prefix,
                absl::Duration fact_ttl, size_t max_idle = 8);
  absl::Status Write(const std::vector<redisstore::AuthorFact>& facts) override;
  absl::StatusOr<int64_t> CountFacts() override;
  absl::Status RecordCommandAuthor(absl::string_view commit_request_uid,
                                   const redisstore::CommandAuthor& author) override;
  absl::Status RecordAdmission(const redisstore::AdmissionFact& admitted) override;

 private:
  absl::StatusOr<std::unique_ptr<redisstore::RedisConnection>> Borrow();
  void Return(std::unique_ptr<redisstore::RedisConnection> connection);

  redisstore::RedisOptions options_;
  redisstore::KeyPrefix prefix_;
  absl::Duration fact_ttl_;
  size_t max_idle_;
  absl::Mutex mu_;
  std::vector<std::unique_ptr<redisstore::RedisConnection>> idle_ ABSL_GUARDED_BY(mu_);
};

}  // namespace reverser::materializer
