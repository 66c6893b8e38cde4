#pragma once

// The units that travel from a delivery stream to a branch worker, and the way back: every item
// remembers the stream positions it covers and the sink its feedback (acks, rejections) goes to.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "libs/core/stream_position.h"
#include "proto/reverser/v1/gitworker.pb.h"
#include "services/gitworker/target_writer.h"

namespace reverser::gitworker {

// Where a delivery stream's feedback goes. Thread-safe; silently drops feedback once the stream
// has ended (the splicer re-sends from its acked cursor on the next stream).
class FeedbackSink {
 public:
  virtual ~FeedbackSink() = default;
  // The message with this sequence is buffered (credit).
  virtual void Accepted(uint64_t sequence) = 0;
  // Everything for (target, claim) up to ack.position is pushed. Implementations drop acks that
  // do not advance the position already acked for that (target, claim).
  virtual void Ack(const reverser::v1::DeliveryAck& ack) = 0;
  // Something that can never be applied (refusal.h's Refuse is the only caller).
  virtual void Refused(const reverser::v1::Refusal& refusal) = 0;
  // The complete set of refused files under a target's path (replaces earlier reports).
  virtual void RefusedFiles(const reverser::v1::RefusedFiles& files) = 0;
  // Asks the splicer to resync every type of a target (its history was rewritten).
  virtual void ResyncRequested(const reverser::v1::ResyncRequest& request) = 0;
  // The acceptance gate refuses every write to a target's path (or, without issues, accepts
  // it again); replaces the earlier report.
  virtual void PathRefused(const reverser::v1::PathRefusal& refusal) = 0;
  // This replica does not own the target's branch (branch_ownership.h): nothing more of the
  // target is applied or acked here.
  virtual void NotOwner(const reverser::v1::NotOwner& /*not_owner*/) {}
};

// One stream position an item covers, acked once the item's content is pushed.
struct Coverage {
  reverser::v1::GitTargetRef target;
  reverser::v1::Claim claim;
  core::StreamPosition position;
  std::optional<absl::Time> observed_at;  // live events: when the change entered the stream
  // Live events: the object (ref and kind) the position is a change of, named if it is refused.
  reverser::v1::ResourceRef object;
  std::string kind;
  std::shared_ptr<FeedbackSink> sink;
};

// A resync or a live event for one GitTarget, with the settings it is written with.
struct WorkItem {
  enum class Kind { kEvent, kResync };
  Kind kind = Kind::kEvent;
  std::shared_ptr<const TargetSettings> settings;
  reverser::v1::LiveEvent event;         // kEvent
  reverser::v1::ClusterSnapshot resync;  // kResync
  // Usually one; coalescing in the target stream folds older positions of the same object in.
  std::vector<Coverage> covers;

  // Approximate retained size, for buffer accounting.
  size_t Bytes() const;
  // Identity of the object an event touches (coalescing key within a target); empty for resyncs.
  std::string ObjectKey() const;
};

// When an event entered the stream (nullopt when the splicer did not say).
std::optional<absl::Time> ObservedAt(const reverser::v1::LiveEvent& event);

// The coverage of an event or resync as delivered (position: the event's stream position, or
// the resync's coverage head).
Coverage CoverageOf(const WorkItem& item, std::shared_ptr<FeedbackSink> sink);

// "group/version/resource|scope" of a claim: the unit acks are tracked per.
std::string ClaimKey(const reverser::v1::Claim& claim);

}  // namespace reverser::gitworker
