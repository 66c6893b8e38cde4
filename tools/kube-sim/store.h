#pragma once

// The object store: one global resourceVersion counter, objects per type in etcd key order,
// and a bounded event history that serves watches, lists at a resourceVersion, and 410s once a
// resourceVersion falls out of the window.

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "nlohmann/json.hpp"
#include "tools/kube-sim/api_error.h"

namespace reverser::kubesim {

// One stored state of an object: parsed (for selectors, reads and rollbacks) and its JSON text,
// rendered once when written so that every watcher sends the same bytes without re-serialising.
struct StoredObject {
  StoredObject(Json v, std::string j);
  Json value;
  std::string json;        // value.dump()
  std::string namespace_;  // metadata.namespace, read on every event by namespaced watches
};

struct StoredEvent {
  int64_t rv = 0;
  std::string type_key;                        // ResourceType::Key()
  std::string type;                            // ADDED | MODIFIED | DELETED
  std::shared_ptr<const StoredObject> object;  // after; for DELETED the last state at the new RV
  std::shared_ptr<const StoredObject> prev;    // state before; null for ADDED
};

// What a write decides to do with the current object (nullptr if absent).
struct WriteDecision {
  enum class Kind { kPut, kDelete, kNoChange };
  Kind kind = Kind::kNoChange;
  Json object;  // kPut: the new object; kDelete: the final state to report
};
using Mutator = std::function<ApiOr<WriteDecision>(const Json* current)>;

struct WriteResult {
  Json object;        // as stored/returned (with the new resourceVersion unless dry-run)
  std::string event;  // "ADDED" | "MODIFIED" | "DELETED" | "" (no change)
};

class Store {
 public:
  // history_limit: how many events are kept for watch resumption and lists at an RV.
  explicit Store(size_t history_limit);

  int64_t CurrentRv() const;
  int64_t CompactedRv() const;

  std::optional<Json> Get(const std::string& type_key, const std::string& ns,
                          const std::string& name) const;

  struct Snapshot {
    int64_t rv = 0;
    std::vector<Json> items;  // in key order (namespace, name)
  };
  // at_rv: the exact historical state (410 if compacted); nullopt: the current state.
  ApiOr<Snapshot> List(const std::string& type_key, const std::string& ns,
                       std::optional<int64_t> at_rv = std::nullopt) const;

  // The same as stored (shared, not copied): what watches and list responses render from.
  struct StoredSnapshot {
    int64_t rv = 0;
    std::vector<std::shared_ptr<const StoredObject>> items;  // in key order (namespace, name)
  };
  ApiOr<StoredSnapshot> ListStored(const std::string& type_key, const std::string& ns,
                                   std::optional<int64_t> at_rv = std::nullopt) const;

  // Runs `mutator` under the store lock; assigns the next resourceVersion to changed objects
  // and records the event. dry_run: decide and render, store nothing.
  ApiOr<WriteResult> Write(const std::string& type_key, const std::string& ns,
                           const std::string& name, const Mutator& mutator, bool dry_run);

  struct WaitResult {
    std::vector<StoredEvent> events;  // of type_key, rv > after_rv, in order
    bool expired = false;             // after_rv fell out of the history window
    bool interrupted = false;         // shutdown or DropWatches()
    int64_t current_rv = 0;
  };
  // Blocks until there are events after `after_rv` for the type, the deadline passes, or the
  // store is shut down / watches are dropped (epoch changed).
  WaitResult WaitForEvents(const std::string& type_key, int64_t after_rv, absl::Time deadline,
                           uint64_t epoch) const;
  // Waits until CurrentRv() >= rv or the deadline; returns whether it got there.
  bool WaitForRv(int64_t rv, absl::Time deadline) const;

  // Forgets all history: any older resourceVersion now gets 410 Expired.
  void Compact();
  // Ends every open watch connection abruptly (fault injection).
  void DropWatches();
  uint64_t epoch() const;
  void Shutdown();
  bool shutting_down() const;

 private:
  using ObjectMap = std::map<std::string, std::shared_ptr<const StoredObject>>;
  static std::string ObjectKey(const std::string& ns, const std::string& name);
  // The objects of a type in namespace `ns` ("": all) as of `at_rv` (410 if compacted).
  ApiOr<StoredSnapshot> ListLocked(const std::string& type_key, const std::string& ns,
                                   std::optional<int64_t> at_rv) const;
  void RecordLocked(StoredEvent event);

  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  size_t history_limit_;
  int64_t rv_ = 0;
  int64_t compacted_rv_ = 0;
  uint64_t epoch_ = 0;
  bool shutdown_ = false;
  // type key -> object key ("ns/name") -> object
  std::map<std::string, ObjectMap> objects_;
  std::deque<StoredEvent> history_;
};

}  // namespace reverser::kubesim
