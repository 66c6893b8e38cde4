#pragma once

// One (GitTarget, type, scope) delivery, driven by the reader of its materialization
// (materialization_reader.h: one thread and one Redis connection per materialization, shared by
// every target that follows it). Never blocks the reader but to send (gitworker credit):
//   1. Read the delivery cursor (the last position pushed to Git for this target). None, or the
//      stream was trimmed past it → splice (checkpoint + tail → ClusterSnapshot) and send it as
//      a resync. No checkpoint yet → wait (fail closed: no resync, no sweep).
//   2. Tail the stream after the cursor: each entry → live event (scope, deletion-as-intent,
//      operation filter, sanitize, no-op dedup) → author resolution (exact `uid:rv` fact;
//      `:last` only for removals; `rv:` hatch), polled every 150 ms up to the grace, then the
//      committer. A wait holds back only later events of the same object.
//   3. Acks from the gitworker advance the cursor to the highest position below which every
//      entry is pushed (or needed nothing); it is persisted monotonically in Redis, with its TTL,
//      and with it the reference's watch cursor of each watch the target has on the type (the
//      RV, 1 h TTL; same script). An idle stream offers its cursor again every
//      `cursor_refresh`, so neither expires while the GitTarget exists.
//   4. When the gitworker stream breaks, start over at 1 from the persisted cursor.
//   5. Resplice() (admin): start over at 1 and splice even though a cursor exists. The resync is
//      acked at its coverage head, which covers everything delivered or pending before it, so
//      the cursor never moves backwards nor past an entry that is not in Git.
//
// Lost Redis state (libs/redisstore/lineage.h) is judged on every read, against what this
// stream has seen of the materialization in this process (across sessions), never assumed:
//   * the checkpoint vanished, lost items, or the materialization went backwards (an older
//     snapshot): stop tailing, deliver nothing, and wait — state Replaying, reason
//     RedisStateLost — until the materializer has rebuilt it (a new incarnation at or past
//     everything seen) or the same lineage caught up again. A resync is only ever built from a
//     usable checkpoint at or past what was delivered, so its sweep never deletes the file of
//     an object that still exists.
//   * a new incarnation (rebuilt from a LIST): splice again; the cursor of the old one no
//     longer applies.
//   * the delivery cursor vanished or went backwards while the lineage is the same: the cursor
//     this process acked is put back and tailing goes on from it.
// Each detection is counted (reverser_splicer_state_lost_total{reason}) and logged once.
//
// An object too deep to deliver (splice.h, TooDeepToDeliver) is refused without stopping the
// stream: counted (reverser_splicer_objects_refused_total{reason="too_deep"}, each time it is
// read), logged once until it is deliverable again, and reported on the GitTarget's status
// (RefusalBook, LIMIT_EXCEEDED). A resync lists it in `refused`, so its file is kept.

#include <atomic>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>

#include "libs/core/stream_position.h"
#include "libs/redisstore/author_fact_store.h"
#include "libs/redisstore/delivery_cursor_store.h"
#include "libs/redisstore/materialization_store.h"
#include "libs/runtime/metrics.h"
#include "services/splicer/delivery_client.h"
#include "services/splicer/materialization_reader.h"
#include "services/splicer/refusal_book.h"
#include "services/splicer/splice.h"

