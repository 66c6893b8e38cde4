#pragma once

// One replica of a scaled-out service, joined: its Lease (LeaseMember) renewed on its own thread
// and the view of its service's live members (MemberView), whose changes reach `on_change`
// (post them to the actor that owns the service's OwnershipTable; the callback must not block).
//
// The shared flags: --membership (off: a single replica that owns every unit, as before),
// --membership_namespace (where the Leases live; default $POD_NAMESPACE) and --replica_id
// (default $POD_NAME, else the host name), plus the timing flags of membership_flags.h.

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "libs/core/clock.h"
#include "libs/kube/rest_client.h"
#include "libs/membership/lease.h"
#include "libs/membership/lease_member.h"
#include "libs/membership/member_view.h"
#include "libs/membership/membership.h"
#include "libs/membership/timing.h"

namespace reverser::membership {

struct ReplicaSettings {
  bool enabled = false;
  std::string namespace_;
  std::string replica_id;
  MembershipTiming timing;

  // The identity this replica joins `service` with, advertising `address` (its gRPC address).
  MemberIdentity Identity(std::string service, std::string address) const;
};

// From the flags (and $POD_NAMESPACE / $POD_NAME). InvalidArgument naming the flag when
// membership is on and the namespace is unknown, or the timing flags break the rules.
absl::StatusOr<ReplicaSettings> ReplicaSettingsFromFlags();

class Replica {
 public:
  // Writes the Lease once (so a broken RBAC or namespace fails here, clearly), then starts the
  // renew loop and the view. `client` and `clock` must outlive it.
  static absl::StatusOr<std::unique_ptr<Replica>> Join(kube::RestClient& client,
                                                       MemberIdentity identity,
                                                       MembershipTiming timing,
                                                       const core::Clock& clock,
                                                       MembershipCallback on_change,
                                                       kube::ReflectorOptions reflector = {});
  // Stops without releasing (as a crash would).
  ~Replica();
  Replica(const Replica&) = delete;
  Replica& operator=(const Replica&) = delete;

  // Graceful leave: no more callbacks, the Lease deleted so the others see it go at once.
  absl::Status Leave();

  const std::string& id() const { return member_->identity().replica_id; }
  // Whether this replica may still act as an owner, by its own clock (LeaseMember::HeldAt).
  bool Held() const { return member_->HeldAt(clock_.Now()); }
  Membership Current() const { return view_->Current(); }
  MemberView& view() { return *view_; }
  LeaseMember& member() { return *member_; }

 private:
  Replica(const core::Clock& clock) : clock_(clock) {}

  const core::Clock& clock_;
  std::unique_ptr<LeaseMember> member_;
  std::unique_ptr<MemberView> view_;
};

}  // namespace reverser::membership
