#include "bench/splicer/accepting_gitworker.h"

#include "services/splicer/test_support.h"

namespace reverser::bench {

grpc::Status AcceptingGitWorker::Deliver(
    grpc::ServerContext* /*context*/,
    grpc::ServerReaderWriter<reverser::v1::DeliveryFeedback, reverser::v1::DeliveryMessage>*
        stream) {
  reverser::v1::DeliveryMessage message;
  while (stream->Read(&message)) {
    reverser::v1::DeliveryFeedback accepted;
    accepted.set_accepted_sequence(message.sequence());
    if (!stream->Write(accepted)) break;
    std::optional<reverser::v1::DeliveryFeedback> pushed = splicer::testutil::PushedAck(message);
    if (!pushed) continue;  // a target config: nothing to ack
    if (!stream->Write(*pushed)) break;
    {
      std::lock_guard lock(mu_);
      if (message.has_resync()) {
        ++resyncs_;
      } else {
        ++events_;
      }
    }
    cv_.notify_all();
  }
  return grpc::Status::OK;
}

bool AcceptingGitWorker::WaitForEvents(int64_t events, absl::Duration timeout) {
  std::unique_lock lock(mu_);
  return cv_.wait_for(lock, absl::ToChronoMilliseconds(timeout), [&] { return events_ >= events; });
}

int64_t AcceptingGitWorker::events() const {
  std::lock_guard lock(mu_);
  return events_;
}

int64_t AcceptingGitWorker::resyncs() const {
  std::lock_guard lock(mu_);
  return resyncs_;
}

LocalGrpcServer LocalGrpcServer::Start(grpc::Service* service) {
  LocalGrpcServer out;
  grpc::ServerBuilder builder;
  builder.SetMaxReceiveMessageSize(512 * 1024 * 1024);
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &out.port);
  builder.RegisterService(service);
  out.server = builder.BuildAndStart();
  return out;
}

}  // namespace reverser::bench
