#include "libs/kube/reflector.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "libs/core/status.h"
#include "libs/kube/api_error.h"

namespace reverser::kube {
namespace {

using nlohmann::json;

ReflectorEventType LiveType(WatchEventType type) {
  switch (type) {
    case WatchEventType::kAdded:
      return ReflectorEventType::kAdded;
    case WatchEventType::kModified:
      return ReflectorEventType::kModified;
    case WatchEventType::kDeleted:
      return ReflectorEventType::kDeleted;
    default:
      return ReflectorEventType::kBookmark;
  }
}

// An ERROR event's Status as an ApiError status.
absl::Status ErrorEventStatus(const WatchEvent& event) {
  std::optional<ApiError> error = ParseStatusObject(event.object.dump());
  if (!error) {
    return absl::DataLossError(
        absl::StrCat("watch ERROR event without a Status: ", event.object.dump().substr(0, 200)));
  }
  return ToStatus(*error);
}

// Whether a failure means "the RV we hold is unusable, rebuild from a fresh list".
bool NeedsRelist(const absl::Status& status) {
  std::optional<ApiError> error = GetApiError(status);
  return error && (error->IsExpired() || error->IsResourceVersionTooLarge());
}

// A WatchList rejection a retry will not fix: the server does not support it.
bool IsWatchListRejection(const absl::Status& status) {
  std::optional<ApiError> error = GetApiError(status);
  if (!error) return false;
  return error->code >= 400 && error->code < 500 && error->code != 410 && error->code != 429 &&
         error->code != 401 && error->code != 403;
}

// Objects in a list carry no kind/apiVersion; fill them in from the list's.
void SetTypeFromList(json& item, const ListPage& page) {
  if (!item.is_object()) return;
  if (!item.contains("apiVersion") && !page.api_version.empty()) {
    item["apiVersion"] = page.api_version;
  }
  if (!item.contains("kind") && absl::EndsWith(page.kind, "List")) {
    item["kind"] = std::string(absl::StripSuffix(page.kind, "List"));
  }
}

// Internal signal: a WatchList stream ended before the end-of-initial-events bookmark.
constexpr char kNoInitialEventsEnd[] =
    "watch-list stream ended without the initial-events-end bookmark";

}  // namespace

absl::string_view ReflectorEventTypeName(ReflectorEventType type) {
  switch (type) {
    case ReflectorEventType::kSyncStarted:
      return "SyncStarted";
    case ReflectorEventType::kAdded:
      return "ADDED";
    case ReflectorEventType::kModified:
      return "MODIFIED";
    case ReflectorEventType::kDeleted:
      return "DELETED";
    case ReflectorEventType::kBookmark:
      return "BOOKMARK";
    case ReflectorEventType::kInitialEventsEnd:
      return "InitialEventsEnd";
  }
  return "UNKNOWN";
}

void ReplacingHandler::OnEvent(const ReflectorEvent& event) {
  switch (event.type) {
    case ReflectorEventType::kSyncStarted:
      pending_.clear();  // a new sync supersedes an unfinished one
      return;
    case ReflectorEventType::kInitialEventsEnd:
      OnReplaced(std::move(pending_), event.resource_version, event.reason);
      pending_.clear();
      return;
    default:
      if (event.initial) {
        // Initial sets are ADDED events; a (rare) DELETED inside one is simply not kept.
        if (event.type != ReflectorEventType::kDeleted) pending_.push_back(event.object);
        return;
      }
      OnLiveEvent(event);
  }
}

Reflector::Reflector(RestClient& client, ReflectorOptions options, WatchHandler& handler)
    : client_(client),
      options_(std::move(options)),
      handler_(handler),
      sleeper_(options_.sleeper != nullptr ? options_.sleeper : &Sleeper::Real()),
      backoff_(options_.initial_backoff),
      rng_state_(reinterpret_cast<uintptr_t>(this) | 1) {
  watch_list_supported_ = options_.use_watch_list;
  if (!options_.resume_resource_version.empty()) {
    step_ = Step::kWatch;
    rv_ = options_.resume_resource_version;
  }
}

void Reflector::Stop() { stop_.Cancel(); }

std::string Reflector::last_resource_version() const {
  absl::MutexLock lock(&mu_);
  return rv_;
}

ReflectorStats Reflector::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

void Reflector::SetResourceVersion(std::string rv) {
  if (rv.empty()) return;
  absl::MutexLock lock(&mu_);
  rv_ = std::move(rv);
}

void Reflector::Emit(ReflectorEvent event) {
  progressed_ = true;
  handler_.OnEvent(event);
}

WatchOptions Reflector::BaseWatchOptions() {
  WatchOptions options;
  options.allow_bookmarks = true;
  options.label_selector = options_.label_selector;
  options.field_selector = options_.field_selector;
  options.raw_objects = options_.raw_objects;
  int64_t span =
      std::max<int64_t>(0, options_.max_watch_timeout_seconds - options_.min_watch_timeout_seconds);
  rng_state_ = rng_state_ * 6364136223846793005ULL + 1442695040888963407ULL;
  options.timeout_seconds =
      options_.min_watch_timeout_seconds +
      (span == 0 ? 0 : static_cast<int64_t>((rng_state_ >> 33) % static_cast<uint64_t>(span + 1)));
  return options;
}

absl::Status Reflector::OpenWatch(const WatchOptions& options,
                                  const std::function<absl::Status(WatchEvent)>& on_event) {
  {
    absl::MutexLock lock(&mu_);
    ++stats_.watches;
  }
  return client_.Watch(options_.gvr, options_.namespace_, options, on_event, &stop_);
}

void Reflector::Refuse(WatchEventType type, const RefusedObject& object, bool initial) {
  {
    absl::MutexLock lock(&mu_);
    ++stats_.refused;
  }
  progressed_ = true;
  handler_.OnRefused(LiveType(type), object, initial);
}

absl::Status Reflector::HandleLiveEvent(WatchEvent event) {
  if (event.refused) {
    if (event.type == WatchEventType::kError) {
      return absl::DataLossError(absl::StrCat("watch ERROR event: ", event.refused->message));
    }
    // The RV moves past it either way: a re-watch does not replay what was refused.
    SetResourceVersion(event.resource_version);
    if (event.type == WatchEventType::kBookmark) return absl::OkStatus();
    Refuse(event.type, *event.refused, /*initial=*/false);
    return absl::OkStatus();
  }
  if (event.type == WatchEventType::kError) return ErrorEventStatus(event);
  ReflectorEvent out;
  out.type = LiveType(event.type);
  out.resource_version = std::move(event.resource_version);
  if (event.type != WatchEventType::kBookmark) {
    out.object = std::move(event.object);
    out.object_json = std::move(event.object_json);
  }
  SetResourceVersion(out.resource_version);
  Emit(std::move(out));
  return absl::OkStatus();
}

absl::Status Reflector::SyncWithWatchList() {
  WatchOptions options = BaseWatchOptions();
  options.send_initial_events = true;
  options.resource_version = last_resource_version();  // "" on first sync and after 410
  bool started = false;
  bool initial_done = false;
  auto start = [&] {
    if (started) return;
    started = true;
    Emit({.type = ReflectorEventType::kSyncStarted,
          .reason = sync_reason_,
          .method = SyncMethod::kWatchList});
  };
  absl::Status status = OpenWatch(options, [&](WatchEvent event) -> absl::Status {
    if (initial_done) return HandleLiveEvent(std::move(event));
    if (event.type == WatchEventType::kError) {
      if (event.refused) {
        return absl::DataLossError(absl::StrCat("watch ERROR event: ", event.refused->message));
      }
      return ErrorEventStatus(event);
    }
    start();
    if (event.refused) {
      // A refused bookmark cannot be the end marker (its annotations were not read).
      if (event.type != WatchEventType::kBookmark) {
        Refuse(event.type, *event.refused, /*initial=*/true);
      }
      return absl::OkStatus();
    }
    if (IsInitialEventsEndBookmark(event)) {
      initial_done = true;
      std::string rv = event.resource_version;
      SetResourceVersion(rv);
      step_ = Step::kWatch;
      {
        absl::MutexLock lock(&mu_);
        ++stats_.watch_list_syncs;
      }
      Emit({.type = ReflectorEventType::kInitialEventsEnd,
            .resource_version = rv,
            .reason = sync_reason_,
            .method = SyncMethod::kWatchList});
      return absl::OkStatus();
    }
    if (event.type == WatchEventType::kBookmark) return absl::OkStatus();  // not yet meaningful
    ReflectorEvent out;
    out.type = LiveType(event.type);
    out.resource_version = std::move(event.resource_version);
    out.object = std::move(event.object);
    out.object_json = std::move(event.object_json);
    out.initial = true;
    out.method = SyncMethod::kWatchList;
    Emit(std::move(out));
    return absl::OkStatus();
  });
  if (status.ok() && !initial_done) return absl::FailedPreconditionError(kNoInitialEventsEnd);
  if (!status.ok() && started && !initial_done) sync_reason_ = SyncReason::kRetry;
  return status;
}

absl::Status Reflector::SyncWithList() {
  ListOptions list_options;
  list_options.label_selector = options_.label_selector;
  list_options.field_selector = options_.field_selector;
  list_options.limit = options_.page_size;
  // "" = a consistent read of the latest state; "0" could serve a stale cache.
  std::string list_rv;
  bool started = false;
  for (bool first = true;; first = false) {
    if (stop_.cancelled()) return absl::CancelledError("stopped");
    absl::StatusOr<ListPage> page = client_.List(options_.gvr, options_.namespace_, list_options);
    if (!page.ok()) {
      if (started) sync_reason_ = SyncReason::kRetry;
      return page.status();
    }
    if (first) {
      list_rv = page->resource_version;
      started = true;
      Emit({.type = ReflectorEventType::kSyncStarted,
            .reason = sync_reason_,
            .method = SyncMethod::kList});
    }
    for (const RefusedObject& object : page->refused) {
      Refuse(WatchEventType::kAdded, object, /*initial=*/true);
    }
    for (json& item : page->items) {
      SetTypeFromList(item, *page);
      ReflectorEvent out;
      out.type = ReflectorEventType::kAdded;
      out.resource_version = ResourceVersionOf(item);
      if (options_.raw_objects) {
        out.object_json = item.dump(-1, ' ', false, json::error_handler_t::replace);
      } else {
        out.object = std::move(item);
      }
      out.initial = true;
      out.method = SyncMethod::kList;
      Emit(std::move(out));
    }
    if (page->continue_token.empty()) break;
    list_options.continue_token = page->continue_token;
  }
  SetResourceVersion(list_rv);
  {
    absl::MutexLock lock(&mu_);
    ++stats_.list_syncs;
  }
  Emit({.type = ReflectorEventType::kInitialEventsEnd,
        .resource_version = list_rv,
        .reason = sync_reason_,
        .method = SyncMethod::kList});
  step_ = Step::kWatch;
  return absl::OkStatus();
}

absl::Status Reflector::WatchFromLastResourceVersion() {
  WatchOptions options = BaseWatchOptions();
  options.resource_version = last_resource_version();
  return OpenWatch(options, [&](WatchEvent event) { return HandleLiveEvent(std::move(event)); });
}

bool Reflector::WaitBeforeRetry(const absl::Status& failure) {
  handler_.OnError(failure);
  {
    absl::MutexLock lock(&mu_);
    ++stats_.retries;
  }
  if (progressed_) backoff_ = options_.initial_backoff;  // progress since the last failure
  absl::Duration wait;
  std::optional<ApiError> error = GetApiError(failure);
  if (error && error->retry_after && (error->code == 429 || error->code >= 500)) {
    wait = *error->retry_after;  // the server said when; do not grow the backoff
  } else {
    wait = backoff_;
    backoff_ = std::min(backoff_ * 2, options_.max_backoff);
  }
  return sleeper_->SleepFor(wait, &stop_);
}

absl::Status Reflector::Run() {
  if (options_.gvr.version.empty() || options_.gvr.resource.empty()) {
    return absl::InvalidArgumentError("reflector: gvr needs a version and a resource");
  }
  while (!stop_.cancelled()) {
    progressed_ = false;
    const absl::Time attempt_start = absl::Now();
    absl::Status status;
    if (step_ == Step::kSync && watch_list_supported_) {
      status = SyncWithWatchList();
      if (!status.ok() && !stop_.cancelled() &&
          (IsWatchListRejection(status) || status.message() == kNoInitialEventsEnd)) {
        // Remember: this server does not do WatchList. LIST right away.
        watch_list_supported_ = false;
        handler_.OnError(status);
        continue;
      }
    } else if (step_ == Step::kSync) {
      status = SyncWithList();
      if (status.ok()) status = WatchFromLastResourceVersion();
    } else {
      status = WatchFromLastResourceVersion();
    }
    if (stop_.cancelled()) break;
    if (status.ok()) {
      // The server ended the stream (timeoutSeconds): watch again from the same RV. Only a
      // very short, empty stream backs off (client-go's "very short watch"), so a misbehaving
      // server is not hammered while quiet types re-watch at once.
      if (progressed_ || absl::Now() - attempt_start >= absl::Seconds(1)) {
        backoff_ = options_.initial_backoff;
        continue;
      }
      if (!WaitBeforeRetry(absl::UnavailableError("watch ended without events"))) break;
      continue;
    }
    if (NeedsRelist(status)) {
      {
        absl::MutexLock lock(&mu_);
        ++stats_.expired;
        rv_.clear();  // relist with "" (never "0"), as client-go does after Expired
      }
      handler_.OnError(status);
      step_ = Step::kSync;
      sync_reason_ = SyncReason::kExpired;
      continue;
    }
    if (!WaitBeforeRetry(status)) break;
  }
  return absl::OkStatus();
}

}  // namespace reverser::kube
