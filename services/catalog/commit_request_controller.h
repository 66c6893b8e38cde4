#pragma once

// The CommitRequest controller's I/O around CommitRequestTracker: a list+watch of
// configbutler.ai/v1alpha3 CommitRequests, and one worker thread that owns the tracker and runs
// its actions one at a time (as the reference reconciles one request at a time): command-author
// lookups, status subresource writes, and GitWorker.AttachCommit calls. Inputs from the watch are
// queued for the worker, which wakes on them and at the tracker's next due time.

#include <deque>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "libs/core/clock.h"
#include "libs/kube/reflector.h"
#include "libs/kube/rest_client.h"
#include "libs/runtime/metrics.h"
#include "proto/reverser/v1/gitworker.pb.h"
#include "services/catalog/commit_request_tracker.h"

namespace reverser::catalog {

// Where a CommitRequest's command author was recorded (by the admission webhook).
class CommandAuthorSource {
 public:
  virtual ~CommandAuthorSource() = default;
  // The username recorded for the request `uid`; nullopt when none was recorded.
  virtual absl::StatusOr<std::optional<std::string>> Lookup(const std::string& uid) = 0;
};

// The gitworker's AttachCommit.
class CommitAttacher {
 public:
  virtual ~CommitAttacher() = default;
  virtual absl::StatusOr<reverser::v1::FinalizeResult> Attach(
      const reverser::v1::AttachCommitRequest& request) = 0;
};

struct CommitRequestControllerDeps {
  kube::RestClient* client = nullptr;
  CommandAuthorSource* authors = nullptr;  // null: every request falls back to the committer
  CommitAttacher* attacher = nullptr;
  const core::Clock* clock = nullptr;
  runtime::MetricsRegistry* metrics = nullptr;
};

class CommitRequestController final : public kube::ReplacingHandler {
 public:
  explicit CommitRequestController(CommitRequestControllerDeps deps);
  ~CommitRequestController() override;

  void Start();
  void Stop();
  // Re-judges due times now (tests that move a fake clock).
  void Kick();

  void OnReplaced(std::vector<nlohmann::json> objects, const std::string& resource_version,
                  kube::SyncReason reason) override;
  void OnLiveEvent(const kube::ReflectorEvent& event) override;

 private:
  struct Replace {
    std::vector<nlohmann::json> objects;
  };
  struct Observe {
    nlohmann::json object;
  };
  struct Forget {
    nlohmann::json object;
  };
  using Input = std::variant<Replace, Observe, Forget>;

  void Post(Input input);
  void Loop();
  void Run(const CommitRequestAction& action);
  void Count(const char* name, const char* help, const runtime::Labels& labels);

  CommitRequestControllerDeps deps_;
  CommitRequestTracker tracker_;  // worker thread only
  std::unique_ptr<kube::Reflector> reflector_;
  std::thread watch_thread_;
  std::thread worker_thread_;
  absl::Mutex mu_;
  std::deque<Input> inputs_ ABSL_GUARDED_BY(mu_);
  bool kicked_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool started_ = false;
};

}  // namespace reverser::catalog
