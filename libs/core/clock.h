#pragma once

// An injectable clock, so timers (settle windows, grace periods, commit windows) are testable
// without sleeping.

#include <mutex>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace reverser::core {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual absl::Time Now() const = 0;
  // The process-wide real clock.
  static Clock& Real();
};

class RealClock final : public Clock {
 public:
  absl::Time Now() const override { return absl::Now(); }
};

// A clock that moves only when told to.
class FakeClock final : public Clock {
 public:
  explicit FakeClock(absl::Time start = absl::FromUnixSeconds(1'700'000'000)) : now_(start) {}
  absl::Time Now() const override {
    std::lock_guard lock(mu_);
    return now_;
  }
  void Advance(absl::Duration d) {
    std::lock_guard lock(mu_);
    now_ += d;
  }
  void Set(absl::Time t) {
    std::lock_guard lock(mu_);
    now_ = t;
  }

 private:
  mutable std::mutex mu_;
  absl::Time now_;
};

inline Clock& Clock::Real() {
  static RealClock clock;
  return clock;
}

}  // namespace reverser::core
