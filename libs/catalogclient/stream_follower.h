#pragma once

// Follows one of the catalog's server streams (WatchClaims, WatchTables) on its own thread,
// handing every message to a callback, reconnecting with backoff when the stream ends or the
// catalog is unreachable, and resuming with the last generation seen.

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "absl/time/clock.h"
#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "libs/runtime/log.h"

namespace reverser::catalogclient {

template <typename Message>
class StreamFollower {
 public:
  // Opens the stream for `context`, resuming after `known_generation`.
  using Open = std::function<std::unique_ptr<grpc::ClientReader<Message>>(
      grpc::ClientContext* context, uint64_t known_generation)>;
  using Callback = std::function<void(const Message&)>;

  StreamFollower(std::string name, Open open, Callback on_message)
      : name_(std::move(name)), open_(std::move(open)), on_message_(std::move(on_message)) {}
  ~StreamFollower() { Stop(); }
  StreamFollower(const StreamFollower&) = delete;
  StreamFollower& operator=(const StreamFollower&) = delete;

  void Start() {
    thread_ = std::thread([this] { Run(); });
  }

  void Stop() {
    stopping_ = true;
    {
      absl::MutexLock lock(&mu_);
      if (active_ != nullptr) active_->TryCancel();
    }
    if (thread_.joinable()) thread_.join();
  }

  bool connected() const { return connected_.load(); }

 private:
  void Run() {
    uint64_t known_generation = 0;
    absl::Duration backoff = absl::Milliseconds(200);
    while (!stopping_) {
      grpc::ClientContext context;
      {
        absl::MutexLock lock(&mu_);
        if (stopping_) break;
        active_ = &context;
      }
      auto reader = open_(&context, known_generation);
      Message message;
      while (reader->Read(&message)) {
        if (!connected_.exchange(true)) runtime::LogInfo("following catalog", {{"stream", name_}});
        backoff = absl::Milliseconds(200);
        known_generation = message.generation();
        on_message_(message);
      }
      grpc::Status status = reader->Finish();
      {
        absl::MutexLock lock(&mu_);
        active_ = nullptr;
      }
      connected_ = false;
      if (stopping_) break;
      runtime::LogWarning("catalog stream ended; reconnecting",
                          {{"stream", name_}, {"error", status.error_message()}});
      absl::SleepFor(backoff);
      backoff = std::min(backoff * 2, absl::Seconds(10));
    }
  }

  std::string name_;
  Open open_;
  Callback on_message_;
  std::thread thread_;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> connected_{false};
  absl::Mutex mu_;
  grpc::ClientContext* active_ ABSL_GUARDED_BY(mu_) = nullptr;
};

}  // namespace reverser::catalogclient
