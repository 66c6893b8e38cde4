#pragma once

// An injectable clock, so timers (settle windows, grace periods, commit windows) are testable
// without sleeping.

#include <mutex>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

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
    absl::MutexLock lock(&mu_);
    return now_;
  }
  void Advance(absl::Duration d) {
    absl::MutexLock lock(&mu_);
    now_ += d;
  }
  void Set(absl::Time t) {
    absl::MutexLock lock(&mu_);
    now_ = t;
  }

 private:
  mutable absl::Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_);
};

inline Clock& Clock::Real() {
  static RealClock clock;
  return clock;
}

}  // namespace reverser::core
