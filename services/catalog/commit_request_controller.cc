#include "services/catalog/commit_request_controller.h"

#include "absl/strings/str_cat.h"
#include "libs/kube/api_error.h"
#include "libs/runtime/log.h"
#include "services/catalog/objects.h"

namespace reverser::catalog {

CommitRequestController::CommitRequestController(CommitRequestControllerDeps deps)
    : deps_(deps), tracker_(deps.clock) {
  kube::ReflectorOptions options;
  options.gvr = kCommitRequestGvr;
  reflector_ = std::make_unique<kube::Reflector>(*deps_.client, options, *this);
}

CommitRequestController::~CommitRequestController() { Stop(); }

void CommitRequestController::Start() {
  if (started_) return;
  started_ = true;
  worker_thread_ = std::thread([this] { Loop(); });
  watch_thread_ = std::thread([this] {
    if (absl::Status s = reflector_->Run(); !s.ok()) {
      runtime::LogError("commitrequest watch stopped", {{"error", std::string(s.message())}});
    }
  });
}

void CommitRequestController::Stop() {
  if (!started_) return;
  started_ = false;
  reflector_->Stop();
  if (watch_thread_.joinable()) watch_thread_.join();
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (worker_thread_.joinable()) worker_thread_.join();
}

void CommitRequestController::Kick() {
  absl::MutexLock lock(&mu_);
  kicked_ = true;
}

void CommitRequestController::OnReplaced(std::vector<nlohmann::json> objects,
                                         const std::string& /*resource_version*/,
                                         kube::SyncReason /*reason*/) {
  Post(Replace{std::move(objects)});
}

void CommitRequestController::OnLiveEvent(const kube::ReflectorEvent& event) {
  switch (event.type) {
    case kube::ReflectorEventType::kAdded:
    case kube::ReflectorEventType::kModified:
      Post(Observe{event.object});
      break;
    case kube::ReflectorEventType::kDeleted:
      Post(Forget{event.object});
      break;
    default:
      break;
  }
}

void CommitRequestController::Post(Input input) {
  absl::MutexLock lock(&mu_);
  inputs_.push_back(std::move(input));
}

void CommitRequestController::Loop() {
  while (true) {
    std::deque<Input> inputs;
    {
      absl::MutexLock lock(&mu_);
      const std::optional<absl::Time> next = tracker_.NextDue();
      const absl::Duration wait =
          next ? std::max(absl::ZeroDuration(), *next - deps_.clock->Now()) : absl::Hours(1);
      mu_.AwaitWithTimeout(
          absl::Condition(
              +[](CommitRequestController* self) ABSL_EXCLUSIVE_LOCKS_REQUIRED(self->mu_) {
                return self->stop_ || self->kicked_ || !self->inputs_.empty();
              },
              this),
          wait);
      if (stop_) return;
      kicked_ = false;
      inputs.swap(inputs_);
    }
    for (Input& input : inputs) {
      if (auto* replace = std::get_if<Replace>(&input)) {
        tracker_.Replace(replace->objects);
      } else if (auto* observe = std::get_if<Observe>(&input)) {
        tracker_.Observe(observe->object);
      } else if (auto* forget = std::get_if<Forget>(&input)) {
        tracker_.Forget(forget->object);
      }
    }
    for (const CommitRequestAction& action : tracker_.TakeDue()) Run(action);
    if (deps_.metrics != nullptr) {
      deps_.metrics
          ->GetGauge("reverser_catalog_commit_requests_in_progress",
                     "CommitRequests seen and not yet terminal.")
          .Set(static_cast<double>(tracker_.size()));
    }
  }
}

void CommitRequestController::Run(const CommitRequestAction& action) {
  const std::string object = absl::StrCat(action.namespace_, "/", action.name);
  switch (action.kind) {
    case CommitRequestAction::Kind::kLookupAuthor: {
      absl::StatusOr<std::optional<std::string>> author = std::optional<std::string>();
      if (deps_.authors != nullptr) author = deps_.authors->Lookup(action.uid);
      if (!author.ok()) {
        runtime::LogWarning(
            "command author lookup failed",
            {{"commitrequest", object}, {"error", std::string(author.status().message())}});
      }
      Count("reverser_catalog_commit_request_author_lookups_total",
            "Command-author lookups of CommitRequests, by outcome (found, none, error).",
            {{"outcome", !author.ok()          ? "error"
                         : author->has_value() ? "found"
                                               : "none"}});
      tracker_.AuthorLookedUp(action.uid, author);
      return;
    }
    case CommitRequestAction::Kind::kWriteStatus: {
      nlohmann::json patch = {{"status", action.status}};
      kube::PatchOptions options;
      options.subresource = "status";
      auto written = deps_.client->Patch(kCommitRequestGvr, action.namespace_, action.name,
                                         kube::PatchType::kMerge, patch, options);
      CommitRequestTracker::WriteResult result = CommitRequestTracker::WriteResult::kWritten;
      if (!written.ok()) {
        result = kube::IsApiNotFound(written.status()) ? CommitRequestTracker::WriteResult::kGone
                                                       : CommitRequestTracker::WriteResult::kFailed;
        if (result == CommitRequestTracker::WriteResult::kFailed) {
          runtime::LogWarning(
              "commitrequest status write failed",
              {{"commitrequest", object}, {"error", std::string(written.status().message())}});
        }
      }
      Count("reverser_catalog_status_writes_total", "Status subresource writes.",
            {{"kind", "CommitRequest"},
             {"outcome", result == CommitRequestTracker::WriteResult::kWritten ? "ok"
                         : result == CommitRequestTracker::WriteResult::kGone  ? "gone"
                                                                               : "error"}});
      if (action.terminal && result == CommitRequestTracker::WriteResult::kWritten) {
        const std::string reason = CommitRequestReadyReason(action.status);
        Count("reverser_catalog_commit_requests_total",
              "CommitRequests that reached a terminal status, by Ready reason.",
              {{"reason", reason}});
        runtime::LogInfo("commitrequest done", {{"commitrequest", object},
                                                {"reason", reason},
                                                {"sha", StringAt(action.status, {"sha"})}});
      }
      tracker_.StatusWritten(action.uid, action.terminal, result);
      return;
    }
    case CommitRequestAction::Kind::kAttach: {
      absl::StatusOr<reverser::v1::FinalizeResult> result =
          absl::UnavailableError("no gitworker configured");
      if (deps_.attacher != nullptr) result = deps_.attacher->Attach(action.attach);
      Count("reverser_catalog_commit_request_attaches_total",
            "AttachCommit calls to the gitworker, by outcome (resolved, pending, error).",
            {{"outcome", !result.ok()         ? "error"
                         : result->resolved() ? "resolved"
                                              : "pending"}});
      if (!result.ok()) {
        runtime::LogWarning("attach failed", {{"commitrequest", object},
                                              {"error", std::string(result.status().message())}});
      }
      tracker_.Attached(action.uid, result);
      return;
    }
  }
}

void CommitRequestController::Count(const char* name, const char* help,
                                    const runtime::Labels& labels) {
  if (deps_.metrics != nullptr) deps_.metrics->GetCounter(name, help, labels).Increment();
}

}  // namespace reverser::catalog
