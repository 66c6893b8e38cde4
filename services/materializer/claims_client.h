#pragma once

// Follows the catalog's claim set (Catalog.WatchClaims) on its own thread and hands every set to
// a callback; reconnects with backoff when the stream ends or the catalog is unreachable.

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "proto/reverser/v1/catalog.grpc.pb.h"

namespace reverser::materializer {

class ClaimsClient {
 public:
  using Callback = std::function<void(const reverser::v1::ClaimSet&)>;
  ClaimsClient(std::string catalog_address, std::string subscriber, Callback on_claims);
  ~ClaimsClient();

  void Start();
  void Stop();
  bool connected() const { return connected_.load(); }

 private:
  void Run();

  std::string address_;
  std::string subscriber_;
  Callback on_claims_;
  std::thread thread_;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> connected_{false};
  std::mutex mu_;
  grpc::ClientContext* active_ = nullptr;  // guarded by mu_, to cancel on Stop()
};

}  // namespace reverser::materializer
