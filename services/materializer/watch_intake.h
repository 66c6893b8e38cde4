#pragma once

// The watch intake (--intake=watch) of one claim: a kube::Reflector (WatchList, or LIST+WATCH)
// turns the initial set into the checkpoint at EndOf(R) and every later change into a stream
// entry. Resumes from the stream top after a restart (no replay) and replays when there is no
// checkpoint or the server says the RV expired; lost Redis state stops the watch and starts a
// new one with a full sync.
//
// Two threads: the claim's worker thread runs the reflector (it parses and queues each
// change), and an append writer sends whatever has queued up meanwhile in one pipelined
// AppendAll (up to kMaxAppendBatch). The queue is bounded, so while Redis is down the watch
// stops reading once it is full. Everything else the reflector thread writes (checkpoint swaps,
// phase records) first waits for the queue to be written (FlushAppends), so the order of writes
// is the order of events. While nothing is appended the writer looks at the keys every
// state_check_interval, so lost state is noticed without waiting for a change.

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "libs/kube/reflector.h"
#include "libs/kube/rest_client.h"
#include "services/materializer/materialization_core.h"

namespace reverser::materializer {

class WatchIntake final : public ClaimIntake,
                          private kube::WatchHandler,
                          private MaterializationCore::StateLostListener {
 public:
  WatchIntake(std::shared_ptr<kube::RestClient> client, MaterializationCore* core);
  ~WatchIntake() override;

  void Run(const MaterializationCore::Opened& opened) override;
  void Interrupt() override;

 private:
  static constexpr size_t kMaxAppendBatch = 256;
  static constexpr size_t kMaxQueuedAppends = 4 * kMaxAppendBatch;

  // One watch, until it ends (stop, a rebuild, an error it cannot retry).
  void RunWatch(bool has_checkpoint, uint64_t resume_rv);

  // kube::WatchHandler (reflector thread).
  void OnEvent(const kube::ReflectorEvent& event) override;
  void OnError(const absl::Status& status) override;
  void OnRefused(kube::ReflectorEventType type, const kube::RefusedObject& object,
                 bool initial) override;
  // The listing is complete: its objects become the checkpoint at EndOf(rv).
  void ReplaceCheckpoint(const std::string& resource_version);

  // MaterializationCore::StateLostListener (any thread): drops the queued appends (the full
  // sync covers them) and stops the watch so Run rebuilds.
  void OnStateLost() override;

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
  void MaybeCompact(size_t appended);

  std::shared_ptr<kube::RestClient> client_;
  MaterializationCore& core_;

  std::mutex reflector_mu_;  // reflector_ is replaced on the worker thread, stopped from others
  std::unique_ptr<kube::Reflector> reflector_;
  // Lost state was detected: the watch is being stopped for a rebuild (events are ignored and
  // appends dropped until the next full sync starts).
  std::atomic<bool> rebuild_requested_{false};

  // Reflector-thread state.
  bool collecting_ = false;
  redisstore::ObjectMap pending_checkpoint_;
  std::vector<std::string> refused_in_sync_;  // identities refused in the listing under way

  // Append-writer state. The core's store belongs to the writer while it writes a batch and to
  // the reflector thread otherwise (it flushes first).
  std::mutex append_mu_;
  std::condition_variable append_cv_;  // with append_mu_: queue or writer state changed
  std::deque<redisstore::StreamEntry> append_queue_;
  bool append_writing_ = false;      // a batch taken from the queue is being written
  bool append_writer_exit_ = false;  // drain the queue, then exit
  std::thread append_writer_;
  size_t appends_since_compaction_check_ = 0;  // writer thread
  // The writer's connection for state checks while idle (its thread only).
  std::unique_ptr<redisstore::RedisConnection> check_redis_;
};

}  // namespace reverser::materializer
