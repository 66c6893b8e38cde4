#pragma once

// The part of a TypeMaterializer both intakes share: one claim's materialization in Redis. It
// owns the worker's Redis connection and MaterializationStore (checkpoint, appends, the
// `…:state` record; a sensitive type's bodies sealed with the BodyCipher), the LineageTracker
// that notices lost Redis state, the status the admin API reads, the stop signal, retries with
// backoff, compaction, and the admin connection for CompactNow / ReadStoredFacts.
//
// Threads: Open, SetPhase and the store belong to the claim's worker thread (and, in the watch
// intake, to its append writer while it writes a batch; the intake hands the store over by
// flushing). Status, UpdateStatus, OnStateLost, OnRebuilt, RequestStop and WaitForStop are
// safe from any thread. CompactNow and ReadStoredFacts use their own connection, so an admin
// call never waits for the worker.

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "libs/core/types.h"
#include "libs/kube/reflector.h"
#include "libs/redisstore/keys.h"
#include "libs/redisstore/lineage.h"
#include "libs/redisstore/materialization_store.h"
#include "libs/redisstore/redis_connection.h"
#include "libs/runtime/log.h"
#include "libs/runtime/metrics.h"
#include "services/materializer/claim_registry.h"

namespace reverser::materializer {

enum class Intake { kWatch, kAudit };
absl::StatusOr<Intake> ParseIntake(absl::string_view name);  // "watch" | "audit"

struct TypeMaterializerOptions {
  core::GroupVersionResource gvr;
  core::WatchScope scope;
  redisstore::RedisOptions redis;
  redisstore::KeyPrefix prefix = redisstore::KeyPrefix::Default();
  // Fold the stream into a new checkpoint once it holds more entries than this.
  size_t compact_after_entries = 10000;
  bool use_watch_list = true;
  Intake intake = Intake::kWatch;
  // Audit intake: how often the checkpoint is refilled by a LIST.
  absl::Duration relist_interval = absl::Minutes(5);
  // Audit intake: how often the stream length is checked against compact_after_entries.
  absl::Duration compaction_check_interval = absl::Seconds(10);
  // Audit intake: where the audit writer asks for an early LIST (may be null), how often that is
  // looked at, and the least time between two LISTs it causes.
  ClaimRegistry* relist_requests = nullptr;
  absl::Duration relist_request_poll = absl::Seconds(1);
  absl::Duration relist_request_min_gap = absl::Seconds(5);
  // Audit intake: a difference a LIST finds is healed (checkpoint replaced) only once the
  // stream has not moved for that object for this long — before that its audit event may still
  // be on its way (kube-apiserver batches up to 30 s).
  absl::Duration heal_settle = absl::Seconds(45);
  int64_t list_page_size = 500;
  // How often the keys are checked for lost state when no append checks them.
  absl::Duration state_check_interval = absl::Seconds(5);
  // A sensitive type's bodies are sealed with `body_cipher` before Redis; without a cipher its
  // writes fail (nothing sensitive is stored in plaintext). Not owned.
  bool sensitive = false;
  const redisstore::BodyCipher* body_cipher = nullptr;
  // Membership (--membership): the unit's fence (the supervisor took the unit over). Every
  // write of this worker carries it and is refused once another replica took the unit over
  // (nothing written; the worker stops at once). nullopt: unfenced, a single replica.
  std::optional<redisstore::Fence> fence;
  // With a fence: whether this replica may write now (its Lease is held, Replica::Held); while
  // not, writes wait and are retried (Unavailable). Empty: always.
  std::function<bool()> may_write;
  // With a fence: told once, from whichever worker thread met it, that a write was refused.
  std::function<void()> on_fenced;
};

// The status reason while a materialization is rebuilt after its Redis state was lost.
inline constexpr absl::string_view kRedisStateLostReason = "RedisStateLost";

// A snapshot of what the worker is doing, for admin calls and readiness.
struct TypeMaterializerStatus {
  std::string phase;   // Replaying, Streaming, Blocked
  std::string reason;  // InitialReplay, ResumeReplay, ExpiredResourceVersion, WatchError,
                       // RedisStateLost, ...
  std::string checkpoint;
  int64_t appended = 0;
  int64_t diverted = 0;
  int64_t replays = 0;
  int64_t relists = 0;       // audit intake: LISTs completed
  int64_t state_losses = 0;  // lost Redis state detected (each rebuilt)
  std::string last_error;
  // Objects the client refused (too deep to store), and the last one: "Kind ns/name: why".
  int64_t refused_objects = 0;
  std::string last_refused;
};

// What Redis holds for a materialization, whichever intake writes it (the audit intake appends
// outside the worker): the stream's length and the all-time diverted count.
struct StoredFacts {
  int64_t stream_length = 0;
  int64_t diverted = 0;
};

class MaterializationCore {
 public:
  // Told (once per rebuild, outside the core's lock) that lost state was detected, so the
  // intake drops what the rebuild covers and restarts its source.
  class StateLostListener {
   public:
    virtual ~StateLostListener() = default;
    virtual void OnStateLost() = 0;
  };

