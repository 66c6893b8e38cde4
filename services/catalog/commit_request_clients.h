#pragma once

// The CommitRequest controller's two outside parties: the command authors the admission webhook
// recorded in Redis, and the gitworker's AttachCommit over the mesh's gRPC: at one address, or
// (--gitworker_membership) at the gitworker replica that owns the GitTarget's branch.

#include <grpcpp/grpcpp.h>

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "libs/membership/membership.h"
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
                     absl::Duration timeout = absl::Seconds(10),
                     const std::string& tls_server_name = "");
  absl::StatusOr<reverser::v1::FinalizeResult> Attach(
      const reverser::v1::AttachCommitRequest& request) override;

 private:
  std::unique_ptr<reverser::v1::GitWorker::Stub> stub_;
  absl::Duration timeout_;
};

struct RoutedCommitAttacherOptions {
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  // --gitworker_tls_server_name: the name each replica's certificate is checked against (a
  // replica is dialed at the address on its Lease, a pod IP); empty: the host dialed.
  std::string tls_server_name;
  absl::Duration timeout = absl::Seconds(10);
};

// --gitworker_membership: each AttachCommit goes to the gitworker replica that owns the
// request's GitTarget's branch, computed as the splicer and the gitworkers compute it: an
// OwnershipTable with no replica of its own ("" — a router), whose units are the branches of
// every GitTarget config the catalog publishes (BranchUnit of each destination) and whose
// members are the gitworkers' live Leases (a MemberView of service "gitworker"). No owner known
// (the view not synced, no live gitworker, the target not in the tables yet): Unavailable, and
// the controller polls again. A replica answering FAILED_PRECONDITION (it does not own the
// branch; the NotOwner in the error details names whom it believes does) is asked once more,
// at the owner a fresh look at the view computes, else at the one it named.
class RoutedCommitAttacher final : public CommitAttacher {
 public:
  // The catalog's current complete table set (TableFeed::Current); nullopt before the first.
  using TablesSource = std::function<std::optional<reverser::v1::TableUpdate>()>;

  // `members` must outlive the attacher.
  RoutedCommitAttacher(TablesSource tables, const membership::MembershipSource* members,
                       RoutedCommitAttacherOptions options);
  absl::StatusOr<reverser::v1::FinalizeResult> Attach(
      const reverser::v1::AttachCommitRequest& request) override;

  struct Route {
    std::string unit;     // membership::BranchUnit of the target's destination
    std::string owner;    // replica id
    std::string address;  // its gRPC address
  };
  // Where the target's AttachCommit goes now (Unavailable with why when nowhere).
  absl::StatusOr<Route> RouteOf(const reverser::v1::GitTargetRef& target) const;

 private:
  grpc::Status Call(const std::string& address, const reverser::v1::AttachCommitRequest& request,
                    reverser::v1::FinalizeResult* result);

  const TablesSource tables_;
  const membership::MembershipSource* members_;
  const RoutedCommitAttacherOptions options_;
  std::mutex mu_;
  std::map<std::string, std::unique_ptr<reverser::v1::GitWorker::Stub>> stubs_;  // by address
};

}  // namespace reverser::catalog
