#include "services/splicer/delivery_client.h"

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "libs/core/refusal_text.h"
#include "libs/runtime/log.h"

namespace reverser::splicer {

std::string StreamKey(const reverser::v1::GitTargetRef& target, const reverser::v1::Claim& claim) {
  const auto& gvr = claim.type().gvr();
  std::string scope = claim.scope().has_namespace_()
                          ? absl::StrCat("ns:", claim.scope().namespace_())
                          : std::string("cluster");
  return absl::StrCat(target.uid(), "|", gvr.group(), "/", gvr.resource(), "|", scope);
}

grpc::ChannelArguments GitworkerChannelArguments(const std::string& tls_server_name,
                                                 int max_message_bytes) {
  grpc::ChannelArguments args;
  args.SetMaxSendMessageSize(max_message_bytes);
  args.SetMaxReceiveMessageSize(max_message_bytes);
  if (!tls_server_name.empty()) args.SetSslTargetNameOverride(tls_server_name);
  return args;
}

DeliveryClient::DeliveryClient(std::string gitworker_address, size_t max_in_flight,
                               std::shared_ptr<grpc::ChannelCredentials> credentials,
                               std::string tls_server_name)
    : address_(std::move(gitworker_address)),
      credentials_(std::move(credentials)),
      tls_server_name_(std::move(tls_server_name)),
      max_in_flight_(max_in_flight) {}

DeliveryClient::~DeliveryClient() { Stop(); }

void DeliveryClient::Start() {
  thread_ = std::thread([this] { Run(); });
}

void DeliveryClient::Stop() {
  stopping_ = true;
  {
    std::lock_guard lock(mu_);
    if (context_ != nullptr) context_->TryCancel();
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void DeliveryClient::Subscribe(const std::string& key, DeliverySubscriber* subscriber) {
  std::lock_guard lock(mu_);
  subscribers_[key] = subscriber;
}

void DeliveryClient::Unsubscribe(const std::string& key) {
  std::lock_guard dispatch(dispatch_mu_);
  std::lock_guard lock(mu_);
  subscribers_.erase(key);
}

bool DeliveryClient::WaitConnected(absl::Duration timeout) {
  std::unique_lock lock(mu_);
  return cv_.wait_for(lock, absl::ToChronoMilliseconds(timeout), [&] {
    return ready_.load() || stopping_.load();
  }) && ready_.load();
}

absl::Status DeliveryClient::Send(reverser::v1::DeliveryMessage message, absl::Duration timeout) {
  std::unique_lock lock(mu_);
  bool has_credit = cv_.wait_for(lock, absl::ToChronoMilliseconds(timeout), [&] {
    return stopping_ || !connected_ || next_sequence_ - 1 - accepted_sequence_ < max_in_flight_;
  });
  if (stopping_) return absl::CancelledError("delivery client stopping");
  if (!connected_ || stream_ == nullptr) return absl::UnavailableError("gitworker stream is down");
  if (!has_credit) return absl::DeadlineExceededError("gitworker did not accept in time");
  message.set_sequence(next_sequence_++);
  auto* stream = stream_;
  std::lock_guard write_lock(write_mu_);
  lock.unlock();
  if (!stream->Write(message)) return absl::UnavailableError("gitworker stream broke");
  return absl::OkStatus();
}

void DeliveryClient::Reader(grpc::ClientReaderWriter<reverser::v1::DeliveryMessage,
                                                     reverser::v1::DeliveryFeedback>* stream) {
  reverser::v1::DeliveryFeedback feedback;
  while (stream->Read(&feedback)) {
    if (feedback.has_ack()) {
      // Held across the call: Unsubscribe waits for it, so an ack never reaches a stream that
      // is being destroyed.
      std::lock_guard dispatch(dispatch_mu_);
      DeliverySubscriber* subscriber = nullptr;
      {
        std::lock_guard lock(mu_);
        auto it = subscribers_.find(StreamKey(feedback.ack().target(), feedback.ack().claim()));
        if (it != subscribers_.end()) subscriber = it->second;
      }
      if (subscriber != nullptr) subscriber->OnAck(feedback.ack());
    } else if (feedback.payload_case() == reverser::v1::DeliveryFeedback::kAcceptedSequence) {
      std::lock_guard lock(mu_);
      accepted_sequence_ = std::max(accepted_sequence_, feedback.accepted_sequence());
      cv_.notify_all();
    } else if (feedback.payload_case() == reverser::v1::DeliveryFeedback::kRefusal) {
      const auto& refusal = feedback.refusal();
      runtime::LogWarning(
          "gitworker refused",
          {{"target", absl::StrCat(refusal.target().namespace_(), "/", refusal.target().name())},
           {"subject", core::RefusedSubjectText(refusal)},
           {"reason", core::RefusalReasonName(refusal.reason())},
           {"message", refusal.message()}});
      if (on_refusal_) on_refusal_(feedback);
    } else if (feedback.payload_case() == reverser::v1::DeliveryFeedback::kRefusedFiles ||
               feedback.payload_case() == reverser::v1::DeliveryFeedback::kPathRefusal ||
               feedback.payload_case() == reverser::v1::DeliveryFeedback::kResyncRequest ||
               feedback.payload_case() == reverser::v1::DeliveryFeedback::kNotOwner) {
      if (on_refusal_) on_refusal_(feedback);
    }
  }
}

void DeliveryClient::Run() {
  auto channel = grpc::CreateCustomChannel(address_, credentials_,
                                           GitworkerChannelArguments(tls_server_name_));
  auto stub = reverser::v1::GitWorker::NewStub(channel);
  absl::Duration backoff = absl::Milliseconds(100);
  while (!stopping_) {
    grpc::ClientContext context;
    auto stream = stub->Deliver(&context);
    {
      std::lock_guard lock(mu_);
      if (stopping_) break;
      context_ = &context;
      stream_ = stream.get();
      next_sequence_ = 1;
      accepted_sequence_ = 0;
      connected_ = true;
    }
    backoff = absl::Milliseconds(100);
    // Configs first, before any subscriber learns of the new generation.
    if (on_connected_) on_connected_();
    generation_++;
    {
      std::lock_guard lock(mu_);
      ready_ = true;
    }
    cv_.notify_all();
    runtime::LogInfo("delivering to gitworker", {{"gitworker", address_}});
    Reader(stream.get());
    {
      std::lock_guard lock(mu_);
      ready_ = false;
      connected_ = false;
      stream_ = nullptr;
      context_ = nullptr;
    }
    cv_.notify_all();
    {
      std::lock_guard write_lock(write_mu_);  // no writer still inside the stream
    }
    grpc::Status status = stream->Finish();
    if (stopping_) break;
    runtime::LogWarning("gitworker stream ended; reconnecting",
                        {{"gitworker", address_}, {"error", status.error_message()}});
    absl::SleepFor(backoff);
    backoff = std::min(backoff * 2, absl::Seconds(5));
  }
}

}  // namespace reverser::splicer