namespace reverser::splicer {

struct SpliceStreamOptions {
  reverser::v1::GitTargetRef target;
  reverser::v1::Claim claim;
  TargetScope scope;
  redisstore::RedisOptions redis;
  redisstore::KeyPrefix prefix = redisstore::KeyPrefix::Default();
  // Opens sealed bodies (sensitive types) and seals what a sensitive stream compacts. Not owned.
  const redisstore::BodyCipher* body_cipher = nullptr;
  absl::Duration attribution_grace = redisstore::kDefaultAttributionGrace;
  // Fact lookups for a waiting event start `attribution_first_poll` after it arrived and back off
  // by doubling to at most `attribution_poll` (the reference's fixed 150 ms): a fact usually
  // lands within tens of milliseconds, so a fixed 150 ms poll would add most of the latency.
  absl::Duration attribution_first_poll = absl::Milliseconds(5);
  absl::Duration attribution_poll = redisstore::kAttributionPollInterval;
  bool attribution = true;
  // Where authors come from (with attribution): the reference's audit facts, and facts the
  // admission webhook recorded (clusters without audit access). With both, an audit fact wins
  // and an admission fact is taken only when none came within the grace.
  bool audit_facts = true;
  bool admission_facts = false;
  size_t read_batch = 500;
  // Told what is sent and acked, so refusals of re-delivered objects clear (may be null).
  RefusalBook* refusals = nullptr;
  // The delivery cursor's TTL, and how often a stream whose cursor did not move offers it again
  // (keeping it, and the reference watch cursors, alive).
  absl::Duration cursor_ttl = redisstore::kDefaultDeliveryCursorTtl;
  absl::Duration cursor_refresh = absl::Minutes(5);
  // Write the reference's watch cursors (`P:watch:v1:target:…:last-rv`) with the cursor.
  bool reference_watch_cursors = true;
  // How often the materialization's state record is read: while its phase is Blocked (its
  // list/watch is forbidden, ...) the stream is Blocked with the materialization's reason.
  absl::Duration materialization_state_poll = absl::Seconds(2);
  // With --membership: the fence this replica took over the GitTarget with
  // (redisstore::OwnershipStore::TakeOver). Every cursor write is made only while it is current;
  // a refusal stops the stream at once (it delivers and writes nothing more), is counted
  // (reverser_splicer_fenced_writes_total) and reported to `on_fenced` (on the reader's thread:
  // post, do not block).
  std::optional<redisstore::Fence> fence;
  std::function<void(const reverser::v1::GitTargetRef&)> on_fenced;
};

struct SpliceStreamStatus {
  reverser::v1::StreamState state = reverser::v1::STREAM_STATE_REPLAYING;
  // InitialReplay (no cursor yet), ResumeReplay (splicing again over a cursor),
  // ExpiredResourceVersion (the stream was trimmed past the cursor), AllStreamsReady (streaming
  // after a splice), ResumedFromCursor (streaming without one), WatchError, RedisStateLost
  // (waiting for the materializer to rebuild a materialization Redis lost), or a blocked
  // materialization's reason (WatchNotPermitted: its list/watch is forbidden).
  std::string reason = "InitialReplay";
  std::string message = "waiting for the gitworker";  // human-readable detail of the state
  std::string cursor;                                 // persisted delivery cursor
  std::optional<absl::Time> last_push;  // the latest push an ack of this stream reported
  int64_t events_sent = 0;
  int64_t resyncs_sent = 0;
  int64_t state_losses = 0;  // lost Redis state detected
};

// The stream reason while waiting for a materialization Redis lost to be rebuilt.
inline constexpr absl::string_view kRedisStateLostReason = "RedisStateLost";

class SpliceStream : public DeliverySubscriber {
 public:
  // `reader`: the reader of the stream's materialization (not owned; it outlives the stream).
  // Null: the stream has a reader of its own.
  SpliceStream(SpliceStreamOptions options, DeliveryClient* delivery,
               runtime::MetricsRegistry* metrics, MaterializationReader* reader = nullptr);
  ~SpliceStream() override;

  void Start();
  // Asks the reader to let the stream go, without waiting (Stop() then returns sooner).
  void RequestStop();
  void Stop();
  // New scope (namespaces/operations changed): restart from the cursor with a fresh splice.
  // The same scope again changes nothing.
  void UpdateScope(const TargetScope& scope);
  // Splices again and sends a fresh resync, then goes on tailing (asynchronous: the reader
  // does it at its next round; a request survives a broken gitworker stream). `reason` and
  // `message`, when given, are the Replaying state's while it does (e.g. HistoryRewritten).
  void Resplice(const std::string& reason = "", const std::string& message = "");

