#include "libs/membership/lease_member.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "libs/core/status.h"
#include "libs/kube/api_error.h"

namespace reverser::membership {

absl::StatusOr<std::unique_ptr<LeaseMember>> LeaseMember::Create(kube::RestClient& client,
                                                                 LeaseMemberOptions options,
                                                                 const core::Clock& clock) {
  RETURN_IF_ERROR(options.identity.Validate());
  RETURN_IF_ERROR(options.timing.Validate());
  return std::unique_ptr<LeaseMember>(new LeaseMember(client, std::move(options), clock));
}

LeaseMember::LeaseMember(kube::RestClient& client, LeaseMemberOptions options,
                         const core::Clock& clock)
    : client_(client), options_(std::move(options)), clock_(clock) {}

LeaseMember::~LeaseMember() { Stop(/*release=*/false).IgnoreError(); }

absl::Status LeaseMember::Renew() {
  absl::MutexLock io(&io_mu_);
  const absl::Time start = clock_.Now();
  absl::Status s = RenewLocked(start);
  absl::MutexLock lock(&mu_);
  if (s.ok()) {
    ++status_.renewals;
    status_.last_renewed = start;
    status_.resource_version = lease_.has_value() ? lease_->resource_version : "";
    status_.released = false;
  } else {
    ++status_.failures;
    status_.last_error = s;
  }
  return s;
}

absl::Status LeaseMember::ReadLocked() {
  absl::StatusOr<nlohmann::json> got =
      client_.Get(LeasesResource(), options_.identity.namespace_, options_.identity.LeaseName());
  if (kube::IsApiNotFound(got.status())) {
    lease_.reset();
    return absl::OkStatus();
  }
  RETURN_IF_ERROR(got.status());
  ASSIGN_OR_RETURN(LeaseRecord record, ParseLease(*got));
  lease_ = std::move(record);
  return absl::OkStatus();
}

absl::Status LeaseMember::WriteLocked(absl::Time now) {
  const MemberIdentity& id = options_.identity;
  const bool ours = lease_.has_value() && lease_->holder == id.replica_id;
  // acquireTime: when this process first held the Lease (a restart acquires again).
  const absl::Time acquire = acquired_.value_or(now);
  int64_t transitions = lease_.has_value() ? lease_->lease_transitions : 0;
  if (lease_.has_value() && !ours) ++transitions;
  nlohmann::json body = LeaseBody(id, options_.timing.LeaseDurationSeconds(), acquire, now,
                                  transitions, lease_.has_value() ? lease_->resource_version : "");
  kube::WriteOptions write{.field_manager = options_.field_manager};
  absl::StatusOr<nlohmann::json> written =
      lease_.has_value() ? client_.Update(LeasesResource(), id.namespace_, body, write)
                         : client_.Create(LeasesResource(), id.namespace_, body, write);
  RETURN_IF_ERROR(written.status());
  ASSIGN_OR_RETURN(LeaseRecord record, ParseLease(*written));
  lease_ = std::move(record);
  acquired_ = acquire;
  return absl::OkStatus();
}

absl::Status LeaseMember::RenewLocked(absl::Time now) {
  if (!lease_.has_value()) RETURN_IF_ERROR(ReadLocked());
  absl::Status s = WriteLocked(now);
  if (s.ok()) return s;
  // Someone else wrote it (conflict), it vanished (update: NotFound) or it appeared (create:
  // AlreadyExists): read it again and try once more.
  if (kube::IsApiConflict(s) || kube::IsApiNotFound(s) || kube::IsApiAlreadyExists(s)) {
    RETURN_IF_ERROR(ReadLocked());
    return core::Annotate(WriteLocked(now), "renewing Lease after re-reading it");
  }
  return core::Annotate(s, absl::StrCat("renewing Lease ", options_.identity.namespace_, "/",
                                        options_.identity.LeaseName()));
}

absl::Status LeaseMember::ReleaseLocked() {
  if (!lease_.has_value()) RETURN_IF_ERROR(ReadLocked());
  if (!lease_.has_value() || lease_->holder != options_.identity.replica_id) {
    lease_.reset();
    return absl::OkStatus();  // nothing of ours to release
  }
  kube::DeleteOptions del;
  del.precondition_uid = lease_->uid;
  absl::StatusOr<nlohmann::json> deleted = client_.Delete(
      LeasesResource(), options_.identity.namespace_, options_.identity.LeaseName(), del);
  lease_.reset();
  acquired_.reset();
  // Gone already, or replaced by another incarnation (uid precondition: 409): not ours.
  if (kube::IsApiNotFound(deleted.status()) || kube::IsApiConflict(deleted.status())) {
    return absl::OkStatus();
  }
  return core::Annotate(deleted.status(), "releasing Lease");
}

void LeaseMember::Start() {
  {
    absl::MutexLock lock(&mu_);
    if (thread_.joinable() || stopping_) return;
  }
  thread_ = std::thread([this] { Loop(); });
}

void LeaseMember::Loop() {
  while (true) {
    const absl::Status s = Renew();
    const absl::Duration wait =
        s.ok() ? options_.timing.renew_period : options_.timing.renew_period / 4;
    absl::MutexLock lock(&mu_);
    if (mu_.AwaitWithTimeout(absl::Condition(&stopping_), wait)) return;
  }
}

absl::Status LeaseMember::Stop(bool release) {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
  {
    absl::MutexLock lock(&mu_);
    stopping_ = false;  // Start may run the loop again
  }
  if (!release) return absl::OkStatus();
  absl::MutexLock io(&io_mu_);
  absl::Status s = ReleaseLocked();
  absl::MutexLock lock(&mu_);
  if (s.ok()) {
    status_.released = true;
    status_.last_renewed.reset();
  }
  return s;
}

bool LeaseMember::HeldAt(absl::Time now) const {
  absl::MutexLock lock(&mu_);
  return !status_.released && status_.last_renewed.has_value() &&
         now < *status_.last_renewed + options_.timing.renew_deadline;
}

LeaseMemberStatus LeaseMember::status() const {
  absl::MutexLock lock(&mu_);
  return status_;
}

bool LeaseMember::WaitForRenewals(int64_t n, absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  auto done = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return status_.renewals >= n; };
  return mu_.AwaitWithTimeout(absl::Condition(&done), timeout);
}

}  // namespace reverser::membership
