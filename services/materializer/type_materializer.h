#pragma once

// Keeps one claimed (type, scope) materialized in Redis, on its own thread, in one of two
// intake modes (TypeMaterializerOptions::intake):
//
//  * watch (default, watch_intake.h): a reflector turns the initial set into the checkpoint and
//    every later change into a stream entry, written in order by an append writer thread.
//  * audit (audit_relist_intake.h): no watch; the audit webhook appends the stream entries and
//    this worker LISTs at start, every `relist_interval` and early when the webhook asks, to
//    refill (and heal) the checkpoint.
//
// Both share MaterializationCore (materialization_core.h): the Redis materialization itself
// (checkpoint, appends, the state record, sealed bodies of sensitive types), the detection and
// rebuild of lost Redis state, the status, compaction past `compact_after_entries` and the
// admin calls.

#include <memory>
#include <string>
#include <thread>

#include "libs/kube/rest_client.h"
#include "libs/runtime/metrics.h"
#include "services/materializer/materialization_core.h"

namespace reverser::materializer {

class TypeMaterializer {
 public:
  TypeMaterializer(std::shared_ptr<kube::RestClient> client, TypeMaterializerOptions options,
                   runtime::MetricsRegistry* metrics);
  ~TypeMaterializer();

  // Starts the worker thread.
  void Start();
  // Stops the intake and joins the thread.
  void Stop();
  // Stops and deletes the materialization's keys (a released claim).
  absl::Status StopAndRelease();

  // Folds the stream into a new checkpoint now (admin Compact). Safe beside the worker: it uses
  // its own connection and swaps only onto the checkpoint it folded from.
  absl::StatusOr<redisstore::CompactionResult> CompactNow() { return core_.CompactNow(); }

  // What Redis holds for this materialization (the admin connection, like CompactNow).
  using StoredFacts = materializer::StoredFacts;
  absl::StatusOr<StoredFacts> ReadStoredFacts() { return core_.ReadStoredFacts(); }

  TypeMaterializerStatus Status() const { return core_.Status(); }
  const core::GroupVersionResource& gvr() const { return core_.options().gvr; }
  const core::WatchScope& scope() const { return core_.options().scope; }
  std::string Name() const { return core_.Name(); }             // "apps/v1/deployments cluster"
  bool sensitive() const { return core_.options().sensitive; }  // its bodies are sealed in Redis
  // A write was refused by its fence (another replica took the unit over): it has stopped.
  bool fenced() const { return core_.fenced(); }

 private:
  void Run();

  MaterializationCore core_;
  std::unique_ptr<ClaimIntake> intake_;
  std::thread thread_;
};

}  // namespace reverser::materializer