  void OnAck(const reverser::v1::DeliveryAck& ack) override;
  SpliceStreamStatus Status() const;
  std::string key() const { return key_; }
  const reverser::v1::GitTargetRef& target() const { return options_.target; }
  const reverser::v1::Claim& claim() const { return options_.claim; }

 private:
  friend class MaterializationReader;
  // What the reader calls, on its thread.
  //   Attach: the reader's connection (cursor and fact lookups use it).
  //   Round: everything but the shared read (session start, waiting for a usable
  //     materialization, resync, events whose author resolved, cursor persistence).
  //   TailPosition: where the stream reads from while it tails, else nullopt.
  //   NextWake: how soon the stream has work due (bounds the reader's wait).
  //   OnBatch: the entries after TailPosition(); `facts_fired`: an author fact of the type came.
  //   Fail: a Redis failure of the reader: the session ends and is retried after a backoff.
  void Attach(redisstore::RedisConnection* redis);
  void Round(redisstore::MaterializationStore& store);
  std::optional<core::StreamPosition> TailPosition() const;
  absl::Duration NextWake(absl::Time now) const;
  bool AwaitingFacts() const;
  bool sensitive() const;
  void OnBatch(redisstore::MaterializationStore& store, const redisstore::StreamBatch& batch,
               bool facts_fired);
  void Fail(const absl::Status& status);

 private:
  struct Pending {
    core::StreamPosition position;
    DerivedEvent event;
    std::string resource_version;
    // The object's resourceVersion before this entry ("" unknown) and whether the entry is
    // its ADDED: what admission facts are keyed by.
    std::string previous_resource_version;
    bool created = false;
    absl::Time arrived;
    absl::Time observed;
    std::optional<reverser::v1::Author> author;
    bool resolved = false;
    absl::Time next_lookup;          // when to look for its author fact again
    absl::Duration lookup_interval;  // doubles after each miss, up to attribution_poll
  };

  // Where a session is: started (cursor read) and waiting for a usable materialization, sending
  // a resync, or tailing. kIdle: a new session starts (from the persisted cursor) at the next
  // round.
  enum class Phase { kIdle, kAwaiting, kResyncing, kTailing };
  absl::Status Step(redisstore::MaterializationStore& store);
  absl::Status StartSession();
  // True once the session knows where it goes on from (a resync to send, or tailing).
  absl::StatusOr<bool> AwaitStep(redisstore::MaterializationStore& store);
  absl::Status HandleBatch(redisstore::MaterializationStore& store,
                           const redisstore::StreamBatch& batch, bool facts_fired);
  void EndSession() { phase_ = Phase::kIdle; }
  // `reason`: the Replaying reason shown while splicing (InitialReplay or ResumeReplay). False
  // while the materialization has no usable checkpoint or was lost (tried again at a later
  // round); drops the pending events the resync covers.
  absl::StatusOr<bool> SendResync(redisstore::MaterializationStore& store,
                                  core::StreamPosition* head, const std::string& reason);
  // Where to tail from given the persisted cursor, or nullopt: splice. Puts back (and counts) a
  // cursor that vanished or went backwards in Redis while the lineage is the same.
  std::optional<core::StreamPosition> UsableCursor(
      const std::optional<redisstore::DeliveryCursor>& persisted);
  // True for a usable materialization (kSame, kRenewed); otherwise says why it waits (a loss,
  // a blocked materialization, or no first checkpoint), retries after a poll interval and
  // returns false.
  bool UsableOrWait(redisstore::MaterializationStore& store,
                    const redisstore::LineageTracker::Judgement& judged, const std::string& reason);
  // Reads the materialization's state record (at most every materialization_state_poll): while
  // it is Blocked, Status() shows this stream Blocked with its reason and message; once it is
  // not, the stream's own state again. Returns whether it is blocked.
  bool FollowMaterializationState(redisstore::MaterializationStore& store);
  // A lost materialization is being waited out: counted and logged once per detection.
  void NoteLoss(redisstore::StateLoss loss);
  void NoteUsableAgain();
  void CountLoss(redisstore::StateLoss loss);
  // An object too deep to deliver (TooDeepToDeliver), read at `position`: counted, logged once
  // per object until it is deliverable again, and reported to the GitTarget's status.
  void NoteTooDeep(const std::string& ns, const std::string& name, const std::string& uid,
                   core::StreamPosition position);
  void NoteTooDeepInResync(const reverser::v1::ClusterSnapshot& snapshot,
                           core::StreamPosition head);
  void Resolve(Pending& pending, bool final_attempt);
  // How long the stream read may block before a waiting event's next fact lookup is due.
  absl::Duration NextLookupIn(absl::Time now) const;
  // Looks up the author of every waiting event whose lookup is due (in stream order; later
  // events of an object still waiting are skipped).
  void ResolveDue(absl::Time now);
  absl::Status EmitReady();
  void MarkDone(core::StreamPosition position);
  // Persists the cursor when acks moved it, or when its refresh is due.
  void AdvanceCursor();
  void SetState(reverser::v1::StreamState state, const std::string& reason,
                const std::string& message);
  bool Stopping() const { return stopping_.load(); }
  // A cursor write was refused by the fence: stop delivering at once and report it.
  void Fenced(const absl::Status& refusal);

