#pragma once

// The CommitRequest controller's two outside parties: the command authors the admission webhook
// recorded in Redis, and the gitworker's AttachCommit over the mesh's gRPC.

#include <grpcpp/grpcpp.h>

#include <memory>
#include <optional>
#include <string>

#include "libs/redisstore/author_fact_store.h"
#include "libs/redisstore/keys.h"
#include "libs/redisstore/redis_connection.h"
#include "proto/reverser/v1/gitworker.grpc.pb.h"
#include "services/catalog/commit_request_controller.h"

namespace reverser::catalog {

// Reads `<reference prefix>:author:v1:command:<uid>`. Connects on first use and again after a
// failure; called from the controller's worker thread only.
class RedisCommandAuthors final : public CommandAuthorSource {
 public:
  RedisCommandAuthors(redisstore::RedisOptions options, redisstore::KeyPrefix prefix)
      : options_(std::move(options)), prefix_(std::move(prefix)) {}
  absl::StatusOr<std::optional<std::string>> Lookup(const std::string& uid) override;

 private:
  redisstore::RedisOptions options_;
  redisstore::KeyPrefix prefix_;
  std::unique_ptr<redisstore::RedisConnection> redis_;
  std::unique_ptr<redisstore::AuthorFactStore> store_;
};

// One AttachCommit per call, each bounded by `timeout`.
class GrpcCommitAttacher final : public CommitAttacher {
 public:
  GrpcCommitAttacher(const std::string& address,
                     std::shared_ptr<grpc::ChannelCredentials> credentials,
                     absl::Duration timeout = absl::Seconds(10));
  absl::StatusOr<reverser::v1::FinalizeResult> Attach(
      const reverser::v1::AttachCommitRequest& request) override;

 private:
  std::unique_ptr<reverser::v1::GitWorker::Stub> stub_;
  absl::Duration timeout_;
};

}  // namespace reverser::catalog
