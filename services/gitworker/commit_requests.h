#pragma once

// The CommitRequests of one branch (attach-then-poll, docs/behaviour.md "CommitRequest"): each
// request waits for the open window of its (author, GitTarget), binds to it (at most one request
// per window; the window's message becomes the request's), and when its close delay — anchored
// at the first receipt — has passed, finalizes that window. A request that found no window by
// then resolves NoOpenWindow; one bound to a window resolves when that window's commit is pushed
// (Committed with the pushed, post-replay SHA) or turned out empty (AlreadyPresent). Resolved
// outcomes are kept for polling for kOutcomeRetention, then forgotten.
//
// Pure and single-threaded: the branch worker owns one and passes the time in.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "proto/reverser/v1/gitworker.pb.h"

namespace reverser::gitworker {

struct CommitRequestSpec {
  std::string id;          // the CommitRequest's uid (else namespace/name)
  std::string window_key;  // username + "\n" + target key: the window it may bind to
  std::string message;     // spec.message, verbatim ("" keeps the window's own message)
  absl::Duration close_delay;
};

// Where a request stands, as AttachCommit answers it.
struct CommitRequestView {
  bool known = false;     // registered (false: never seen, or forgotten after retention)
  bool resolved = false;  // outcome is final
  reverser::v1::FinalizeOutcome outcome = reverser::v1::FINALIZE_OUTCOME_UNSPECIFIED;
  std::string sha;  // Committed only
  absl::Time resolved_at = absl::InfinitePast();
};

class CommitRequestBook {
 public:
  static constexpr absl::Duration kOutcomeRetention = absl::Minutes(15);
  static constexpr size_t kMaxRequests = 4096;  // waiting and resolved, per branch

  // Registers a request (idempotent): a known request keeps its first deadline. A request
  // registered again with another window key or message than its first is WindowMismatch: the
  // window it is bound to is not the one it now describes. Beyond kMaxRequests a new request
  // resolves Failed at once rather than growing without bound.
  CommitRequestView Register(const CommitRequestSpec& spec, absl::Time now);
  CommitRequestView View(const std::string& id) const;

  // The oldest waiting request that may bind to the open window `window_key` (none while that
  // window already has one); binds it to `write_id` and returns its message.
  std::optional<std::string> BindWaiting(const std::string& window_key, uint64_t write_id);
  // Requests whose close delay has passed: the writes to finalize now (bound requests). Waiting
  // ones resolve NoOpenWindow. Also forgets outcomes past retention.
  std::vector<uint64_t> TakeDue(absl::Time now);
  // A write finished: requests bound to it resolve (pushed: Committed with `sha`; else
  // AlreadyPresent when it committed nothing, or Failed when it was refused).
  enum class WriteEnd { kPushed, kEmpty, kFailed };
  void WriteFinished(uint64_t write_id, WriteEnd end, const std::string& sha, absl::Time now);
  // When TakeDue next has something to do.
  std::optional<absl::Time> NextDeadline() const;
  size_t size() const { return requests_.size(); }

 private:
  struct Request {
    CommitRequestSpec spec;
    absl::Time received;
    absl::Time due;
    std::optional<uint64_t> write_id;  // bound to this write
    bool finalized = false;            // its close delay passed (the window was asked to close)
    CommitRequestView view;
  };
  void Resolve(Request& request, reverser::v1::FinalizeOutcome outcome, const std::string& sha,
               absl::Time now);

  std::map<std::string, Request> requests_;
  uint64_t next_order_ = 0;
  std::map<uint64_t, std::string> order_;  // registration order → id (waiting requests)
};

}  // namespace reverser::gitworker