  SpliceStreamOptions options_;
  const std::string key_;
  DeliveryClient* delivery_;
  runtime::MetricsRegistry* metrics_;
  runtime::Labels labels_;
  MaterializationReader* reader_;
  std::unique_ptr<MaterializationReader> own_reader_;  // when no reader was given
  bool started_ = false;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> restart_{false};
  std::atomic<bool> resplice_requested_{false};
  std::string resplice_reason_;   // guarded by mu_
  std::string resplice_message_;  // guarded by mu_

  // Session state (reader thread), with `tracked_`/`sent_order_` shared with OnAck under mu_.
  Phase phase_ = Phase::kIdle;
  uint64_t generation_ = 0;  // the delivery generation the session sends on
  bool session_resplice_ = false;
  std::optional<redisstore::DeliveryCursor> session_cursor_;  // persisted at session start
  std::string resync_reason_;
  bool resync_is_resplice_ = false;
  core::StreamPosition position_;  // read position while tailing
  absl::Time retry_at_ = absl::InfinitePast();
  absl::Duration backoff_ = absl::Milliseconds(100);
  std::unique_ptr<redisstore::AuthorFactStore> facts_;
  std::unique_ptr<redisstore::DeliveryCursorStore> cursors_;
  DedupCache dedup_;
  // uid -> the resourceVersion of its newest entry read (objects in scope; admission_facts
  // only): an update's admission fact names the version it was admitted against. Seeded from a
  // resync's snapshot; empty after a resume from the cursor, so each object's first update
  // after that is the committer's.
  std::unordered_map<std::string, std::string> latest_versions_;
  std::deque<Pending> pending_;
  // What this stream has seen of the materialization, across sessions.
  redisstore::LineageTracker lineage_;
  std::string session_incarnation_;               // the lineage the session delivers from
  std::optional<redisstore::StateLoss> waiting_;  // a loss being waited out (counted once)
  absl::Time next_cursor_refresh_ = absl::InfinitePast();
  std::set<std::string> too_deep_logged_;  // identities whose refusal is logged (reader thread)
  absl::Time next_state_check_ = absl::InfinitePast();

  mutable std::mutex mu_;
  // Every position read or sent and not yet folded into the cursor → done?
  std::map<core::StreamPosition, bool> tracked_;
  std::deque<core::StreamPosition> sent_order_;
  core::StreamPosition cursor_;
  bool cursor_dirty_ = false;
  // The last cursor this process persisted (with its incarnation): put back when Redis lost it.
  std::optional<redisstore::DeliveryCursor> delivered_;
  SpliceStreamStatus status_;  // the stream's own state
  // While the materialization is Blocked: its reason and message, shown by Status() over the
  // stream's own state.
  std::optional<std::pair<std::string, std::string>> materialization_block_;
};

}  // namespace reverser::splicer
