#include "services/catalog/commit_request_tracker.h"

#include <set>

#include "services/catalog/objects.h"

namespace reverser::catalog {

void CommitRequestTracker::Replace(const std::vector<nlohmann::json>& objects) {
  std::set<std::string> listed;
  for (const nlohmann::json& object : objects) {
    listed.insert(UidOf(object));
    Observe(object);
  }
  std::erase_if(requests_, [&](const auto& entry) { return listed.count(entry.first) == 0; });
}

void CommitRequestTracker::Observe(const nlohmann::json& object) {
  const std::string uid = UidOf(object);
  if (uid.empty()) return;  // nothing could key its attachment
  if (CommitRequestTerminal(object)) {
    requests_.erase(uid);
    return;
  }
  auto [it, inserted] = requests_.try_emplace(uid);
  it->second.object = object;
  if (inserted) it->second.deadline = CommitRequestDeadline(object, clock_->Now());
}

void CommitRequestTracker::Forget(const nlohmann::json& object) { requests_.erase(UidOf(object)); }

std::vector<CommitRequestAction> CommitRequestTracker::TakeDue() {
  const absl::Time now = clock_->Now();
  std::vector<CommitRequestAction> due;
  for (auto& [uid, request] : requests_) {
    if (request.in_flight || request.next > now) continue;
    if (request.stage != Stage::kFinish && now >= request.deadline) {
      Finish(request, CommitRequestTimedOutStatus(request.object, request.attribution, now));
    }
    request.in_flight = true;
    due.push_back(ActionFor(uid, request, now));
  }
  return due;
}

std::optional<absl::Time> CommitRequestTracker::NextDue() const {
  std::optional<absl::Time> next;
  for (const auto& [uid, request] : requests_) {
    if (request.in_flight) continue;
    absl::Time at =
        request.stage == Stage::kFinish ? request.next : std::min(request.next, request.deadline);
    if (!next || at < *next) next = at;
  }
  return next;
}

CommitRequestAction CommitRequestTracker::ActionFor(const std::string& uid, Request& request,
                                                    absl::Time now) {
  CommitRequestAction action;
  action.uid = uid;
  action.namespace_ = StringAt(request.object, {"metadata", "namespace"});
  action.name = StringAt(request.object, {"metadata", "name"});
  switch (request.stage) {
    case Stage::kAttribute:
      action.kind = CommitRequestAction::Kind::kLookupAuthor;
      break;
    case Stage::kStamp:
      action.kind = CommitRequestAction::Kind::kWriteStatus;
      action.status = CommitRequestInProgressStatus(request.object, request.attribution, now);
      break;
    case Stage::kAttach:
      action.kind = CommitRequestAction::Kind::kAttach;
      action.attach = AttachOf(request);
      break;
    case Stage::kFinish:
      action.kind = CommitRequestAction::Kind::kWriteStatus;
      action.status = request.terminal_status;
      action.terminal = true;
      break;
  }
  return action;
}

reverser::v1::AttachCommitRequest CommitRequestTracker::AttachOf(const Request& request) const {
  reverser::v1::AttachCommitRequest attach;
  const std::string namespace_ = StringAt(request.object, {"metadata", "namespace"});
  attach.set_namespace_(namespace_);
  attach.set_name(StringAt(request.object, {"metadata", "name"}));
  attach.set_uid(UidOf(request.object));
  if (request.attribution.author) {
    attach.mutable_author()->set_username(*request.attribution.author);
    attach.mutable_author()->set_resolution("admission");
  } else {
    attach.mutable_author()->set_resolution("absent");
  }
  attach.mutable_target()->set_namespace_(namespace_);
  attach.mutable_target()->set_name(StringAt(request.object, {"spec", "targetRef", "name"}));
  attach.set_message(StringAt(request.object, {"spec", "message"}));
  const nlohmann::json& delay = NodeAt(request.object, {"spec", "closeDelaySeconds"});
  if (delay.is_number_integer() && delay.get<int64_t>() > 0) {
    attach.set_close_delay_seconds(
        static_cast<uint32_t>(std::min<int64_t>(delay.get<int64_t>(), 300)));
  }
  return attach;
}

void CommitRequestTracker::Finish(Request& request, nlohmann::json status) {
  request.stage = Stage::kFinish;
  request.terminal_status = std::move(status);
  request.next = absl::InfinitePast();
}

void CommitRequestTracker::AuthorLookedUp(
    const std::string& uid, const absl::StatusOr<std::optional<std::string>>& author) {
  auto it = requests_.find(uid);
  if (it == requests_.end()) return;
  Request& request = it->second;
  request.in_flight = false;
  if (!author.ok() && ++request.author_lookups < kMaxAuthorLookups) {
    request.next = clock_->Now() + commit_request::kPollInterval;
    return;
  }
  if (author.ok()) request.attribution.author = *author;
  request.stage = Stage::kStamp;
  request.next = absl::InfinitePast();
}

void CommitRequestTracker::StatusWritten(const std::string& uid, bool terminal,
                                         WriteResult result) {
  auto it = requests_.find(uid);
  if (it == requests_.end()) return;
  Request& request = it->second;
  request.in_flight = false;
  if (result == WriteResult::kGone) {
    requests_.erase(it);
    return;
  }
  if (result == WriteResult::kFailed) {
    request.next = clock_->Now() + commit_request::kPollInterval;
    return;
  }
  if (terminal) {
    requests_.erase(it);
    return;
  }
  if (request.stage == Stage::kStamp) request.stage = Stage::kAttach;
  request.next = absl::InfinitePast();
}

void CommitRequestTracker::Attached(const std::string& uid,
                                    const absl::StatusOr<reverser::v1::FinalizeResult>& result) {
  auto it = requests_.find(uid);
  if (it == requests_.end()) return;
  Request& request = it->second;
  request.in_flight = false;
  if (request.stage != Stage::kAttach) return;
  if (result.ok() && result->resolved()) {
    Finish(request,
           CommitRequestOutcomeStatus(request.object, request.attribution, *result, clock_->Now()));
    return;
  }
  request.next = clock_->Now() + commit_request::kPollInterval;
}

}  // namespace reverser::catalog
