#pragma once

// The splicer's side of GitWorker.Deliver: one bidirectional stream to the gitworker, with
// credit-based back-pressure (at most `max_in_flight` messages the gitworker has not yet
// buffered) and acks routed to the splice stream they belong to. When the stream breaks, every
// subscriber is told to restart from its persisted cursor (delivery is at least once; the
// gitworker's writes are idempotent), after `on_connected` re-sent the target configs.

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "proto/reverser/v1/gitworker.grpc.pb.h"

namespace reverser::splicer {

// The channel arguments of a mesh client dialing a gitworker: `tls_server_name`, when not
// empty, is the name its certificate is checked against (SetSslTargetNameOverride).
grpc::ChannelArguments GitworkerChannelArguments(const std::string& tls_server_name,
                                                 int max_message_bytes = 512 * 1024 * 1024);

// "targetUID|group/resource|scope": the routing key of acks.
std::string StreamKey(const reverser::v1::GitTargetRef& target, const reverser::v1::Claim& claim);

class DeliverySubscriber {
 public:
  virtual ~DeliverySubscriber() = default;
  virtual void OnAck(const reverser::v1::DeliveryAck& ack) = 0;
};

class DeliveryClient {
 public:
  // `credentials`: the mesh's (runtime::MeshChannelCredentials); the gitworker lets only a
  // splicer's certificate call Deliver. `tls_server_name` (--gitworker_tls_server_name): the
  // name the gitworker's certificate must carry instead of the host dialed (a replica is dialed
  // by its pod IP, its certificate names the Service); empty: the host dialed.
  DeliveryClient(std::string gitworker_address, size_t max_in_flight,
                 std::shared_ptr<grpc::ChannelCredentials> credentials,
                 std::string tls_server_name = "");
  ~DeliveryClient();

  // Called (on the connection thread) each time a stream is established, before anything else
  // is sent on it: re-send target configs here.
  void SetOnConnected(std::function<void()> on_connected) {
    on_connected_ = std::move(on_connected);
  }
  // Called (on the reader thread) with every `refusal`, `refused_files`, `path_refusal`,
  // `resync_request` and `not_owner` feedback (what the target manager acts on). Set before
  // Start().
  void SetOnRefusal(std::function<void(const reverser::v1::DeliveryFeedback&)> on_refusal) {
    on_refusal_ = std::move(on_refusal);
  }

  void Start();
  void Stop();

  // Sends one message (the sequence is assigned here). Blocks while credit is exhausted, up to
  // `timeout`. Unavailable when the stream is down or broke: the caller restarts from its cursor
  // once `generation()` changed.
  absl::Status Send(reverser::v1::DeliveryMessage message,
                    absl::Duration timeout = absl::Seconds(30));

  void Subscribe(const std::string& key, DeliverySubscriber* subscriber);
  // Once it returns, `key`'s subscriber is not called again (an ack being handed to it is done).
  void Unsubscribe(const std::string& key);

  // Bumped on every (re)connect; a subscriber that sent on an older generation restarts.
  uint64_t generation() const { return generation_.load(); }
  // True once a stream is up, its configs are re-sent and its generation is published: only
  // then may subscribers send (a session started earlier would carry the old generation and
  // could reach the gitworker before the target config).
  bool connected() const { return ready_.load(); }
  // Waits until connected (or timeout/stop).
  bool WaitConnected(absl::Duration timeout);

 private:
  void Run();
  void Reader(grpc::ClientReaderWriter<reverser::v1::DeliveryMessage,
                                       reverser::v1::DeliveryFeedback>* stream);

  std::string address_;
  std::shared_ptr<grpc::ChannelCredentials> credentials_;
  std::string tls_server_name_;
  size_t max_in_flight_;
  std::function<void()> on_connected_;
  std::function<void(const reverser::v1::DeliveryFeedback&)> on_refusal_;
  std::thread thread_;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> connected_{false};  // the stream is open (on_connected may send)
  std::atomic<bool> ready_{false};      // and subscribers may send: see connected()
  std::atomic<uint64_t> generation_{0};

  std::mutex mu_;
  std::condition_variable cv_;
  grpc::ClientContext* context_ = nullptr;  // the live stream's context (to cancel)
  grpc::ClientReaderWriter<reverser::v1::DeliveryMessage, reverser::v1::DeliveryFeedback>* stream_ =
      nullptr;
  uint64_t next_sequence_ = 1;
  uint64_t accepted_sequence_ = 0;
  std::map<std::string, DeliverySubscriber*> subscribers_;
  std::mutex write_mu_;  // one writer at a time on the stream
  // Held while an ack is handed to its subscriber (taken before mu_; never while a subscriber
  // holds a lock of its own that OnAck takes).
  std::mutex dispatch_mu_;
};

}  // namespace reverser::splicer
