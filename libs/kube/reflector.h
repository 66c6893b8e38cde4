#pragma once

// A long-running list+watch of one resource type, following client-go's reflector:
//
//  1. Initial sync. WatchList (watch with sendInitialEvents=true,
//     resourceVersionMatch=NotOlderThan, allowWatchBookmarks=true) when the server supports
//     it: the current objects stream in as ADDED events and a BOOKMARK annotated
//     k8s.io/initial-events-end marks the end of the set. A server that rejects it (4xx such as
//     the 422 of a gate-off or pre-1.27 server) or ends the stream without the marker is
//     remembered as not supporting WatchList and gets a paged LIST instead.
//  2. Watch from the last resourceVersion; bookmarks advance it. When the server ends the
//     stream (timeoutSeconds) or the connection drops, watch again from the same RV: no event
//     is lost or repeated.
//  3. 410 Expired/Gone (as HTTP status or as an ERROR event) and 504 "too large resource
//     version" lead to a full relist with resourceVersion "" (never "0").
//  4. Other failures back off exponentially (800 ms doubling to 30 s, reset after progress);
//     429/503 with Retry-After wait exactly the server's delay.
//
// Initial sets are streamed, never gathered: a sync is SyncStarted, the objects as ADDED
// (initial = true), then InitialEventsEnd. Wrap the handler in ReplacingHandler to get one
// Replaced call with the whole set instead.
//
// An object the client refuses (nested deeper than RestClientOptions::max_object_depth) is not
// an error: the handler's OnRefused hears of it, the resourceVersion moves past it and the watch
// goes on, so one such object neither stops the type nor makes the reflector relist forever.

#include <atomic>
#include <cstdint>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "libs/core/types.h"
#include "libs/kube/rest_client.h"

namespace reverser::kube {

enum class ReflectorEventType {
  kSyncStarted,  // a full listing begins (see `reason`); objects of the set follow
  kAdded,        // `initial` = part of the listing rather than a live change
  kModified,
  kDeleted,
  kBookmark,          // progress only: resource_version advanced
  kInitialEventsEnd,  // the listing is complete at resource_version
};
absl::string_view ReflectorEventTypeName(ReflectorEventType type);

enum class SyncReason {
  kInitial,  // first sync
  kExpired,  // the resourceVersion was too old (410) or too new (504): state must be rebuilt
  kRetry,    // a previous sync did not finish (error mid-way); start over
};

enum class SyncMethod { kWatchList, kList };

struct ReflectorEvent {
  ReflectorEventType type = ReflectorEventType::kAdded;
  nlohmann::json object;         // the object (kAdded/kModified/kDeleted); null otherwise
  std::string object_json;       // instead of `object` with ReflectorOptions::raw_objects
  std::string resource_version;  // of the object, the bookmark or the completed listing
  bool initial = false;
  SyncReason reason = SyncReason::kInitial;  // for kSyncStarted and kInitialEventsEnd
  SyncMethod method = SyncMethod::kWatchList;
};

class WatchHandler {
 public:
  virtual ~WatchHandler() = default;
  // Called on the Run() thread, in order.
  virtual void OnEvent(const ReflectorEvent& event) = 0;
  // A failure the reflector is about to retry (informational).
  virtual void OnError(const absl::Status& status) {}
  // An object the client refused (see RefusedObject), in place of the event that carried it:
  // `type` is that event's (ADDED/MODIFIED/DELETED), `initial` whether it was part of a listing.
  // The default ignores it; ReflectorStats::refused counts it either way.
  virtual void OnRefused(ReflectorEventType type, const RefusedObject& object, bool initial) {}
};

// Adapter giving client-go's Replace semantics: the initial set arrives as one call.
class ReplacingHandler : public WatchHandler {
 public:
  // The complete set of objects at `resource_version`; anything not in it is gone.
  virtual void OnReplaced(std::vector<nlohmann::json> objects, const std::string& resource_version,
                          SyncReason reason) = 0;
  // Live ADDED/MODIFIED/DELETED/BOOKMARK events after the set.
  virtual void OnLiveEvent(const ReflectorEvent& event) = 0;

