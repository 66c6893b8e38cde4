#pragma once

// The CommitRequest controller's state machine (docs/behaviour.md "CommitRequest handling"):
// which requests are still to be worked on and what to do for each next. Per request, in order:
//  1. attribute: look up the command author recorded at admission, once (a lookup that fails
//     is tried again at the next poll, then the committer is used);
//  2. stamp the in-progress status (Ready=False, Reconciling=True, WaitingForCloseDelay);
//  3. attach to the gitworker, and again every kPollInterval while unresolved;
//  4. write the terminal status: the attach's outcome, or FinalizeFailed once the safety window
//     (creation + 420 s) passed unresolved.
// Requests already terminal when seen are left alone, so a restarted catalog picks up exactly
// the unfinished ones. Pure and single-threaded: the controller owns one and passes results in.

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "libs/core/clock.h"
#include "proto/reverser/v1/gitworker.pb.h"
#include "services/catalog/commit_request_status.h"

namespace reverser::catalog {

struct CommitRequestAction {
  enum class Kind { kLookupAuthor, kWriteStatus, kAttach };
  Kind kind = Kind::kLookupAuthor;
  std::string uid;
  std::string namespace_;
  std::string name;
  nlohmann::json status;                     // kWriteStatus
  bool terminal = false;                     // kWriteStatus: the last write for this request
  reverser::v1::AttachCommitRequest attach;  // kAttach
};

class CommitRequestTracker {
 public:
  // Author lookups that fail this many times fall back to the committer.
  static constexpr int kMaxAuthorLookups = 3;

  explicit CommitRequestTracker(const core::Clock* clock) : clock_(clock) {}

  // The complete listing (initial sync or relist): requests not in it are forgotten.
  void Replace(const std::vector<nlohmann::json>& objects);
  void Observe(const nlohmann::json& object);
  void Forget(const nlohmann::json& object);

  // What is due now; each returned action is in flight until its result is reported.
  std::vector<CommitRequestAction> TakeDue();
  // When TakeDue next has something to do (nullopt: nothing tracked, or all in flight).
  std::optional<absl::Time> NextDue() const;

  // Results of the actions TakeDue handed out (unknown uids are ignored: forgotten meanwhile).
  void AuthorLookedUp(const std::string& uid,
                      const absl::StatusOr<std::optional<std::string>>& author);
  enum class WriteResult { kWritten, kGone, kFailed };  // kGone: the request was deleted
  void StatusWritten(const std::string& uid, bool terminal, WriteResult result);
  void Attached(const std::string& uid, const absl::StatusOr<reverser::v1::FinalizeResult>& result);

  size_t size() const { return requests_.size(); }

 private:
  enum class Stage { kAttribute, kStamp, kAttach, kFinish };
  struct Request {
    nlohmann::json object;
    Stage stage = Stage::kAttribute;
    CommandAttribution attribution;
    int author_lookups = 0;
    absl::Time deadline;
    absl::Time next = absl::InfinitePast();
    bool in_flight = false;
    nlohmann::json terminal_status;  // kFinish: the status to write
  };
  CommitRequestAction ActionFor(const std::string& uid, Request& request, absl::Time now);
  reverser::v1::AttachCommitRequest AttachOf(const Request& request) const;
  void Finish(Request& request, nlohmann::json status);

  const core::Clock* clock_;
  std::map<std::string, Request> requests_;  // by uid
};

}  // namespace reverser::catalog
