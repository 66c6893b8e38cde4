#pragma once

// The catalog's blocking Kubernetes I/O, each on its own thread, all reporting to the catalog
// actor through a CatalogInbox:
//  - DiscoveryLoop: a discovery pass (plus the CRD list as origin evidence) every period, and
//    at once when kicked (Rescan, a CRD change); kicks arriving during a pass coalesce. A failed
//    or degraded pass is retried after 1 s, doubling up to the period.
//  - ObjectWatches: list+watch (libs/kube Reflector) of GitProvider, GitTarget, WatchRule and
//    ClusterWatchRule, and of CustomResourceDefinitions as a discovery trigger.
//  - TaskQueue: ordered blocking requests (status writes, provider probes); a task submitted
//    under the key of a pending one replaces it, so only the latest status is written.

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "libs/kube/reflector.h"
#include "libs/kube/rest_client.h"
#include "services/catalog/inbox.h"

namespace reverser::catalog {

class DiscoveryLoop {
 public:
  DiscoveryLoop(kube::RestClient& client, CatalogInbox& inbox, absl::Duration period);
  ~DiscoveryLoop();

  void Start();
  // Stops the thread; pending Rescan callbacks get Unavailable.
  void Stop();
  // Scans as soon as possible; `done` (optional) is answered once the scan was applied.
  void Kick(RescanCallback done = nullptr);

 private:
  static constexpr absl::Duration kFirstRetryWait = absl::Seconds(1);

  void Loop();
  ScanInput ScanOnce();
  // How long to wait after `input` (thread of Loop() only).
  absl::Duration NextWait(const ScanInput& input);

  kube::RestClient& client_;
  CatalogInbox& inbox_;
  const absl::Duration period_;
  absl::Duration retry_wait_ = kFirstRetryWait;
  absl::Mutex mu_;
  bool kicked_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<RescanCallback> callbacks_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

class ObjectWatches {
 public:
  // `on_crd_change` runs (on a watch thread) whenever a CustomResourceDefinition changes.
  ObjectWatches(kube::RestClient& client, CatalogInbox& inbox,
                std::function<void()> on_crd_change);
  ~ObjectWatches();

  void Start();
  void Stop();

 private:
  struct Watch;
  kube::RestClient& client_;
  CatalogInbox& inbox_;
  std::function<void()> on_crd_change_;
  std::vector<std::unique_ptr<Watch>> watches_;
};

class TaskQueue {
 public:
  explicit TaskQueue(std::string name);
  ~TaskQueue();

  void Start();
  // Drops tasks not yet started and joins the thread.
  void Stop();
  void Submit(const std::string& key, std::function<void()> task);
  size_t pending() const;

 private:
  void Loop();

  const std::string name_;
  mutable absl::Mutex mu_;
  std::deque<std::string> order_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::function<void()>> tasks_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace reverser::catalog