  void OnEvent(const ReflectorEvent& event) final;

 private:
  std::vector<nlohmann::json> pending_;
};

struct ReflectorOptions {
  core::GroupVersionResource gvr;
  std::string namespace_;  // "" = all namespaces (or a cluster-scoped type)
  std::string label_selector;
  std::string field_selector;
  bool use_watch_list = true;
  // Deliver objects as JSON text (ReflectorEvent::object_json; `object` stays null): for
  // consumers that store objects rather than read them. ReplacingHandler needs parsed objects.
  bool raw_objects = false;
  // Non-empty: skip the initial sync and watch from this RV (a persisted cursor). If it is
  // too old the server answers 410 and a relist follows.
  std::string resume_resource_version;
  int64_t page_size = 500;
  // Each watch asks for a random timeoutSeconds in [min, max], as client-go does.
  int64_t min_watch_timeout_seconds = 300;
  int64_t max_watch_timeout_seconds = 600;
  absl::Duration initial_backoff = absl::Milliseconds(800);
  absl::Duration max_backoff = absl::Seconds(30);
  Sleeper* sleeper = nullptr;  // nullptr = Sleeper::Real()
};

struct ReflectorStats {
  int64_t watch_list_syncs = 0;  // WatchList requests that completed the initial set
  int64_t list_syncs = 0;        // LIST syncs completed
  int64_t watches = 0;           // watch requests opened (including WatchList ones)
  int64_t expired = 0;           // 410/too-large responses that forced a relist
  int64_t retries = 0;           // backoff or Retry-After waits
  int64_t refused = 0;           // objects refused by the client (OnRefused)
};

class Reflector {
 public:
  Reflector(RestClient& client, ReflectorOptions options, WatchHandler& handler);
  Reflector(const Reflector&) = delete;
  Reflector& operator=(const Reflector&) = delete;

  // Runs until Stop(); returns OK then. Fails only on unusable options.
  absl::Status Run();
  // Thread-safe and idempotent: wakes a waiting Run() and aborts the open stream.
  void Stop();

  // Thread-safe observers.
  std::string last_resource_version() const;
  bool watch_list_supported() const { return watch_list_supported_.load(); }
  ReflectorStats stats() const;

 private:
  enum class Step { kSync, kWatch };

  absl::Status SyncWithWatchList();
  absl::Status SyncWithList();
  absl::Status WatchFromLastResourceVersion();
  // Consumes one live watch event; returns an ApiError status for ERROR events.
  absl::Status HandleLiveEvent(WatchEvent event);
  absl::Status OpenWatch(const WatchOptions& options,
                         const std::function<absl::Status(WatchEvent)>& on_event);
  WatchOptions BaseWatchOptions();
  void Emit(ReflectorEvent event);
  // Reports a refused object (an event with WatchEvent::refused) and moves the RV past it.
  void Refuse(WatchEventType type, const RefusedObject& object, bool initial);
  void SetResourceVersion(std::string rv);
  // Waits the backoff (or the server's Retry-After); false when stopped.
  bool WaitBeforeRetry(const absl::Status& failure);

  RestClient& client_;
  const ReflectorOptions options_;
  WatchHandler& handler_;
  Sleeper* sleeper_;
  CancelToken stop_;

  // Run-thread state.
  Step step_ = Step::kSync;
  SyncReason sync_reason_ = SyncReason::kInitial;
  absl::Duration backoff_;
  bool progressed_ = false;  // the last attempt delivered something
  uint64_t rng_state_;

  std::atomic<bool> watch_list_supported_{true};
  mutable absl::Mutex mu_;
  std::string rv_ ABSL_GUARDED_BY(mu_);
  ReflectorStats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace reverser::kube
