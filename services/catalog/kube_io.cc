#include "services/catalog/kube_io.h"

#include "absl/strings/str_cat.h"
#include "libs/runtime/log.h"
#include "libs/runtime/metrics.h"
#include "libs/typeset/kube_scan.h"

namespace reverser::catalog {
namespace {

const core::GroupVersionResource kCrdGvr{"apiextensions.k8s.io", "v1", "customresourcedefinitions"};

}  // namespace

// --- DiscoveryLoop ----------------------------------------------------------------------------

DiscoveryLoop::DiscoveryLoop(kube::RestClient& client, CatalogInbox& inbox, absl::Duration period)
    : client_(client), inbox_(inbox), period_(period) {}

DiscoveryLoop::~DiscoveryLoop() { Stop(); }

void DiscoveryLoop::Start() {
  {
    absl::MutexLock lock(&mu_);
    kicked_ = true;  // the first pass runs at once
  }
  thread_ = std::thread([this] { Loop(); });
}

void DiscoveryLoop::Stop() {
  std::vector<RescanCallback> orphans;
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
    orphans.swap(callbacks_);
  }
  if (thread_.joinable()) thread_.join();
  for (auto& cb : orphans) cb(absl::UnavailableError("the catalog is shutting down"));
}

void DiscoveryLoop::Kick(RescanCallback done) {
  {
    absl::MutexLock lock(&mu_);
    if (stop_) {
      if (done) done(absl::UnavailableError("the catalog is shutting down"));
      return;
    }
    kicked_ = true;
    if (done) callbacks_.push_back(std::move(done));
  }
}

ScanInput DiscoveryLoop::ScanOnce() {
  ScanInput input;
  absl::Time start = absl::Now();
  auto result = kube::Discover(client_);
  if (!result.ok()) {
    input.scan = result.status();
  } else {
    // The CRD list is origin evidence; without it (403 in least-privilege installs) CRD
    // groups stay origin-unknown, which refuses them — log it so operators see why.
    std::vector<std::string> crd_resources;
    auto crds = client_.ListAll(kCrdGvr, "");
    if (crds.ok()) {
      nlohmann::json list = {{"items", crds->items}};
      crd_resources = typeset::CrdGroupResources(list);
    } else {
      runtime::LogWarning("cannot list CustomResourceDefinitions",
                          {{"error", std::string(crds.status().message())}});
    }
    input.scan = typeset::ScanFromDiscovery(*result, std::move(crd_resources));
  }
  input.took = absl::Now() - start;
  return input;
}

absl::Duration DiscoveryLoop::NextWait(const ScanInput& input) {
  const bool incomplete = !input.scan.ok() || !input.scan->complete || !input.scan->failed.empty();
  if (!incomplete) {
    retry_wait_ = kFirstRetryWait;
    return period_;
  }
  // A failed or degraded pass is retried sooner than the period (doubling up to it): one
  // transient error at startup must not hold readiness back for a whole period.
  absl::Duration wait = std::min(retry_wait_, period_);
  retry_wait_ = std::min(retry_wait_ * 2, period_);
  return wait;
}

void DiscoveryLoop::Loop() {
  absl::Duration wait = period_;
  while (true) {
    std::vector<RescanCallback> callbacks;
    {
      absl::MutexLock lock(&mu_);
      // Wakes on a kick or a stop, else when the wait is over.
      mu_.AwaitWithTimeout(absl::Condition(
                               +[](DiscoveryLoop* loop) ABSL_EXCLUSIVE_LOCKS_REQUIRED(loop->mu_) {
                                 return loop->stop_ || loop->kicked_;
                               },
                               this),
                           wait);
      if (stop_) return;
      kicked_ = false;
      callbacks.swap(callbacks_);
    }
    ScanInput input = ScanOnce();
    wait = NextWait(input);
    input.callbacks = std::move(callbacks);
    inbox_.Post(std::move(input));
  }
}

// --- ObjectWatches ----------------------------------------------------------------------------

struct ObjectWatches::Watch : kube::ReplacingHandler {
  Watch(kube::RestClient& client, CatalogInbox& inbox, std::optional<ObjectKind> kind,
        core::GroupVersionResource gvr, std::function<void()> on_change)
      : inbox(inbox), kind(kind), gvr(gvr), on_change(std::move(on_change)) {
    kube::ReflectorOptions options;
    options.gvr = std::move(gvr);
    reflector = std::make_unique<kube::Reflector>(client, options, *this);
  }

