#pragma once

// A position in a per-type materialization stream, rendered `<rv>-<seq>` (a Redis stream ID).
// Positions order by (rv, seq) numerically: 9-5 < 10-0, never by string comparison.

#include <compare>
#include <cstdint>
#include <limits>
#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"

namespace reverser::core {

class StreamPosition {
 public:
  constexpr StreamPosition() = default;
  constexpr StreamPosition(uint64_t rv, uint64_t seq) : rv_(rv), seq_(seq) {}

  // Parses "<rv>-<seq>" or a bare "<rv>" (seq 0). Rejects signs, spaces, empty parts, overflow.
  static absl::StatusOr<StreamPosition> Parse(absl::string_view text);
  // The last position of an RV: "<rv>-<max>", the coverage head of a checkpoint at R.
  static constexpr StreamPosition EndOf(uint64_t rv) {
    return {rv, std::numeric_limits<uint64_t>::max()};
  }
  static constexpr StreamPosition Zero() { return {}; }

  constexpr uint64_t rv() const { return rv_; }
  constexpr uint64_t seq() const { return seq_; }
  constexpr bool IsZero() const { return rv_ == 0 && seq_ == 0; }
  std::string ToString() const;

  constexpr auto operator<=>(const StreamPosition&) const = default;

 private:
  uint64_t rv_ = 0;
  uint64_t seq_ = 0;
};

// Parses a Kubernetes resourceVersion that this project treats as numeric (etcd revisions).
absl::StatusOr<uint64_t> ParseResourceVersion(absl::string_view rv);

}  // namespace reverser::core
