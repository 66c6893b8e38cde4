#pragma once

// Keeps one claimed (type, scope) materialized in Redis, on its own thread, in one of two
// intake modes:
//
//  * watch (default): a reflector (WatchList, or LIST+WATCH) turns the initial set into the
//    checkpoint and every later change into a stream entry. Writes that fail (Redis down) are
//    retried in order before the watch reads on, so nothing the API server reported is skipped.
//    Resumes from the stream top after a restart (no replay) and replays when there is no
//    checkpoint or the server says the RV expired.
//  * audit: no watch. The stream is fed by the audit webhook (AuditStreamWriter); this worker
//    LISTs at start and every `relist_interval`. A LIST whose objects differ from checkpoint +
//    stream (up to the LIST's RV) replaces the checkpoint at that RV — healing whatever the
//    audit log missed — while entries above it stay; a LIST that agrees only folds the stream
//    up to its RV (a compaction), so readers that are caught up need not splice again. A
//    difference counts only once it has lasted `heal_settle` with no stream entry for that
//    object (its audit event may be in flight); until then the LIST is only folded and a
//    follow-up LIST is scheduled. When the audit writer reports a change it could not stream
//    (ClaimRegistry::RequestRelist), the LIST comes early.
//
// Either way the stream is compacted once it holds more than `compact_after_entries` entries.
//
// Lost Redis state (a restart without persistence, a rescheduled pod, an older snapshot loaded)
// is noticed, not assumed from memory: every watch append is judged against what this worker
// has seen of the materialization (libs/redisstore/lineage.h) inside its own transaction, and
// every `state_check_interval` the keys are looked at even when nothing changes. A checkpoint
// that vanished, lost items or went backwards is rebuilt from a fresh LIST at once (a new
// incarnation; watch intake: the watch restarts with a full sync; audit intake: the LIST
// replaces the checkpoint without waiting for differences to settle), counted and logged once,
// and shown as phase Replaying, reason RedisStateLost, until the new checkpoint is in place.
//
// Watch intake writes live changes on a second thread, in batches: the reflector thread parses
// and queues each change, and an append writer sends whatever has queued up meanwhile in one
// pipelined AppendAll (up to kMaxAppendBatch). The queue is bounded, so while Redis is down the
// watch stops reading once it is full. Everything else the reflector thread writes (checkpoint
// swaps, phase records) first waits for the queue to be written (FlushAppends), so the order of
// writes is the order of events.

