#pragma once

// One replica's membership: its Lease (lease.h), created and renewed every renew period on its
// own thread, deleted on a graceful stop so the others see it leave at once.
//
// Renewal is an update with the resourceVersion last read (optimistic concurrency); a conflict
// or a Lease that vanished is re-read (or re-created) and tried once more. The Lease is the
// replica's own by name: whatever holder it names is overwritten (replica ids are unique, e.g.
// pod names; two processes sharing one id would both count as that member, and only the
// epochs of ownership_store.h keep them from writing over each other).
//
// HeldAt(now) is the member's own judgement, by its clock: true while its last successful
// renewal started less than renew_deadline ago. renew_deadline < lease_duration, so a member
// that cannot renew stops counting itself in before any observer counts it out (timing.h).

#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "libs/core/clock.h"
#include "libs/kube/rest_client.h"
#include "libs/membership/lease.h"
#include "libs/membership/timing.h"

namespace reverser::membership {

struct LeaseMemberOptions {
  MemberIdentity identity;
  MembershipTiming timing;
  std::string field_manager = "reverser-membership";
};

struct LeaseMemberStatus {
  int64_t renewals = 0;  // successful writes of the Lease
  int64_t failures = 0;  // renewals that failed
  absl::Status last_error;
  std::optional<absl::Time> last_renewed;  // the start of the last successful renewal
  std::string resource_version;            // of the Lease last written
  bool released = false;
};

class LeaseMember {
 public:
  // InvalidArgument for an invalid identity or timing. `client` and `clock` must outlive it.
  static absl::StatusOr<std::unique_ptr<LeaseMember>> Create(kube::RestClient& client,
                                                             LeaseMemberOptions options,
                                                             const core::Clock& clock);
  // Stops the loop without releasing (as a crash would: the Lease expires on its own).
  ~LeaseMember();
  LeaseMember(const LeaseMember&) = delete;
  LeaseMember& operator=(const LeaseMember&) = delete;

  // Creates or renews the Lease once, now (blocking I/O; any thread, one renewal at a time).
  absl::Status Renew();
  // Renews at once and then every renew period (retrying sooner, every renew_period / 4, after
  // a failure), on its own thread. Idempotent.
  void Start();
  // Stops the loop; with `release`, deletes the Lease (only the one this member wrote: the
  // deletion is preconditioned on its uid). NotFound counts as released.
  absl::Status Stop(bool release = true);

  // The member's own judgement (see above).
  bool HeldAt(absl::Time now) const;
  LeaseMemberStatus status() const;
  const MemberIdentity& identity() const { return options_.identity; }
  // Waits until at least `n` renewals succeeded; false at the timeout.
  bool WaitForRenewals(int64_t n, absl::Duration timeout) const;

 private:
  LeaseMember(kube::RestClient& client, LeaseMemberOptions options, const core::Clock& clock);
  absl::Status RenewLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(io_mu_);
  absl::Status WriteLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(io_mu_);
  absl::Status ReadLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(io_mu_);
  absl::Status ReleaseLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(io_mu_);
  void Loop();

  kube::RestClient& client_;
  const LeaseMemberOptions options_;
  const core::Clock& clock_;

  // Serializes the I/O; what the last read or write returned.
  absl::Mutex io_mu_;
  std::optional<LeaseRecord> lease_ ABSL_GUARDED_BY(io_mu_);    // nullopt: not read yet / gone
  std::optional<absl::Time> acquired_ ABSL_GUARDED_BY(io_mu_);  // this process's acquireTime

  mutable absl::Mutex mu_;
  LeaseMemberStatus status_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // started and joined by the owner's thread
};

}  // namespace reverser::membership
