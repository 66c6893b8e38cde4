#pragma once

// The append rules (docs/redis-keys.md, "Append") decided on the client: given the stream top
// and checkpoint an append transaction read under WATCH, where each entry of a chunk lands or
// why it is diverted — exactly as if each entry were appended alone after the ones before it.
// Pure: the one read it may need (the stream's last entry, for the duplicate-of-top check)
// comes through a callback, at most once. Internal to MaterializationStore.

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "libs/core/stream_position.h"
#include "libs/redisstore/materialization_store.h"
#include "libs/redisstore/stream_entry.h"

namespace reverser::redisstore::internal {

// What the rules read from Redis.
struct AppendSnapshot {
  core::StreamPosition top;  // the stream's last generated ID; zero when there is no stream
  std::optional<core::StreamPosition> checkpoint;
};

// The stream's last entry, as XREVRANGE returned it.
struct LastEntry {
  core::StreamPosition position;
  std::vector<std::string> fields;
};

// A chunk's entries, prepared once for every attempt: parsed RVs and the encoded stream fields
// (views into the entries, which must outlive this).
class PreparedChunk {
 public:
  explicit PreparedChunk(absl::Span<const StreamEntry> entries);

  size_t size() const { return entries_.size(); }
  // False when every RV is non-numeric: nothing to decide against Redis.
  bool NeedsSnapshot() const { return needs_snapshot_; }
  bool NonNumeric(size_t i) const { return entries_[i].non_numeric; }
  const std::optional<uint64_t>& Rv(size_t i) const { return entries_[i].rv; }  // nullopt: RV-less
  absl::Span<const absl::string_view> Fields(size_t i) const {
    return absl::MakeConstSpan(fields_).subspan(entries_[i].first_field, entries_[i].field_count);
  }

 private:
  struct Entry {
    bool non_numeric = false;
    std::optional<uint64_t> rv;
    size_t first_field = 0, field_count = 0;
  };
  std::vector<Entry> entries_;
  std::vector<absl::string_view> fields_;
  bool needs_snapshot_ = false;
};

inline constexpr size_t kDivertReasonCount = 5;

struct AppendPlan {
  std::vector<AppendResult> results;  // aligned with the chunk
  std::vector<size_t> appended;       // entries to XADD at results[i].position, in order
  std::array<int64_t, kDivertReasonCount> diverted{};  // per DivertReason (its enum value)
  core::StreamPosition top;                            // the stream top after the chunk
};

absl::StatusOr<AppendPlan> PlanAppends(
    const PreparedChunk& chunk, const AppendSnapshot& snapshot,
    absl::FunctionRef<absl::StatusOr<std::optional<LastEntry>>()> read_last_entry);

}  // namespace reverser::redisstore::internal