  MaterializationCore(TypeMaterializerOptions options, runtime::MetricsRegistry* metrics);

  const TypeMaterializerOptions& options() const { return options_; }
  runtime::MetricsRegistry* metrics() const { return metrics_; }
  const runtime::Labels& labels() const { return labels_; }
  std::string Name() const;  // "apps/v1/deployments cluster"
  void SetStateLostListener(StateLostListener* listener) { listener_ = listener; }

  // Where a worker starts: whether Redis holds a checkpoint this worker can resume from, and
  // the stream top's RV (what a resumed watch needs after it).
  struct Opened {
    bool has_checkpoint = false;
    uint64_t resume_rv = 0;
  };
  // Connects (retried until it works or the worker stops), reads and judges the checkpoint; a
  // damaged one counts as lost state (the first LIST rebuilds it). nullopt: stopping.
  std::optional<Opened> Open();
  // The worker's store and connection (valid after Open).
  redisstore::MaterializationStore& store() { return *store_; }
  redisstore::RedisConnection& redis() { return *redis_; }
  redisstore::LineageTracker& lineage() { return lineage_; }
  // This claim's store on `redis`, sealing bodies when the type is sensitive.
  redisstore::MaterializationStore StoreOn(redisstore::RedisConnection* redis) const;

  // Stop signal: RequestStop sets it and wakes WaitForStop.
  void RequestStop();
  bool stopping() const { return stopping_.load(); }
  // Waits up to `timeout` for RequestStop(); true when stopping.
  bool WaitForStop(absl::Duration timeout);

  // Retries `op` against Redis until it succeeds or the worker stops (backoff 100 ms doubling
  // to 5 s). Lost state is not retried: what to write has to be rebuilt first.
  template <typename Fn>
  auto WithRetry(const char* what, Fn op) -> decltype(op());

  TypeMaterializerStatus Status() const;
  bool InPhase(absl::string_view phase) const;  // cheaper than Status() per event
  template <typename Fn>
  void UpdateStatus(Fn fn) {
    std::lock_guard lock(mu_);
    fn(status_);
  }
  // The reason of the last Streaming phase: restored when a resumed watch gets past a 403.
  std::string streaming_reason() const;
  // Also writes the `…:state` record (message: `detail`, else the reason); while rebuilding
  // after lost state, Replaying reads RedisStateLost.
  void SetPhase(const std::string& phase, const std::string& reason,
                const std::string& detail = "");

