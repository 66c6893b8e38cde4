#pragma once

// A GitWorker peer that accepts every delivery and acks it as pushed at once: the fastest
// gitworker there can be, so a splice stream's throughput is the splicer's own.

#include <grpcpp/grpcpp.h>

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>

#include "absl/time/time.h"
#include "proto/reverser/v1/gitworker.grpc.pb.h"

namespace reverser::bench {

class AcceptingGitWorker final : public reverser::v1::GitWorker::Service {
 public:
  grpc::Status Deliver(grpc::ServerContext* context,
                       grpc::ServerReaderWriter<reverser::v1::DeliveryFeedback,
                                                reverser::v1::DeliveryMessage>* stream) override;

  // Waits until `events` live events (in total) have arrived, or `timeout` passes.
  bool WaitForEvents(int64_t events, absl::Duration timeout);
  int64_t events() const;
  int64_t resyncs() const;

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  int64_t events_ = 0;
  int64_t resyncs_ = 0;
};

// Serves `service` on a free loopback port.
struct LocalGrpcServer {
  std::unique_ptr<grpc::Server> server;
  int port = 0;
  static LocalGrpcServer Start(grpc::Service* service);
};

}  // namespace reverser::bench
