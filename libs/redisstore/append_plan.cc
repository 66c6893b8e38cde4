#include "libs/redisstore/append_plan.h"

#include <algorithm>
#include <utility>

namespace reverser::redisstore::internal {

using core::StreamPosition;

PreparedChunk::PreparedChunk(absl::Span<const StreamEntry> entries) : entries_(entries.size()) {
  fields_.reserve(entries.size() * 14);
  for (size_t i = 0; i < entries.size(); ++i) {
    const StreamEntry& entry = entries[i];
    Entry& prepared = entries_[i];
    if (!entry.resource_version.empty()) {
      auto rv = core::ParseResourceVersion(entry.resource_version);
      if (!rv.ok()) {
        prepared.non_numeric = true;
        continue;
      }
      prepared.rv = *rv;
    }
    needs_snapshot_ = true;
    prepared.first_field = fields_.size();
    AppendEntryFieldViews(entry, fields_);
    prepared.field_count = fields_.size() - prepared.first_field;
  }
}

namespace {

bool SameFields(absl::Span<const absl::string_view> a, absl::Span<const absl::string_view> b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin());
}

bool SameFields(absl::Span<const absl::string_view> a, const std::vector<std::string>& b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin());
}

}  // namespace

absl::StatusOr<AppendPlan> PlanAppends(
    const PreparedChunk& chunk, const AppendSnapshot& snapshot,
    absl::FunctionRef<absl::StatusOr<std::optional<LastEntry>>()> read_last_entry) {
  static_assert(static_cast<size_t>(DivertReason::kDuplicateOfStreamTop) + 1 == kDivertReasonCount);
  AppendPlan plan;
  plan.results.resize(chunk.size());
  StreamPosition& top = plan.top;
  top = snapshot.top;
  const std::optional<StreamPosition>& checkpoint = snapshot.checkpoint;
  std::optional<size_t> top_entry;  // the chunk's entry at `top`, once one was placed there
  std::optional<LastEntry> last;    // the stream's last entry, read at most once
  bool last_read = false;
  auto divert = [&](size_t i, DivertReason reason, StreamPosition at = StreamPosition::Zero()) {
    plan.results[i].diverted = reason;
    plan.results[i].position = at;
    ++plan.diverted[static_cast<size_t>(reason)];
  };
  for (size_t i = 0; i < chunk.size(); ++i) {
    if (chunk.NonNumeric(i)) {
      divert(i, DivertReason::kNonNumericRv);
      continue;
    }
    uint64_t rv = top.rv();  // an RV-less entry attaches to the top's RV
    if (chunk.Rv(i)) {
      rv = *chunk.Rv(i);
    } else if (top.IsZero()) {
      divert(i, DivertReason::kRvlessEmptyStream);
      continue;
    }
    if (rv < top.rv()) {
      divert(i, DivertReason::kOlderThanStreamTop);
      continue;
    }
    const bool same_rv = rv == top.rv();
    // Same RV as the checkpoint: the new seq is 0 (new RV) or top seq + 1; covered if <= its seq.
    if (checkpoint && (rv < checkpoint->rv() ||
                       (rv == checkpoint->rv() && (!same_rv || top.seq() < checkpoint->seq())))) {
      divert(i, DivertReason::kCoveredByCheckpoint);
      continue;
    }
    if (same_rv) {
      // A byte-identical repeat of the top entry (a retried append whose reply was lost, a watch
      // re-delivery) is absorbed: folding it again would change nothing. The top is this chunk's
      // own last append, or else the stream's last entry if that is still the top (not trimmed).
      bool duplicate = false;
      if (top_entry) {
        duplicate = SameFields(chunk.Fields(i), chunk.Fields(*top_entry));
      } else {
        if (!last_read) {
          last_read = true;
          auto read = read_last_entry();
          if (!read.ok()) return read.status();
          last = std::move(*read);
        }
        duplicate = last && last->position == top && SameFields(chunk.Fields(i), last->fields);
      }
      if (duplicate) {
        divert(i, DivertReason::kDuplicateOfStreamTop, top);
        continue;
      }
      // The RV's last seq is taken: XADD cannot place another entry at it.
      if (top.seq() == UINT64_MAX) {
        divert(i, DivertReason::kOlderThanStreamTop);
        continue;
      }
    }
    top = same_rv ? StreamPosition(rv, top.seq() + 1) : StreamPosition(rv, 0);
    top_entry = i;
    plan.results[i].appended = true;
    plan.results[i].position = top;
    plan.appended.push_back(i);
  }
  return plan;
}

}  // namespace reverser::redisstore::internal
