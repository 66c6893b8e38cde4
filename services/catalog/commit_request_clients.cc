#include "services/catalog/commit_request_clients.h"

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace reverser::catalog {

absl::StatusOr<std::optional<std::string>> RedisCommandAuthors::Lookup(const std::string& uid) {
  if (store_ == nullptr) {
    auto connected = redisstore::RedisConnection::Connect(options_);
    if (!connected.ok()) return connected.status();
    redis_ = std::move(*connected);
    store_ = std::make_unique<redisstore::AuthorFactStore>(redis_.get(), prefix_);
  }
  auto found = store_->LookupCommandAuthor(uid);
  if (!found.ok()) {
    store_.reset();  // the connection may be broken: reconnect next time
    redis_.reset();
    return found.status();
  }
  if (!found->has_value() || (*found)->author.empty()) return std::optional<std::string>();
  return std::optional<std::string>((*found)->author);
}

GrpcCommitAttacher::GrpcCommitAttacher(const std::string& address,
                                       std::shared_ptr<grpc::ChannelCredentials> credentials,
                                       absl::Duration timeout)
    : stub_(reverser::v1::GitWorker::NewStub(grpc::CreateChannel(address, credentials))),
      timeout_(timeout) {}

absl::StatusOr<reverser::v1::FinalizeResult> GrpcCommitAttacher::Attach(
    const reverser::v1::AttachCommitRequest& request) {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout_));
  reverser::v1::FinalizeResult result;
  grpc::Status status = stub_->AttachCommit(&context, request, &result);
  if (!status.ok()) {
    return absl::UnavailableError(absl::StrCat("AttachCommit: ", status.error_message(), " (code ",
                                               static_cast<int>(status.error_code()), ")"));
  }
  return result;
}

}  // namespace reverser::catalog
