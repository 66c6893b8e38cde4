#pragma once

// The live members of one service, from its Leases (lease.h): a list+watch (kube::Reflector,
// label selector `reverser.configbutler.ai/membership=<service>`) on its own thread feeds a
// LivenessTracker (liveness.h: the timing rules), and a timer thread looks again when the next
// Lease would expire, so a member that stops renewing drops out without any event. Each change
// of the member set (or of an address) is published: Current() and the callback.
//
// Times are the injected clock's. The timer waits in real time for min(next expiry - now,
// max_recheck); with a fake clock call Recheck() after moving it.

#include <memory>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "libs/core/clock.h"
#include "libs/kube/reflector.h"
#include "libs/kube/rest_client.h"
#include "libs/membership/liveness.h"
#include "libs/membership/membership.h"
#include "libs/membership/timing.h"

namespace reverser::membership {

struct MemberViewOptions {
  std::string service;      // whose Leases
  std::string namespace_;   // where they live
  MembershipTiming timing;  // grace is what the view uses
  absl::Duration max_recheck = absl::Seconds(1);
  // Passed to the reflector (tests: short watches, an injected sleeper).
  kube::ReflectorOptions reflector;
};

class MemberView final : public MembershipSource {
 public:
  // InvalidArgument for an invalid service, namespace or timing. `client` and `clock` must
  // outlive it; `on_change` may be empty.
  static absl::StatusOr<std::unique_ptr<MemberView>> Create(kube::RestClient& client,
                                                            MemberViewOptions options,
                                                            const core::Clock& clock,
                                                            MembershipCallback on_change = {});
  ~MemberView() override;
  MemberView(const MemberView&) = delete;
  MemberView& operator=(const MemberView&) = delete;

  void Start();
  // Stops both threads (idempotent); no callback runs after it returns.
  void Stop();

  Membership Current() const override;
  // Judges the Leases again at the clock's now and publishes a change (thread-safe).
  void Recheck();
  // Waits until `done(Current())` holds; false at the timeout.
  bool WaitFor(const std::function<bool(const Membership&)>& done, absl::Duration timeout) const;

 private:
  class Handler;
  MemberView(kube::RestClient& client, MemberViewOptions options, const core::Clock& clock,
             MembershipCallback on_change);
  // Recomputes the membership from the tracker; returns it if it changed.
  std::optional<Membership> UpdateLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Deliver(std::optional<Membership> changed);
  void TimerLoop();

  const MemberViewOptions options_;
  const core::Clock& clock_;
  const MembershipCallback on_change_;
  std::unique_ptr<Handler> handler_;
  std::unique_ptr<kube::Reflector> reflector_;

  mutable absl::Mutex mu_;
  LivenessTracker tracker_ ABSL_GUARDED_BY(mu_);
  Membership current_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool wake_ ABSL_GUARDED_BY(mu_) = false;  // the next expiry may have moved

  // Serializes callbacks, in generation order.
  absl::Mutex deliver_mu_;
  int64_t delivered_generation_ ABSL_GUARDED_BY(deliver_mu_) = 0;
  bool delivering_stopped_ ABSL_GUARDED_BY(deliver_mu_) = false;

  std::thread reflector_thread_;
  std::thread timer_thread_;
};

}  // namespace reverser::membership
