#pragma once

// A dynamic client over nlohmann::json: get, list (paged), create, update, patch, delete and a
// single raw watch stream on any GroupVersionResource. Failures come back as absl::Status
// carrying a kube::ApiError (see api_error.h). Requests rejected with 429, or with 5xx plus
// Retry-After, are retried after the server's delay, as client-go does.

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "libs/core/types.h"
#include "libs/kube/transport.h"
#include "libs/kube/watch_event.h"

namespace reverser::kube {

// Waits between retries. Injectable so tests observe the delays instead of sleeping.
class Sleeper {
 public:
  virtual ~Sleeper() = default;
  // Returns false if `cancel` fired before the time was up.
  virtual bool SleepFor(absl::Duration duration, CancelToken* cancel) = 0;
  // Sleeps in short slices, checking `cancel`.
  static Sleeper& Real();
};

struct ListOptions {
  std::string label_selector;
  std::string field_selector;
  int64_t limit = 0;  // 0 = no paging
  std::string continue_token;
  std::string resource_version;        // "" = most recent (consistent read)
  std::string resource_version_match;  // "", "NotOlderThan", "Exact"
};

struct ListPage {
  std::vector<nlohmann::json> items;  // as served: without kind/apiVersion
  std::string resource_version;       // the list's RV (where a following watch starts)
  std::string continue_token;         // "" on the last page
  std::optional<int64_t> remaining_item_count;
  std::string kind;         // e.g. "ConfigMapList"
  std::string api_version;  // e.g. "v1"
  // Items left out of `items` because they are nested deeper than
  // RestClientOptions::max_object_depth (named as far as their metadata can be read).
  std::vector<RefusedObject> refused;
};

struct WriteOptions {
  std::string field_manager;
  bool dry_run = false;
  std::string field_validation;  // "", "Ignore", "Warn", "Strict"
};

enum class PatchType { kMerge, kJson, kStrategicMerge, kApply };
absl::string_view PatchContentType(PatchType type);

struct PatchOptions {
  std::string field_manager;  // required for kApply
  bool force = false;         // apply: take ownership of conflicting fields
  bool dry_run = false;
  std::string subresource;  // e.g. "status", "scale"
};

struct DeleteOptions {
  std::string propagation_policy;  // "", "Background", "Foreground", "Orphan"
  std::optional<int64_t> grace_period_seconds;
  std::string precondition_uid;
  std::string precondition_resource_version;
  bool dry_run = false;
};

struct WatchOptions {
  std::string resource_version;  // "" = start at the most recent, with synthetic ADDEDs
  bool allow_bookmarks = true;
  bool send_initial_events = false;  // WatchList (sets resourceVersionMatch=NotOlderThan)
  std::optional<int64_t> timeout_seconds;
  std::string label_selector;
  std::string field_selector;
  // Objects of ADDED/MODIFIED/DELETED events as JSON text (WatchEvent::object_json), not parsed.
  bool raw_objects = false;
};

struct RestClientOptions {
  int max_retries = 10;  // client-go's default for 429/Retry-After
  // The deepest object nesting taken from the server (the API server's own limit by default).
  // A deeper watch object or LIST item is refused (WatchEvent::refused, ListPage::refused) and
  // the rest goes on; a deeper single-object response is a DataLoss error.
  int64_t max_object_depth = core::kApiObjectMaxDepth;
  absl::Duration request_timeout = absl::Seconds(32);
  Sleeper* sleeper = nullptr;  // nullptr = Sleeper::Real()
};

// "/api/v1/namespaces/ns/configmaps/x/status", "/apis/apps/v1/deployments" (ns "" = all).
std::string ResourcePath(const core::GroupVersionResource& gvr, absl::string_view ns,
                         absl::string_view name = "", absl::string_view subresource = "");

// Percent-encodes a query value or path segment (RFC 3986 unreserved characters kept).
std::string UrlEncode(absl::string_view text);

class RestClient {
 public:
  explicit RestClient(std::shared_ptr<HttpTransport> transport, RestClientOptions options = {});

  absl::StatusOr<nlohmann::json> Get(const core::GroupVersionResource& gvr, absl::string_view ns,
                                     absl::string_view name, absl::string_view subresource = "");

  // One page.
  absl::StatusOr<ListPage> List(const core::GroupVersionResource& gvr, absl::string_view ns,
                                const ListOptions& options = {});
  // Every page, each item passed to `on_item` as it is read (one page in memory at a time).
  // Returns the list RV. A continue token that expires mid-way is an Expired error: the caller
  // relists (the partial result is not consistent). Refused items go to `refused` if given.
  absl::StatusOr<std::string> ListEach(const core::GroupVersionResource& gvr, absl::string_view ns,
                                       const ListOptions& options,
                                       const std::function<absl::Status(nlohmann::json)>& on_item,
                                       CancelToken* cancel = nullptr,
                                       std::vector<RefusedObject>* refused = nullptr);
  // Every page, collected (refused items in `refused`).
  absl::StatusOr<ListPage> ListAll(const core::GroupVersionResource& gvr, absl::string_view ns,
                                   ListOptions options = {});

  // `ns` is the target namespace ("" for cluster-scoped types); the object's own
  // metadata.namespace is not consulted.
  absl::StatusOr<nlohmann::json> Create(const core::GroupVersionResource& gvr, absl::string_view ns,
                                        const nlohmann::json& object,
                                        const WriteOptions& options = {});
  // PUT to metadata.name (optimistic concurrency through metadata.resourceVersion).
  absl::StatusOr<nlohmann::json> Update(const core::GroupVersionResource& gvr, absl::string_view ns,
                                        const nlohmann::json& object,
                                        const WriteOptions& options = {},
                                        absl::string_view subresource = "");
  absl::StatusOr<nlohmann::json> Patch(const core::GroupVersionResource& gvr, absl::string_view ns,
                                       absl::string_view name, PatchType type,
                                       const nlohmann::json& patch,
                                       const PatchOptions& options = {});
  // Returns what the server returned: the object (when deletion is deferred by finalizers or
  // graceful deletion) or a Status.
  absl::StatusOr<nlohmann::json> Delete(const core::GroupVersionResource& gvr, absl::string_view ns,
                                        absl::string_view name, const DeleteOptions& options = {});

  // GET of any path, JSON result (discovery, /version).
  absl::StatusOr<HttpResponse> GetRaw(const std::string& path, HeaderList headers = {});

  // Opens one watch and delivers decoded events until the server ends the stream (OK), the
  // connection drops (Unavailable), `on_event` fails (its error), or `cancel` fires (Cancelled).
  // HTTP failures before the stream starts are ApiError statuses; they are not retried here.
  absl::Status Watch(const core::GroupVersionResource& gvr, absl::string_view ns,
                     const WatchOptions& options,
                     const std::function<absl::Status(WatchEvent)>& on_event,
                     CancelToken* cancel = nullptr);

  // Sends with the 429/Retry-After policy; non-2xx becomes an ApiError status.
  absl::StatusOr<HttpResponse> Do(HttpRequest request, CancelToken* cancel = nullptr);

  HttpTransport& transport() { return *transport_; }

 private:
  absl::StatusOr<nlohmann::json> DoJson(HttpRequest request);

  std::shared_ptr<HttpTransport> transport_;
  RestClientOptions options_;
  Sleeper* sleeper_;
};

}  // namespace reverser::kube
