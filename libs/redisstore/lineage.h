#pragma once

// Telling a Redis that lost or rolled back a materialization from one that moved on, without
// trusting memory for what Redis holds (docs/redis-keys.md, "Lost Redis state").
//
// Every checkpoint built from a LIST starts a new *incarnation* (a random id in `ckpt:meta`,
// kept by compactions); the position a materialization has reached is its *head*, the higher of
// the checkpoint position and the stream top. A writer or reader remembers the incarnation and
// the highest head it has seen, and judges every later look at the keys against that:
//   * no checkpoint where one was seen                          → lost (checkpoint vanished)
//   * `ckpt:items` does not hold the count the swap recorded     → lost (checkpoint damaged)
//   * the same incarnation below the head seen                   → lost (went backwards: an old
//     snapshot was loaded)
//   * another incarnation below the head seen, or one already judged stale → lost (went
//     backwards)
//   * another incarnation at or past the head seen              → renewed: rebuilt from a LIST
//     after everything seen, so complete and current; positions of the old one no longer apply
// A loss is not remembered: the next look is judged against the same memory, so the state
// counts as lost until it is rebuilt (a new incarnation) or has caught up again.
//
// Thread-safe: the materializer's append writer and its watch thread share one tracker.

#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "libs/core/stream_position.h"

namespace reverser::redisstore {

// What one read of a materialization's keys shows of its lineage.
struct LineageMark {
  std::optional<core::StreamPosition> checkpoint;  // nullopt: no checkpoint
  // The checkpoint's incarnation; "" for a checkpoint written before incarnations existed.
  std::string incarnation;
  // `ckpt:items` does not hold the item count recorded with the checkpoint (items were lost).
  bool damaged = false;
  // The stream's last generated ID as every append records it (`counts top`); zero if unknown.
  core::StreamPosition top;

  // The higher of the checkpoint position and the stream top (zero: nothing).
  core::StreamPosition Head() const;
  // A checkpoint that can be spliced or appended onto.
  bool Usable() const { return checkpoint.has_value() && !damaged; }
};

enum class StateLoss {
  kCheckpointVanished,   // a checkpoint was seen, now there is none
  kCheckpointDamaged,    // the checkpoint lost items
  kWentBackwards,        // the head is below what was seen (an older snapshot came back)
  kCursorVanished,       // splicer: the delivery cursor is gone while the lineage is the same
  kCursorWentBackwards,  // splicer: the delivery cursor is below what this process acked
};
// checkpoint_vanished, checkpoint_damaged, went_backwards, cursor_vanished,
// cursor_went_backwards (metric label values).
absl::string_view StateLossName(StateLoss loss);
// The reason in words, for logs and status messages.
absl::string_view StateLossText(StateLoss loss);

// A DataLoss status naming `loss` (the store's append guard returns it; nothing was written).
absl::Status StateLostError(StateLoss loss, absl::string_view what);
// The loss a StateLostError carries; nullopt for any other status.
std::optional<StateLoss> StateLossOf(const absl::Status& status);

class LineageTracker {
 public:
  enum class Verdict {
    kNone,     // nothing seen yet and no usable checkpoint there (the first one is pending)
    kSame,     // the lineage seen before (or the first one seen), at or past its head
    kRenewed,  // a newer incarnation: rebuilt after everything seen
    kLost,     // see `loss`
  };
  struct Judgement {
    Verdict verdict = Verdict::kNone;
    std::optional<StateLoss> loss;  // set with kLost
    bool operator==(const Judgement&) const = default;
  };

  // Judges `mark` against what was seen and, unless it is a loss, remembers it.
  Judgement Observe(const LineageMark& mark);
  // Changes with every Rebase: a mark read before one says nothing about the lineage after it.
  uint64_t epoch() const;
  // Observe for a mark read while epoch() was `epoch`; nullopt (nothing judged or remembered)
  // when a Rebase came in between (a check on another thread racing the writer's own swap).
  std::optional<Judgement> ObserveIfCurrent(const LineageMark& mark, uint64_t epoch);
  // The observer itself reached `position` (an entry it read or appended).
  void Advance(core::StreamPosition position);
  // The observer installed a checkpoint of `incarnation` at `position` (its own swap): that is
  // now the lineage and its head, whatever was seen before.
  void Rebase(absl::string_view incarnation, core::StreamPosition position);
  // Forgets everything (a released materialization).
  void Reset();

  bool known() const;
  std::string incarnation() const;
  core::StreamPosition head() const;

 private:
  static constexpr size_t kMaxStale = 8;
  Judgement ObserveLocked(const LineageMark& mark) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  uint64_t epoch_ ABSL_GUARDED_BY(mu_) = 0;
  bool known_ ABSL_GUARDED_BY(mu_) = false;
  std::string incarnation_ ABSL_GUARDED_BY(mu_);
  core::StreamPosition head_ ABSL_GUARDED_BY(mu_);
  // Incarnations judged stale (seen below the head): they never count as renewed again.
  std::deque<std::string> stale_ ABSL_GUARDED_BY(mu_);
};

}  // namespace reverser::redisstore