  // Looks at the keys on `store` (a mark read in the tracker's current epoch); the loss if the
  // state is lost, nullopt otherwise or when Redis does not answer.
  std::optional<redisstore::StateLoss> CheckState(redisstore::MaterializationStore& store);
  // A write was refused by the unit's fence (another replica took the unit over): counted
  // (reverser_materializer_fenced_writes_total), logged and reported once, then the worker
  // stops; every later write is refused here without reaching Redis. Any thread.
  void OnFenced(const absl::Status& status);
  bool fenced() const { return fenced_.load(); }
  // Stops the intake's blocking read (the TypeMaterializer sets it to its intake's Interrupt).
  void SetInterrupt(std::function<void()> interrupt) { interrupt_ = std::move(interrupt); }
  // Records a detected loss (once per rebuild): status, metric, log, then the listener.
  void OnStateLost(redisstore::StateLoss loss);
  // The rebuild's checkpoint is in place.
  void OnRebuilt(const redisstore::CheckpointSwap& swap);
  bool rebuilding() const;

  // Counts, reports (status, and a log line once per object version) a refused object; returns
  // its identity ("" without a name). Called on the worker's reading thread only.
  std::string RecordRefusal(const kube::RefusedObject& object, absl::string_view event_type);
  // A refused object keeps what the materialization last stored for it: copied from
  // `materialized` into `items` for each identity in `refused`.
  static void KeepLastStored(const redisstore::ObjectMap& materialized,
                             const std::vector<std::string>& refused, redisstore::ObjectMap& items);

  // Folds the stream when it holds more than compact_after_entries (worker's store).
  void CompactIfLong();
  void CountCompaction(const redisstore::CompactionResult& result);

  // Admin calls, on the admin connection (opened on first use).
  absl::StatusOr<redisstore::CompactionResult> CompactNow();
  absl::StatusOr<StoredFacts> ReadStoredFacts();
  // Deletes the materialization's keys (a released claim), on a connection of its own.
  absl::Status Release();

 private:
  // A store on the admin connection; call with admin_mu_ held.
  absl::StatusOr<redisstore::MaterializationStore> AdminStore();
  void CountRetry(const char* what, const absl::Status& status);

  const TypeMaterializerOptions options_;
  runtime::MetricsRegistry* const metrics_;
  runtime::Labels labels_;
  StateLostListener* listener_ = nullptr;

  std::unique_ptr<redisstore::RedisConnection> redis_;
  std::unique_ptr<redisstore::MaterializationStore> store_;
  // What this worker has seen of the materialization (guards store_'s appends).
  redisstore::LineageTracker lineage_;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> fenced_{false};
  std::function<void()> interrupt_;
  std::set<std::string> logged_refusals_;  // "identity@rv" already logged (bounded)

  mutable std::mutex mu_;
  std::condition_variable stop_cv_;  // with mu_
  TypeMaterializerStatus status_;
  std::string streaming_reason_ = "ResumedFromCursor";
  // From the detection until the rebuilt checkpoint is in place.
  std::optional<redisstore::StateLoss> rebuilding_;
  bool state_record_stale_ = false;  // the next SetPhase writes the record regardless
  absl::Status fenced_status_;       // the refusal that stopped the worker

  std::mutex admin_mu_;  // the admin connection
  std::unique_ptr<redisstore::RedisConnection> admin_redis_;
};

// One intake mode: what fills the materialization, run on the claim's worker thread
// (TypeMaterializer::Run) after MaterializationCore::Open.
class ClaimIntake {
 public:
  virtual ~ClaimIntake() = default;
  // Returns once the core is stopping.
  virtual void Run(const MaterializationCore::Opened& opened) = 0;
  // After MaterializationCore::RequestStop: wakes what Run waits on that WaitForStop does not
  // (the watch's blocking read).
  virtual void Interrupt() {}
};

template <typename Fn>
auto MaterializationCore::WithRetry(const char* what, Fn op) -> decltype(op()) {
  absl::Duration backoff = absl::Milliseconds(100);
  while (true) {
    auto result = op();
    if (redisstore::IsFenced(result.status())) {
      OnFenced(result.status());
      return result;
    }
    if (result.ok() || stopping_ || redisstore::StateLossOf(result.status())) return result;
    CountRetry(what, result.status());
    if (WaitForStop(backoff)) return result;  // a stop does not wait out the backoff
    backoff = std::min(backoff * 2, absl::Seconds(5));
  }
}

}  // namespace reverser::materializer
