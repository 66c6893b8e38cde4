#pragma once

// Thread-safe holders of what the catalog publishes, read by the gRPC streams. The catalog
// actor publishes; each open stream is a Listener that is woken and pulls the next message for
// its own position. Listeners that write slowly simply skip intermediate states (a claim set
// replaces the previous one; a table subscriber too far behind gets the full set), so one slow
// subscriber never holds up the actor or the others.

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "proto/reverser/v1/catalog.pb.h"

namespace reverser::catalog {

class FeedListener {
 public:
  virtual ~FeedListener() = default;
  // Something new may be available. Must not block.
  virtual void Wake() = 0;
};

class Feed {
 public:
  virtual ~Feed() = default;
  int Subscribe(std::shared_ptr<FeedListener> listener);
  void Unsubscribe(int id);
  size_t subscribers() const;

 protected:
  void WakeAll() ABSL_LOCKS_EXCLUDED(mu_);
  mutable absl::Mutex mu_;

 private:
  std::map<int, std::shared_ptr<FeedListener>> listeners_ ABSL_GUARDED_BY(mu_);
  int next_id_ ABSL_GUARDED_BY(mu_) = 1;
};

// The claim set. Nothing is offered before the first publish.
class ClaimFeed final : public Feed {
 public:
  void Publish(reverser::v1::ClaimSet claims);
  // The message for a subscriber holding generation `known` (nullopt: nothing newer).
  std::optional<reverser::v1::ClaimSet> Next(std::optional<uint64_t> known) const;
  std::optional<reverser::v1::ClaimSet> Current() const;

 private:
  std::optional<reverser::v1::ClaimSet> current_ ABSL_GUARDED_BY(mu_);
};

// The watched-type tables: the full set plus the recent deltas, so a subscriber one step
// behind gets a small update and one far behind (or new) gets everything.
class TableFeed final : public Feed {
 public:
  static constexpr size_t kDeltaHistory = 64;

  // `delta` moves the generation by one; `full` is the complete set after it.
  void Publish(reverser::v1::TableUpdate delta, reverser::v1::TableUpdate full);
  std::optional<reverser::v1::TableUpdate> Next(std::optional<uint64_t> known) const;
  std::optional<reverser::v1::TableUpdate> Current() const;

 private:
  std::optional<reverser::v1::TableUpdate> full_ ABSL_GUARDED_BY(mu_);
  // Consecutive generations, oldest first.
  std::deque<reverser::v1::TableUpdate> deltas_ ABSL_GUARDED_BY(mu_);
};

// The type records for ListTypes / GetType, replaced as a whole.
struct TypeSnapshot {
  uint64_t generation = 0;  // catalog generation
  uint64_t revision = 0;    // registry revision
  bool ready = false;       // a scan has been applied
  std::vector<reverser::v1::TypeRecord> records;  // sorted by GVR
  std::vector<std::string> degraded_group_versions;
};

class TypeFeed {
 public:
  void Publish(std::shared_ptr<const TypeSnapshot> snapshot);
  std::shared_ptr<const TypeSnapshot> Current() const;

 private:
  mutable absl::Mutex mu_;
  std::shared_ptr<const TypeSnapshot> current_ ABSL_GUARDED_BY(mu_) =
      std::make_shared<TypeSnapshot>();
};

}  // namespace reverser::catalog
