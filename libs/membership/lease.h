#pragma once

// The Lease objects of membership (coordination.k8s.io/v1), as pure functions: their names,
// labels and annotation, the body a member writes, and the record an observer reads back.
//
// One Lease per replica per service, in the namespace the service is given:
//   metadata.name                                   <service>-<replica id>
//   metadata.labels[reverser.configbutler.ai/membership]   <service> (the view's selector)
//   metadata.annotations[reverser.configbutler.ai/grpc-address]   the replica's gRPC address
//   spec.holderIdentity        the replica id ("" = released)
//   spec.leaseDurationSeconds  MembershipTiming::lease_duration
//   spec.acquireTime           when this process first wrote the Lease (RFC 3339, microseconds)
//   spec.renewTime             the last renewal, by the member's clock (RFC 3339, microseconds)
//   spec.leaseTransitions      +1 each time the holder changes

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "libs/core/types.h"

namespace reverser::membership {

inline constexpr char kMembershipLabel[] = "reverser.configbutler.ai/membership";
inline constexpr char kAddressAnnotation[] = "reverser.configbutler.ai/grpc-address";

inline const core::GroupVersionResource& LeasesResource() {
  static const core::GroupVersionResource* gvr =
      new core::GroupVersionResource{"coordination.k8s.io", "v1", "leases"};
  return *gvr;
}

// Who a member is.
struct MemberIdentity {
  std::string service;     // a DNS-1123 label (the label value), e.g. "splicer"
  std::string replica_id;  // unique per replica, e.g. the pod name
  std::string namespace_;  // where the Leases live
  std::string address;     // the replica's gRPC address ("host:port"), may be empty

  // InvalidArgument unless the service is a DNS-1123 label, the replica id non-empty, the
  // namespace valid and the Lease name a valid object name.
  absl::Status Validate() const;
  std::string LeaseName() const;  // <service>-<replica id>
};

// `<service>-<replica id>`.
std::string LeaseNameFor(absl::string_view service, absl::string_view replica_id);
// `reverser.configbutler.ai/membership=<service>`.
std::string MembershipSelector(absl::string_view service);

// Go's metav1.MicroTime text: `2006-01-02T15:04:05.000000Z` (UTC, always six digits).
std::string FormatMicroTime(absl::Time time);
// RFC 3339 with any fraction and offset (what servers and other clients write).
absl::StatusOr<absl::Time> ParseMicroTime(absl::string_view text);

// A Lease as an observer reads it.
struct LeaseRecord {
  std::string name;
  std::string namespace_;
  std::string uid;
  std::string resource_version;
  std::string service;  // the membership label ("" if absent)
  std::string address;  // the address annotation ("" if absent)
  std::string holder;   // spec.holderIdentity ("" = released)
  int64_t lease_duration_seconds = 0;
  std::optional<absl::Time> acquire_time;
  std::optional<absl::Time> renew_time;
  std::string renew_time_text;  // as served: what tells one renewal from the next
  int64_t lease_transitions = 0;
  bool deleting = false;  // metadata.deletionTimestamp is set

  // Held: a holder, a positive duration, a renewTime, not being deleted.
  bool Held() const;
};

// InvalidArgument for anything that is not a Lease object with a name (a wrong-typed field
// included); never throws. Optional spec fields that are missing or malformed stay unset (a
// Lease written by someone else is read as far as it can be; Held() says whether it counts).
absl::StatusOr<LeaseRecord> ParseLease(const nlohmann::json& object);

// The Lease a member writes: `resource_version` "" for a create, the one read for an update.
nlohmann::json LeaseBody(const MemberIdentity& identity, int64_t lease_duration_seconds,
                         absl::Time acquire_time, absl::Time renew_time, int64_t transitions,
                         absl::string_view resource_version);

}  // namespace reverser::membership