#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "libs/core/types.h"
#include "libs/kube/reflector.h"
#include "libs/kube/rest_client.h"
#include "libs/redisstore/keys.h"
#include "libs/redisstore/materialization_store.h"
#include "libs/redisstore/redis_connection.h"
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

  // Folds the stream into a new checkpoint now (admin Compact). Safe beside the worker: it uses
  // its own connection and swaps only onto the checkpoint it folded from.
  absl::StatusOr<redisstore::CompactionResult> CompactNow();

  // What Redis holds for this materialization, whichever intake writes it (the audit intake
  // appends outside this worker): the stream's length and the all-time diverted count. Uses
  // the admin connection, like CompactNow.
  struct StoredFacts {
    int64_t stream_length = 0;
    int64_t diverted = 0;
  };
  absl::StatusOr<StoredFacts> ReadStoredFacts();

  TypeMaterializerStatus Status() const;
  const core::GroupVersionResource& gvr() const { return options_.gvr; }
  const core::WatchScope& scope() const { return options_.scope; }
  std::string Name() const;  // "apps/v1/deployments cluster"
  bool sensitive() const { return options_.sensitive; }  // its bodies are sealed in Redis

 private:
  void Run();
  void RunWatch(bool has_checkpoint, uint64_t resume_rv);
  void RunAuditIntake();
  // Watch intake: RunWatch again, with a full sync, each time lost state asks for a rebuild.
  void RunWatchIntake(bool has_checkpoint, uint64_t resume_rv);
  // One LIST, then a checkpoint replacement (differences found, or `rebuild`: lost state) or a
  // fold up to its RV.
  absl::Status Relist(bool rebuild);
  // Looks at the keys on `store` (a mark read in the tracker's current epoch); the loss if the
  // state is lost, nullopt otherwise or when Redis does not answer.
  std::optional<redisstore::StateLoss> CheckState(redisstore::MaterializationStore& store);
  // Records a detected loss (once per rebuild): status, metric, log; watch intake: drops the
  // queued appends (the full sync covers them) and stops the watch so RunWatchIntake rebuilds.
  void OnStateLost(redisstore::StateLoss loss);
  // The rebuild's checkpoint is in place.
  void OnRebuilt(const redisstore::CheckpointSwap& swap);
  // Waits up to `timeout` for Stop(); true when stopping.
  bool WaitForStop(absl::Duration timeout);
  void CountCompaction(const redisstore::CompactionResult& result);
  // A store on the admin connection (opened on first use); call with admin_mu_ held.
  absl::StatusOr<redisstore::MaterializationStore> AdminStore();
  // This claim's store on `redis`, sealing bodies when the type is sensitive.
  redisstore::MaterializationStore StoreOn(redisstore::RedisConnection* redis) const;
  void OnEvent(const kube::ReflectorEvent& event) override;
  void OnError(const absl::Status& status) override;
  void OnRefused(kube::ReflectorEventType type, const kube::RefusedObject& object,
                 bool initial) override;
  // Counts, reports (status, and a log line once per object version) a refused object; returns
  // its identity ("" without a name).
  std::string RecordRefusal(const kube::RefusedObject& object, absl::string_view event_type);
  // A refused object keeps what the materialization last stored for it: copied from
  // `materialized` into `items` for each identity in `refused`.
  void KeepLastStored(const redisstore::ObjectMap& materialized,
                      const std::vector<std::string>& refused, redisstore::ObjectMap& items);
  // Retries `op` against Redis until it succeeds or the worker stops.
  template <typename Fn>
  auto WithRetry(const char* what, Fn op) -> decltype(op());
  // Also writes the `…:state` record (message: `detail`, else the reason); while rebuilding
  // after lost state, Replaying reads RedisStateLost.
  void SetPhase(const std::string& phase, const std::string& reason,
                const std::string& detail = "");
  void MaybeCompact(size_t appended);
  void CompactIfLong();

  // The append writer (watch intake).
  static constexpr size_t kMaxAppendBatch = 256;
  static constexpr size_t kMaxQueuedAppends = 4 * kMaxAppendBatch;
  void StartAppendWriter();
  // Writes what is queued (one attempt each when stopping), then joins the writer.
  void StopAppendWriter();
  // Queues a live change; blocks while kMaxQueuedAppends are waiting.
  void QueueAppend(redisstore::StreamEntry entry);
  // Returns once everything queued so far is written (or dropped because the worker stops).
  void FlushAppends();
  void WriteAppends();         // the writer thread's loop
  void CheckStateWhileIdle();  // the writer thread, on its own connection
  void CountAppend(const redisstore::AppendResult& result);

  std::shared_ptr<kube::RestClient> client_;
  TypeMaterializerOptions options_;
  runtime::MetricsRegistry* metrics_;
  runtime::Labels labels_;

  std::unique_ptr<redisstore::RedisConnection> redis_;
  std::unique_ptr<redisstore::MaterializationStore> store_;
  // What this worker has seen of the materialization (guards store_'s appends).
  redisstore::LineageTracker lineage_;
  // Lost state was detected: the watch is being stopped for a rebuild (events are ignored and
  // appends dropped until the next full sync starts).
  std::atomic<bool> rebuild_requested_{false};
  // From the detection until the rebuilt checkpoint is in place (guarded by mu_).
  std::optional<redisstore::StateLoss> rebuilding_;
  bool state_record_stale_ = false;  // with mu_: the next SetPhase writes the record regardless
  // The append writer's connection for state checks while idle (its thread only).
  std::unique_ptr<redisstore::RedisConnection> check_redis_;
  std::unique_ptr<kube::Reflector> reflector_;
  std::thread thread_;
  std::atomic<bool> stopping_{false};

  // Reflector-thread state.
  bool collecting_ = false;
  // The reason of the last Streaming phase: restored when a resumed watch gets past a 403.
  std::string streaming_reason_ = "ResumedFromCursor";
  redisstore::ObjectMap pending_checkpoint_;
  std::vector<std::string> refused_in_sync_;  // identities refused in the listing under way
  std::set<std::string> logged_refusals_;     // "identity@rv" already logged (bounded)

  // Append-writer state. store_ and redis_ belong to the writer while it writes a batch and to
  // the reflector thread otherwise (it flushes first).
  std::mutex append_mu_;
  std::condition_variable append_cv_;  // with append_mu_: queue or writer state changed
  std::deque<redisstore::StreamEntry> append_queue_;
  bool append_writing_ = false;      // a batch taken from the queue is being written
  bool append_writer_exit_ = false;  // drain the queue, then exit
  std::thread append_writer_;
  size_t appends_since_compaction_check_ = 0;  // writer thread

  // Audit-intake thread state: differences between LIST and checkpoint + stream not yet healed,
  // by identity: what checkpoint + stream held for it (nullopt: nothing) when first seen.
  struct UnhealedDifference {
    std::optional<std::string> materialized;
    absl::Time first_seen;
  };
  std::map<std::string, UnhealedDifference> unhealed_;

  mutable std::mutex mu_;
  std::condition_variable stop_cv_;  // with mu_
  TypeMaterializerStatus status_;
  std::mutex admin_mu_;  // CompactNow's own connection
  std::unique_ptr<redisstore::RedisConnection> admin_redis_;
};

}  // namespace reverser::materializer
