#include "services/catalog/catalog_grpc.h"

#include <mutex>
#include <optional>

#include "absl/strings/str_cat.h"

namespace reverser::catalog {
namespace {

// A server stream fed by a Feed. Writes one message at a time; when a write completes it asks
// the feed for the next message after what it sent. Lifetime: gRPC owns the reactor until
// OnDone; the Listener handed to the feed only holds a pointer that OnDone clears under the
// listener's lock, so a publish racing with the end of the stream is harmless.
template <typename Msg, typename FeedT>
class FeedStream final : public grpc::ServerWriteReactor<Msg> {
 public:
  FeedStream(FeedT* feed, std::optional<uint64_t> known) : feed_(feed), known_(known) {
    listener_ = std::make_shared<Listener>(this);
    id_ = feed_->Subscribe(listener_);
    listener_->Wake();
  }

  void OnWriteDone(bool ok) override {
    {
      std::lock_guard lock(listener_->mu);
      writing_ = false;
      if (!ok) {
        FinishLocked(grpc::Status(grpc::StatusCode::UNAVAILABLE, "write failed"));
        return;
      }
    }
    listener_->Wake();
  }

  void OnCancel() override {
    std::lock_guard lock(listener_->mu);
    FinishLocked(grpc::Status::CANCELLED);
  }

  void OnDone() override {
    feed_->Unsubscribe(id_);
    {
      std::lock_guard lock(listener_->mu);
      listener_->stream = nullptr;
    }
    delete this;
  }

 private:
  struct Listener final : FeedListener {
    explicit Listener(FeedStream* s) : stream(s) {}
    void Wake() override {
      std::unique_lock lock(mu);
      if (stream == nullptr) return;
      stream->MaybeWriteLocked(lock);
    }
    std::mutex mu;
    FeedStream* stream;
  };

  // Called with the listener's lock held; releases it before StartWrite (the completion may
  // run on another thread and take the lock).
  void MaybeWriteLocked(std::unique_lock<std::mutex>& lock) {
    if (writing_ || finished_) return;
    std::optional<Msg> next = feed_->Next(known_);
    if (!next) return;
    message_ = std::move(*next);
    known_ = message_.generation();
    writing_ = true;
    lock.unlock();
    this->StartWrite(&message_);
  }

  void FinishLocked(const grpc::Status& status) {
    if (finished_) return;
    finished_ = true;
    this->Finish(status);
  }

  FeedT* feed_;
  std::optional<uint64_t> known_;
  std::shared_ptr<Listener> listener_;
  int id_ = 0;
  Msg message_;
  bool writing_ = false;  // guarded by listener_->mu
  bool finished_ = false;
};

std::optional<uint64_t> Known(uint64_t generation) {
  if (generation == 0) return std::nullopt;
  return generation;
}

grpc::ServerUnaryReactor* Done(grpc::CallbackServerContext* context, grpc::Status status) {
  auto* reactor = context->DefaultReactor();
  reactor->Finish(status);
  return reactor;
}

}  // namespace

void FillListTypes(const TypeSnapshot& snapshot, bool followable_only,
                   reverser::v1::ListTypesResponse* response) {
  response->set_generation(snapshot.generation);
  for (const auto& record : snapshot.records) {
    if (followable_only && record.verdict() != reverser::v1::FOLLOW_VERDICT_FOLLOWABLE &&
        record.verdict() != reverser::v1::FOLLOW_VERDICT_RETAINED) {
      continue;
    }
    *response->add_records() = record;
  }
}

grpc::ServerWriteReactor<reverser::v1::ClaimSet>* CatalogGrpcService::WatchClaims(
    grpc::CallbackServerContext* /*context*/, const reverser::v1::WatchClaimsRequest* request) {
  return new FeedStream<reverser::v1::ClaimSet, ClaimFeed>(&backend_->claim_feed(),
                                                           Known(request->known_generation()));
}

grpc::ServerWriteReactor<reverser::v1::TableUpdate>* CatalogGrpcService::WatchTables(
    grpc::CallbackServerContext* /*context*/, const reverser::v1::WatchTablesRequest* request) {
  return new FeedStream<reverser::v1::TableUpdate, TableFeed>(&backend_->table_feed(),
                                                              Known(request->known_generation()));
}

grpc::ServerUnaryReactor* CatalogGrpcService::GetType(grpc::CallbackServerContext* context,
                                                      const reverser::v1::GetTypeRequest* request,
                                                      reverser::v1::TypeRecord* response) {
  auto snapshot = backend_->type_feed().Current();
  if (!snapshot->ready) {
    return Done(context, grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                      "the catalog has not completed a discovery scan yet"));
  }
  const auto& gvr = request->gvr();
  for (const auto& record : snapshot->records) {
    const auto& r = record.identity().gvr();
    if (r.group() == gvr.group() && r.version() == gvr.version() &&
        r.resource() == gvr.resource()) {
      *response = record;
      return Done(context, grpc::Status::OK);
    }
  }
  return Done(context,
              grpc::Status(grpc::StatusCode::NOT_FOUND,
                           absl::StrCat("type ", gvr.group(), "/", gvr.version(), "/",
                                        gvr.resource(), " is not known to the catalog")));
}

grpc::ServerUnaryReactor* CatalogGrpcService::ListTypes(
    grpc::CallbackServerContext* context, const reverser::v1::ListTypesRequest* request,
    reverser::v1::ListTypesResponse* response) {
  FillListTypes(*backend_->type_feed().Current(), request->followable_only(), response);
  return Done(context, grpc::Status::OK);
}

grpc::ServerUnaryReactor* CatalogGrpcService::ReportStreamSummary(
    grpc::CallbackServerContext* context, const reverser::v1::StreamSummary* request,
    reverser::v1::ReportStreamSummaryResponse* /*response*/) {
  if (request->target().uid().empty() || request->target().name().empty()) {
    return Done(context, grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                      "target.namespace, target.name and target.uid are required"));
  }
  backend_->ReportStreamSummary(*request);
  return Done(context, grpc::Status::OK);
}

grpc::ServerUnaryReactor* CatalogAdminGrpcService::ListTypes(
    grpc::CallbackServerContext* context, const reverser::v1::ListTypesRequest* request,
    reverser::v1::ListTypesResponse* response) {
  FillListTypes(*backend_->type_feed().Current(), request->followable_only(), response);
  return Done(context, grpc::Status::OK);
}

grpc::ServerUnaryReactor* CatalogAdminGrpcService::Rescan(
    grpc::CallbackServerContext* context, const reverser::v1::RescanRequest* /*request*/,
    reverser::v1::RescanResponse* response) {
  auto* reactor = context->DefaultReactor();
  backend_->Rescan([reactor, response](absl::StatusOr<reverser::v1::RescanResponse> result) {
    if (!result.ok()) {
      reactor->Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                   std::string(result.status().message())));
      return;
    }
    *response = *std::move(result);
    reactor->Finish(grpc::Status::OK);
  });
  return reactor;
}

}  // namespace reverser::catalog
