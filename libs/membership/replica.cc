#include "libs/membership/replica.h"

#include <unistd.h>

#include <cstdlib>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "libs/core/status.h"
#include "libs/membership/membership_flags.h"

ABSL_FLAG(bool, membership, false,
          "Share this service's units with its other replicas through Kubernetes Leases. Off: "
          "a single replica owns every unit.");
ABSL_FLAG(std::string, membership_namespace, "",
          "Namespace of the replicas' Leases (default: $POD_NAMESPACE).");
ABSL_FLAG(std::string, replica_id, "",
          "This replica's id, unique per service (default: $POD_NAME, else the host name).");

namespace reverser::membership {
namespace {

std::string Env(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? "" : value;
}

std::string HostName() {
  char buffer[256] = {};
  if (gethostname(buffer, sizeof(buffer) - 1) != 0) return "";
  return buffer;
}

}  // namespace

MemberIdentity ReplicaSettings::Identity(std::string service, std::string address) const {
  MemberIdentity identity;
  identity.service = std::move(service);
  identity.replica_id = replica_id;
  identity.namespace_ = namespace_;
  identity.address = std::move(address);
  return identity;
}

absl::StatusOr<ReplicaSettings> ReplicaSettingsFromFlags() {
  ReplicaSettings settings;
  settings.enabled = absl::GetFlag(FLAGS_membership);
  settings.namespace_ = absl::GetFlag(FLAGS_membership_namespace);
  if (settings.namespace_.empty()) settings.namespace_ = Env("POD_NAMESPACE");
  settings.replica_id = absl::GetFlag(FLAGS_replica_id);
  if (settings.replica_id.empty()) settings.replica_id = Env("POD_NAME");
  if (settings.replica_id.empty()) settings.replica_id = HostName();
  ASSIGN_OR_RETURN(settings.timing, MembershipTimingFromFlags());
  if (settings.enabled && settings.namespace_.empty()) {
    return absl::InvalidArgumentError(
        "--membership needs --membership_namespace (or $POD_NAMESPACE)");
  }
  if (settings.enabled && settings.replica_id.empty()) {
    return absl::InvalidArgumentError("--membership needs --replica_id (or $POD_NAME)");
  }
  return settings;
}

absl::StatusOr<std::unique_ptr<Replica>> Replica::Join(
    kube::RestClient& client, MemberIdentity identity, MembershipTiming timing,
    const core::Clock& clock, MembershipCallback on_change, kube::ReflectorOptions reflector) {
  std::unique_ptr<Replica> replica(new Replica(clock));
  MemberViewOptions view_options;
  view_options.service = identity.service;
  view_options.namespace_ = identity.namespace_;
  view_options.timing = timing;
  view_options.reflector = std::move(reflector);
  LeaseMemberOptions member_options;
  member_options.identity = std::move(identity);
  member_options.timing = timing;
  ASSIGN_OR_RETURN(replica->member_, LeaseMember::Create(client, member_options, clock));
  if (absl::Status s = replica->member_->Renew(); !s.ok()) {
    return core::Annotate(s, absl::StrCat("writing the Lease ", member_options.identity.LeaseName(),
                                          " in ", member_options.identity.namespace_));
  }
  ASSIGN_OR_RETURN(replica->view_,
                   MemberView::Create(client, view_options, clock, std::move(on_change)));
  replica->member_->Start();
  replica->view_->Start();
  return replica;
}

Replica::~Replica() {
  if (view_) view_->Stop();
  if (member_) (void)member_->Stop(/*release=*/false);
}

absl::Status Replica::Leave() {
  view_->Stop();
  return member_->Stop(/*release=*/true);
}

}  // namespace reverser::membership
