#pragma once

// Keeps the rules of the attribution ValidatingWebhookConfiguration (catalog
// --attribution_webhook_configuration) equal to the followed types (attribution_rules.h).
//
// One worker thread does the blocking I/O: GET the configuration, and when some webhook's
// rules differ, PUT it back with every webhook's rules replaced and the read resourceVersion
// (a 409 Conflict reads again). It runs when the catalog actor tells it a new followed set
// (SetFollowed, never before the first: a restarting catalog does not shrink the rules), when
// the configuration changes (a list+watch of it by name on its own thread: a helm upgrade or a
// person resetting the rules is undone at once), and every `recheck_period` besides. A missing
// configuration or a refused read or write (404, 403, anything else) is counted
// (reverser_catalog_attribution_webhook_syncs_total{outcome}), logged once per state change and
// tried again with backoff; nothing here blocks the actor or ends the process.

#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "libs/kube/reflector.h"
#include "libs/kube/rest_client.h"
#include "libs/runtime/metrics.h"
#include "services/catalog/attribution_rules.h"

namespace reverser::catalog {

inline const core::GroupVersionResource kValidatingWebhookConfigurationGvr{
    "admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations"};

struct AttributionWebhookOptions {
  std::string configuration;  // the ValidatingWebhookConfiguration's name
  absl::Duration recheck_period = absl::Seconds(30);
  // After a failed sync: the first wait, doubling up to the most (then recheck_period again
  // once a sync succeeds).
  absl::Duration initial_backoff = absl::Seconds(1);
  absl::Duration max_backoff = absl::Seconds(30);
  // How often a 409 Conflict is read and written again within one sync.
  int conflict_retries = 5;
};

class AttributionWebhookSync final : private kube::WatchHandler {
 public:
  // The outcome of one sync, the metric's `outcome` label.
  enum class Outcome { kWritten, kUnchanged, kMissing, kForbidden, kConflict, kInvalid, kError };
  static const char* OutcomeName(Outcome outcome);

  AttributionWebhookSync(kube::RestClient& client, AttributionWebhookOptions options,
                         runtime::MetricsRegistry* metrics);
  ~AttributionWebhookSync() override;

  void Start();
  void Stop();

  // The followed set (any thread; the catalog actor calls it with each new claim set).
  void SetFollowed(std::set<GroupResource> followed);

 private:
  // kube::WatchHandler (the watch thread): any change of the configuration re-checks it.
  void OnEvent(const kube::ReflectorEvent& event) override;
  void OnError(const absl::Status& status) override;

  void Loop();
  // One sync (worker thread); `detail` says why it failed.
  Outcome SyncOnce(const std::set<GroupResource>& followed, std::string& detail);
  void Report(Outcome outcome, const std::string& detail, size_t followed);
  void Recheck();

  kube::RestClient& client_;
  const AttributionWebhookOptions options_;
  runtime::MetricsRegistry* metrics_;
  std::unique_ptr<kube::Reflector> reflector_;
  std::thread watch_thread_;
  std::thread worker_thread_;
  absl::Mutex mu_;
  std::optional<std::set<GroupResource>> followed_ ABSL_GUARDED_BY(mu_);
  bool dirty_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::string last_watch_error_;  // watch thread only
  std::string last_state_;        // worker thread only: what was last logged
  bool started_ = false;
};

}  // namespace reverser::catalog
