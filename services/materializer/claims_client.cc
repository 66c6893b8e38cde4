#include "services/materializer/claims_client.h"

#include "absl/time/clock.h"
#include "libs/runtime/log.h"

namespace reverser::materializer {

ClaimsClient::ClaimsClient(std::string catalog_address, std::string subscriber, Callback on_claims)
    : address_(std::move(catalog_address)),
      subscriber_(std::move(subscriber)),
      on_claims_(std::move(on_claims)) {}

ClaimsClient::~ClaimsClient() { Stop(); }

void ClaimsClient::Start() {
  thread_ = std::thread([this] { Run(); });
}

void ClaimsClient::Stop() {
  stopping_ = true;
  {
    std::lock_guard lock(mu_);
    if (active_ != nullptr) active_->TryCancel();
  }
  if (thread_.joinable()) thread_.join();
}

void ClaimsClient::Run() {
  auto channel = grpc::CreateChannel(address_, grpc::InsecureChannelCredentials());
  auto stub = reverser::v1::Catalog::NewStub(channel);
  uint64_t known_generation = 0;
  absl::Duration backoff = absl::Milliseconds(200);
  while (!stopping_) {
    grpc::ClientContext context;
    {
      std::lock_guard lock(mu_);
      if (stopping_) break;
      active_ = &context;
    }
    reverser::v1::WatchClaimsRequest request;
    request.set_known_generation(known_generation);
    request.set_subscriber(subscriber_);
    auto reader = stub->WatchClaims(&context, request);
    reverser::v1::ClaimSet set;
    while (reader->Read(&set)) {
      if (!connected_.exchange(true)) {
        runtime::LogInfo("following catalog claims", {{"catalog", address_}});
      }
      backoff = absl::Milliseconds(200);
      known_generation = set.generation();
      on_claims_(set);
    }
    grpc::Status status = reader->Finish();
    {
      std::lock_guard lock(mu_);
      active_ = nullptr;
    }
    connected_ = false;
    if (stopping_) break;
    runtime::LogWarning("catalog claim stream ended; reconnecting",
                        {{"catalog", address_}, {"error", status.error_message()}});
    absl::SleepFor(backoff);
    backoff = std::min(backoff * 2, absl::Seconds(10));
  }
}

}  // namespace reverser::materializer
