#include "services/catalog/attribution_webhook.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "libs/kube/api_error.h"
#include "libs/runtime/log.h"
#include "services/catalog/catalog_metrics.h"

namespace reverser::catalog {
namespace {

constexpr char kFieldManager[] = "reverser-catalog";

AttributionWebhookSync::Outcome Classify(const absl::Status& status, std::string& detail) {
  detail = std::string(status.message());
  std::optional<kube::ApiError> error = kube::GetApiError(status);
  if (!error) return AttributionWebhookSync::Outcome::kError;
  if (error->IsNotFound()) return AttributionWebhookSync::Outcome::kMissing;
  if (error->code == 403) return AttributionWebhookSync::Outcome::kForbidden;
  if (error->IsConflict()) return AttributionWebhookSync::Outcome::kConflict;
  return AttributionWebhookSync::Outcome::kError;
}

}  // namespace

const char* AttributionWebhookSync::OutcomeName(Outcome outcome) {
  switch (outcome) {
    case Outcome::kWritten:
      return "written";
    case Outcome::kUnchanged:
      return "unchanged";
    case Outcome::kMissing:
      return "missing";
    case Outcome::kForbidden:
      return "forbidden";
    case Outcome::kConflict:
      return "conflict";
    case Outcome::kInvalid:
      return "invalid";
    case Outcome::kError:
      return "error";
  }
  return "error";
}

AttributionWebhookSync::AttributionWebhookSync(kube::RestClient& client,
                                               AttributionWebhookOptions options,
                                               runtime::MetricsRegistry* metrics)
    : client_(client), options_(std::move(options)), metrics_(metrics) {
  kube::ReflectorOptions watch;
  watch.gvr = kValidatingWebhookConfigurationGvr;
  watch.field_selector = absl::StrCat("metadata.name=", options_.configuration);
  reflector_ =
      std::make_unique<kube::Reflector>(client_, watch, static_cast<kube::WatchHandler&>(*this));
}

AttributionWebhookSync::~AttributionWebhookSync() { Stop(); }

void AttributionWebhookSync::Start() {
  if (started_) return;
  started_ = true;
  runtime::LogInfo("attribution webhook rules follow the followed types",
                   {{"configuration", options_.configuration}});
  worker_thread_ = std::thread([this] { Loop(); });
  watch_thread_ = std::thread([this] {
    if (absl::Status s = reflector_->Run(); !s.ok()) {
      runtime::LogError(
          "attribution webhook configuration watch stopped",
          {{"configuration", options_.configuration}, {"error", std::string(s.message())}});
    }
  });
}

void AttributionWebhookSync::Stop() {
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

void AttributionWebhookSync::SetFollowed(std::set<GroupResource> followed) {
  absl::MutexLock lock(&mu_);
  if (followed_ == followed) return;
  followed_ = std::move(followed);
  dirty_ = true;
}

void AttributionWebhookSync::Recheck() {
  absl::MutexLock lock(&mu_);
  dirty_ = true;
}

void AttributionWebhookSync::OnEvent(const kube::ReflectorEvent& event) {
  switch (event.type) {
    case kube::ReflectorEventType::kAdded:
    case kube::ReflectorEventType::kModified:
    case kube::ReflectorEventType::kDeleted:
    case kube::ReflectorEventType::kInitialEventsEnd:
      last_watch_error_.clear();
      Recheck();
      break;
    default:
      break;
  }
}

void AttributionWebhookSync::OnError(const absl::Status& status) {
  // The reflector retries with backoff; the periodic re-check keeps the rules meanwhile.
  std::string message(status.message());
  if (message == last_watch_error_) return;
  last_watch_error_ = message;
  runtime::LogWarning("attribution webhook configuration watch failed; retrying",
                      {{"configuration", options_.configuration}, {"error", message}});
}

void AttributionWebhookSync::Loop() {
  absl::Duration backoff = options_.initial_backoff;
  absl::Duration wait = absl::InfiniteDuration();
  while (true) {
    std::set<GroupResource> followed;
    {
      absl::MutexLock lock(&mu_);
      mu_.AwaitWithTimeout(
          absl::Condition(
              +[](AttributionWebhookSync* self) ABSL_EXCLUSIVE_LOCKS_REQUIRED(self->mu_) {
                return self->stop_ || (self->dirty_ && self->followed_.has_value());
              },
              this),
          wait);
      if (stop_) return;
      if (!followed_) {
        wait = absl::InfiniteDuration();  // nothing is written before the first followed set
        continue;
      }
      dirty_ = false;
      followed = *followed_;
    }
    std::string detail;
    const Outcome outcome = SyncOnce(followed, detail);
    Report(outcome, detail, followed.size());
    if (outcome == Outcome::kWritten || outcome == Outcome::kUnchanged) {
      backoff = options_.initial_backoff;
      wait = options_.recheck_period;
    } else {
      wait = backoff;
      backoff = std::min(backoff * 2, options_.max_backoff);
    }
  }
}

AttributionWebhookSync::Outcome AttributionWebhookSync::SyncOnce(
    const std::set<GroupResource>& followed, std::string& detail) {
  const nlohmann::json rules = AttributionRules(followed);
  for (int attempt = 0;; ++attempt) {
    absl::StatusOr<nlohmann::json> read =
        client_.Get(kValidatingWebhookConfigurationGvr, "", options_.configuration);
    if (!read.ok()) return Classify(read.status(), detail);
    if (!RulesDiffer(*read, rules)) return Outcome::kUnchanged;
    // The read resourceVersion stays in the object: the PUT fails with 409 if it moved since.
    absl::StatusOr<nlohmann::json> updated = WithRules(*std::move(read), rules);
    if (!updated.ok()) {
      detail = std::string(updated.status().message());
      return Outcome::kInvalid;
    }
    kube::WriteOptions write;
    write.field_manager = kFieldManager;
    absl::StatusOr<nlohmann::json> written =
        client_.Update(kValidatingWebhookConfigurationGvr, "", *updated, write);
    if (written.ok()) return Outcome::kWritten;
    if (kube::IsApiConflict(written.status()) && attempt < options_.conflict_retries) continue;
    return Classify(written.status(), detail);
  }
}

void AttributionWebhookSync::Report(Outcome outcome, const std::string& detail, size_t followed) {
  if (metrics_ != nullptr) CatalogMetrics(metrics_).AttributionWebhookSynced(OutcomeName(outcome));
  const bool ok = outcome == Outcome::kWritten || outcome == Outcome::kUnchanged;
  if (outcome == Outcome::kWritten) {
    runtime::LogInfo(
        "attribution webhook rules written",
        {{"configuration", options_.configuration}, {"followed_types", std::to_string(followed)}});
  }
  // Logged once per state, not on every retry or re-check.
  const std::string state = ok ? "ok" : absl::StrCat(OutcomeName(outcome), ": ", detail);
  if (state == last_state_) return;
  const bool first = last_state_.empty();
  last_state_ = state;
  if (ok) {
    if (!first || outcome == Outcome::kUnchanged) {
      runtime::LogInfo("attribution webhook rules in sync",
                       {{"configuration", options_.configuration}});
    }
    return;
  }
  const char* what = outcome == Outcome::kMissing ? "attribution webhook configuration not found"
                     : outcome == Outcome::kForbidden
                         ? "attribution webhook configuration: access refused"
                         : "attribution webhook rules not synced";
  runtime::LogWarning(what, {{"configuration", options_.configuration},
                             {"outcome", OutcomeName(outcome)},
                             {"error", detail},
                             {"retry", "with backoff"}});
}

}  // namespace reverser::catalog
