#include "libs/redisstore/lineage.h"

#include <algorithm>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"

namespace reverser::redisstore {
namespace {

constexpr absl::string_view kStateLossPayload = "reverser.redisstore/state-loss";

constexpr StateLoss kAllLosses[] = {StateLoss::kCheckpointVanished, StateLoss::kCheckpointDamaged,
                                    StateLoss::kWentBackwards, StateLoss::kCursorVanished,
                                    StateLoss::kCursorWentBackwards};

}  // namespace

core::StreamPosition LineageMark::Head() const {
  return std::max(checkpoint.value_or(core::StreamPosition::Zero()), top);
}

absl::string_view StateLossName(StateLoss loss) {
  switch (loss) {
    case StateLoss::kCheckpointVanished:
      return "checkpoint_vanished";
    case StateLoss::kCheckpointDamaged:
      return "checkpoint_damaged";
    case StateLoss::kWentBackwards:
      return "went_backwards";
    case StateLoss::kCursorVanished:
      return "cursor_vanished";
    case StateLoss::kCursorWentBackwards:
      return "cursor_went_backwards";
  }
  return "unknown";
}

absl::string_view StateLossText(StateLoss loss) {
  switch (loss) {
    case StateLoss::kCheckpointVanished:
      return "the checkpoint vanished";
    case StateLoss::kCheckpointDamaged:
      return "the checkpoint lost items";
    case StateLoss::kWentBackwards:
      return "the checkpoint or stream went backwards";
    case StateLoss::kCursorVanished:
      return "the delivery cursor vanished";
    case StateLoss::kCursorWentBackwards:
      return "the delivery cursor went backwards";
  }
  return "unknown";
}

absl::Status StateLostError(StateLoss loss, absl::string_view what) {
  absl::Status status = absl::DataLossError(
      absl::StrCat(what, ": Redis state lost (", StateLossText(loss), "); nothing was written"));
  status.SetPayload(kStateLossPayload, absl::Cord(StateLossName(loss)));
  return status;
}

std::optional<StateLoss> StateLossOf(const absl::Status& status) {
  if (!absl::IsDataLoss(status)) return std::nullopt;
  absl::optional<absl::Cord> payload = status.GetPayload(kStateLossPayload);
  if (!payload) return std::nullopt;
  for (StateLoss loss : kAllLosses) {
    if (*payload == StateLossName(loss)) return loss;
  }
  return std::nullopt;
}

LineageTracker::Judgement LineageTracker::Observe(const LineageMark& mark) {
  absl::MutexLock lock(&mu_);
  return ObserveLocked(mark);
}

uint64_t LineageTracker::epoch() const {
  absl::MutexLock lock(&mu_);
  return epoch_;
}

std::optional<LineageTracker::Judgement> LineageTracker::ObserveIfCurrent(const LineageMark& mark,
                                                                         uint64_t epoch) {
  absl::MutexLock lock(&mu_);
  if (epoch != epoch_) return std::nullopt;
  return ObserveLocked(mark);
}

LineageTracker::Judgement LineageTracker::ObserveLocked(const LineageMark& mark) {
  if (mark.checkpoint.has_value() && mark.damaged) {
    return {Verdict::kLost, StateLoss::kCheckpointDamaged};
  }
  if (!mark.checkpoint.has_value()) {
    if (!known_) return {Verdict::kNone, std::nullopt};
    return {Verdict::kLost, StateLoss::kCheckpointVanished};
  }
  const core::StreamPosition head = mark.Head();
  if (!known_) {
    known_ = true;
    incarnation_ = mark.incarnation;
    head_ = head;
    return {Verdict::kSame, std::nullopt};
  }
  if (mark.incarnation == incarnation_) {
    if (head < head_) return {Verdict::kLost, StateLoss::kWentBackwards};
    head_ = head;
    return {Verdict::kSame, std::nullopt};
  }
  const bool known_stale =
      std::find(stale_.begin(), stale_.end(), mark.incarnation) != stale_.end();
  if (known_stale || head < head_) {
    if (!known_stale) {
      stale_.push_back(mark.incarnation);
      if (stale_.size() > kMaxStale) stale_.pop_front();
    }
    return {Verdict::kLost, StateLoss::kWentBackwards};
  }
  incarnation_ = mark.incarnation;
  head_ = head;
  return {Verdict::kRenewed, std::nullopt};
}

void LineageTracker::Advance(core::StreamPosition position) {
  absl::MutexLock lock(&mu_);
  if (known_) head_ = std::max(head_, position);
}

void LineageTracker::Rebase(absl::string_view incarnation, core::StreamPosition position) {
  absl::MutexLock lock(&mu_);
  ++epoch_;
  known_ = true;
  incarnation_ = std::string(incarnation);
  head_ = position;  // what Redis now holds, whatever was seen before
  stale_.erase(std::remove(stale_.begin(), stale_.end(), incarnation_), stale_.end());
}

void LineageTracker::Reset() {
  absl::MutexLock lock(&mu_);
  ++epoch_;
  known_ = false;
  incarnation_.clear();
  head_ = core::StreamPosition::Zero();
  stale_.clear();
}

bool LineageTracker::known() const {
  absl::MutexLock lock(&mu_);
  return known_;
}

std::string LineageTracker::incarnation() const {
  absl::MutexLock lock(&mu_);
  return incarnation_;
}

core::StreamPosition LineageTracker::head() const {
  absl::MutexLock lock(&mu_);
  return head_;
}

}  // namespace reverser::redisstore