  void OnReplaced(std::vector<nlohmann::json> objects, const std::string& /*rv*/,
                  kube::SyncReason reason) override {
    if (kind) {
      inbox.Post(ReplaceInput{*kind, std::move(objects)});
      MarkHealthy();
    } else if (reason != kube::SyncReason::kInitial && on_change) {
      on_change();  // CRDs may have changed while we were not watching
    }
  }

  void OnLiveEvent(const kube::ReflectorEvent& event) override {
    MarkHealthy();
    if (event.type == kube::ReflectorEventType::kBookmark) return;
    if (!kind) {
      if (on_change) on_change();
      return;
    }
    inbox.Post(EventInput{*kind, event.type == kube::ReflectorEventType::kDeleted, event.object});
  }

  // Nested deeper than --max_object_depth: the catalog never sees it (its copies and walks of
  // objects recurse per level).
  void OnRefused(kube::ReflectorEventType /*type*/, const kube::RefusedObject& object,
                 bool /*initial*/) override {
    runtime::MetricsRegistry::Global()
        .GetCounter("reverser_catalog_objects_refused_total",
                    "Objects the catalog's watches refused, by reason.",
                    {{"group", gvr.group},
                     {"version", gvr.version},
                     {"resource", gvr.resource},
                     {"reason", object.reason}})
        .Increment();
    runtime::LogWarning("object refused", {{"kind", object.kind},
                                           {"namespace", object.namespace_},
                                           {"name", object.name},
                                           {"reason", object.reason},
                                           {"message", object.message}});
  }

  void OnError(const absl::Status& status) override {
    unhealthy = true;
    if (kind) inbox.Post(WatchHealthInput{*kind, status});
  }

  // Progress after a failure (reflector thread only).
  void MarkHealthy() {
    if (!unhealthy) return;
    unhealthy = false;
    if (kind) inbox.Post(WatchHealthInput{*kind, absl::OkStatus()});
  }

  CatalogInbox& inbox;
  std::optional<ObjectKind> kind;  // nullopt: the CRD trigger
  core::GroupVersionResource gvr;
  std::function<void()> on_change;
  bool unhealthy = false;
  std::unique_ptr<kube::Reflector> reflector;
  std::thread thread;
};

ObjectWatches::ObjectWatches(kube::RestClient& client, CatalogInbox& inbox,
                             std::function<void()> on_crd_change)
    : client_(client), inbox_(inbox), on_crd_change_(std::move(on_crd_change)) {}

ObjectWatches::~ObjectWatches() { Stop(); }

void ObjectWatches::Start() {
  for (ObjectKind kind : kAllObjectKinds) {
    watches_.push_back(std::make_unique<Watch>(client_, inbox_, kind, GvrOf(kind), nullptr));
  }
  watches_.push_back(
      std::make_unique<Watch>(client_, inbox_, std::nullopt, kCrdGvr, on_crd_change_));
  for (auto& w : watches_) {
    Watch* watch = w.get();
    watch->thread = std::thread([watch] {
      if (absl::Status s = watch->reflector->Run(); !s.ok()) {
        runtime::LogError("watch stopped", {{"error", std::string(s.message())}});
      }
    });
  }
}

void ObjectWatches::Stop() {
  for (auto& w : watches_) w->reflector->Stop();
  for (auto& w : watches_) {
    if (w->thread.joinable()) w->thread.join();
  }
  watches_.clear();
}

// --- TaskQueue --------------------------------------------------------------------------------

TaskQueue::TaskQueue(std::string name) : name_(std::move(name)) {}

TaskQueue::~TaskQueue() { Stop(); }

void TaskQueue::Start() {
  thread_ = std::thread([this] { Loop(); });
}

void TaskQueue::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void TaskQueue::Submit(const std::string& key, std::function<void()> task) {
  {
    absl::MutexLock lock(&mu_);
    if (stop_) return;
    if (tasks_.count(key) == 0) order_.push_back(key);
    tasks_[key] = std::move(task);
  }
}

size_t TaskQueue::pending() const {
  absl::MutexLock lock(&mu_);
  return tasks_.size();
}

void TaskQueue::Loop() {
  while (true) {
    std::function<void()> task;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](TaskQueue* queue) ABSL_EXCLUSIVE_LOCKS_REQUIRED(queue->mu_) {
            return queue->stop_ || !queue->order_.empty();
          },
          this));
      if (stop_) return;
      std::string key = std::move(order_.front());
      order_.pop_front();
      auto node = tasks_.extract(key);
      if (!node.empty()) task = std::move(node.mapped());
    }
    if (task) task();
  }
}

}  // namespace reverser::catalog
