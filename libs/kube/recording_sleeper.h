#pragma once

// A Sleeper for tests: records every requested delay and returns at once (false when the wait
// was cancelled), so backoff and Retry-After are asserted without sleeping.

#include <mutex>
#include <vector>

#include "libs/kube/rest_client.h"

namespace reverser::kube::testing {

class RecordingSleeper final : public Sleeper {
 public:
  bool SleepFor(absl::Duration d, CancelToken* cancel) override {
    std::lock_guard lock(mu_);
    delays_.push_back(d);
    return cancel == nullptr || !cancel->cancelled();
  }
  std::vector<absl::Duration> delays() {
    std::lock_guard lock(mu_);
    return delays_;
  }

 private:
  std::mutex mu_;
  std::vector<absl::Duration> delays_;
};

}  // namespace reverser::kube::testing
