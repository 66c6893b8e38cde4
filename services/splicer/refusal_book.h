#pragma once

// What the gitworker refuses, rolled up per GitTarget for the catalog's status (reported with
// the target's StreamSummary). Bounded and self-clearing:
//   - objects: deduplicated by (group, resource, namespace, name); the newest refusal of each
//     is kept, at most `max_objects` per target (the oldest are dropped beyond);
//   - an object's refusal is cleared when a later delivery of it is acked without a new
//     refusal, or when a later resync of its stream is acked without refusing it again (it was
//     written, or is gone);
//   - message-level refusals (no object: a bad target_config, a resync without a type) are
//     cleared by any later acked delivery of their stream (or of the target, without a claim);
//   - files: replaced by each RefusedFiles the gitworker sends (its complete set);
//   - the path (the acceptance gate's PathRefusal): replaced by each one the gitworker sends,
//     cleared by one without issues or by an acked delivery of the target sent after it was
//     received (held writes are never acked, so an ack means the path took writes again — also
//     after a gitworker restart, which forgets the refusal without saying so).
// "Later" is the order the splicer saw things in: a delivery clears only refusals received
// before it was sent, so a refusal of that very delivery (always received before its ack)
// stands. In memory only: a restarted splicer learns of a refusal again when the object is
// next delivered (its next change, or a resync). Thread-safe.

#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "libs/core/stream_position.h"
#include "proto/reverser/v1/catalog.pb.h"
#include "proto/reverser/v1/gitworker.pb.h"
#include "proto/reverser/v1/splicer.pb.h"

namespace reverser::splicer {

struct RefusalBookOptions {
  size_t max_objects = 1000;  // standing object refusals kept per target
  size_t sample = 5;          // refusals of each kind (objects, files) sent to the catalog
};

class RefusalBook {
 public:
  explicit RefusalBook(RefusalBookOptions options = {}) : options_(options) {}

  // Feedback from the gitworker: a refusal, or a target's complete refused-file set.
  void OnRefusal(const reverser::v1::Refusal& refusal);
  void OnRefusedFiles(const reverser::v1::RefusedFiles& files);
  void OnPathRefusal(const reverser::v1::PathRefusal& refusal);

  // A splice stream is about to send a resync (at its coverage head) or an event.
  void OnResyncSent(const reverser::v1::GitTargetRef& target, const reverser::v1::Claim& claim,
                    core::StreamPosition head);
  void OnEventSent(const reverser::v1::GitTargetRef& target, const reverser::v1::Claim& claim,
                   core::StreamPosition position, const reverser::v1::ObjectBody& object);
  // Everything of the ack's (target, claim) up to its position is pushed.
  void OnAck(const reverser::v1::DeliveryAck& ack);
  // The stream restarts its session: what it sent before will be sent again.
  void ResetStream(const reverser::v1::GitTargetRef& target, const reverser::v1::Claim& claim);
  // The target is gone.
  void ForgetTarget(const std::string& target_uid);

  // Sets the summary's refused_objects, refused_files and refusals (newest objects first, then
  // files; names cut to core::kRefusalNameBytes) for its target.
  void Fill(reverser::v1::StreamSummary* summary) const;

 private:
  struct Entry {
    reverser::v1::Refusal refusal;
    uint64_t seen = 0;
    std::string stream;  // StreamKey of its claim ("" without one)
  };
  struct Target {
    std::map<std::string, Entry> entries;  // by object key, "stream:<key>" or "target"
    std::vector<reverser::v1::Refusal> files;
    std::optional<reverser::v1::PathRefusal> path;
    uint64_t path_seen = 0;
  };
  struct Check {
    core::StreamPosition position;
    std::string object;  // "" for a resync
    uint64_t sent = 0;
  };

  // Clears what delivery `check` of `stream` settles in `target`.
  void Settle(Target& target, const std::string& stream, const Check& check);

  const RefusalBookOptions options_;
  mutable absl::Mutex mu_;
  uint64_t clock_ ABSL_GUARDED_BY(mu_) = 0;                     // orders receipts and sends
  std::map<std::string, Target> targets_ ABSL_GUARDED_BY(mu_);  // by target uid
  std::map<std::string, std::deque<Check>> checks_ ABSL_GUARDED_BY(mu_);  // by StreamKey
};

}  // namespace reverser::splicer
