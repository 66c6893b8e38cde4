#pragma once

// Keeps one claimed (type, scope) materialized in Redis: a reflector (WatchList, or LIST+WATCH)
// on its own thread turns the initial set into the checkpoint and every later change into a
// stream entry. Writes that fail (Redis down) are retried in order before the watch reads on,
// so nothing the API server reported is skipped. Resumes from the stream top after a restart
// (no replay) and replays when there is no checkpoint or the server says the RV expired.

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "libs/core/types.h"
#include "libs/kube/reflector.h"
#include "libs/kube/rest_client.h"
#include "libs/redisstore/keys.h"
#include "libs/redisstore/materialization_store.h"
#include "libs/redisstore/redis_connection.h"
#include "libs/runtime/metrics.h"

namespace reverser::materializer {

struct TypeMaterializerOptions {
  core::GroupVersionResource gvr;
  core::WatchScope scope;
  redisstore::RedisOptions redis;
  redisstore::KeyPrefix prefix = redisstore::KeyPrefix::Default();
  // Fold the stream into a new checkpoint once it holds more entries than this.
  size_t compact_after_entries = 10000;
  bool use_watch_list = true;
};

// A snapshot of what the worker is doing, for admin calls and readiness.
struct TypeMaterializerStatus {
  std::string phase;   // Replaying, Streaming, Blocked
  std::string reason;  // InitialReplay, ResumeReplay, ExpiredResourceVersion, WatchError, ...
  std::string checkpoint;
  int64_t appended = 0;
  int64_t diverted = 0;
  int64_t replays = 0;
  std::string last_error;
};

class TypeMaterializer : private kube::WatchHandler {
 public:
  TypeMaterializer(std::shared_ptr<kube::RestClient> client, TypeMaterializerOptions options,
                   runtime::MetricsRegistry* metrics);
  ~TypeMaterializer() override;

  // Starts the worker thread.
  void Start();
  // Stops the watch and joins the thread.
  void Stop();
  // Stops and deletes the materialization's keys (a released claim).
  absl::Status StopAndRelease();

  TypeMaterializerStatus Status() const;
  std::string Name() const;  // "apps/v1/deployments cluster"

 private:
  void Run();
  void OnEvent(const kube::ReflectorEvent& event) override;
  void OnError(const absl::Status& status) override;
  // Retries `op` against Redis until it succeeds or the worker stops.
  template <typename Fn>
  auto WithRetry(const char* what, Fn op) -> decltype(op());
  void SetPhase(const std::string& phase, const std::string& reason);
  void MaybeCompact();

  std::shared_ptr<kube::RestClient> client_;
  TypeMaterializerOptions options_;
  runtime::MetricsRegistry* metrics_;
  runtime::Labels labels_;

  std::unique_ptr<redisstore::RedisConnection> redis_;
  std::unique_ptr<redisstore::MaterializationStore> store_;
  std::unique_ptr<kube::Reflector> reflector_;
  std::thread thread_;
  std::atomic<bool> stopping_{false};

  // Reflector-thread state.
  bool collecting_ = false;
  redisstore::ObjectMap pending_checkpoint_;
  size_t appends_since_compaction_check_ = 0;

  mutable std::mutex mu_;
  TypeMaterializerStatus status_;
};

}  // namespace reverser::materializer
