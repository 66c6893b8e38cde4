#pragma once

// The CommitRequest controller's decisions as pure functions (docs/behaviour.md, CommitRequest
// handling and CommitRequest conditions): whether a request is still to be worked on, when it
// is polled next, and the status it shows in progress and once its outcome is known. The
// controller that watches CommitRequests and calls GitWorker.AttachCommit is built on these.

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "absl/time/time.h"
#include "proto/reverser/v1/gitworker.pb.h"

namespace reverser::catalog {

namespace commit_request {
// Ready reasons.
inline constexpr char kWaitingForCloseDelay[] = "WaitingForCloseDelay";
inline constexpr char kCommitted[] = "Committed";
inline constexpr char kNoWindowInGrace[] = "NoWindowInGrace";
inline constexpr char kWindowMismatch[] = "WindowMismatch";
inline constexpr char kAlreadyPresent[] = "AlreadyPresent";
inline constexpr char kFinalizeFailed[] = "FinalizeFailed";
inline constexpr char kUnexpectedOutcome[] = "UnexpectedOutcome";
// AuthorAttributed reasons.
inline constexpr char kAttributedFromAdmission[] = "AttributedFromAdmission";
inline constexpr char kCommitterFallback[] = "CommitterFallback";
// Pushed reason.
inline constexpr char kPushed[] = "Pushed";

// Polled this often while unresolved.
inline constexpr absl::Duration kPollInterval = absl::Seconds(2);
// After creation, the longest close delay (300 s) plus time for pushes and retries: an
// unresolved request then fails closed.
inline constexpr absl::Duration kSafetyWindow = absl::Seconds(420);
}  // namespace commit_request

// Who the request is attributed to: the command author recorded at admission, else the
// committer (nullopt).
struct CommandAttribution {
  std::optional<std::string> author;  // username
};

// The Ready condition's reason in a CommitRequest status ("" when there is none).
std::string CommitRequestReadyReason(const nlohmann::json& status);

// True when the request already shows a terminal outcome (Ready is not in progress): the
// controller leaves it alone from then on.
bool CommitRequestTerminal(const nlohmann::json& commit_request);

// The status of a request in progress (first sight: Ready=False, Reconciling=True,
// Pushed=Unknown, WaitingForCloseDelay).
nlohmann::json CommitRequestInProgressStatus(const nlohmann::json& commit_request,
                                             const CommandAttribution& attribution, absl::Time now);

// The terminal status for a resolved attach. Committed: Ready=True, Pushed=True, branch and sha.
// AlreadyPresent and NoOpenWindow (NoWindowInGrace): Ready=True, Pushed=False. WindowMismatch,
// Failed: Ready=False, Stalled=True. Anything else: UnexpectedOutcome (stalled).
nlohmann::json CommitRequestOutcomeStatus(const nlohmann::json& commit_request,
                                          const CommandAttribution& attribution,
                                          const reverser::v1::FinalizeResult& result,
                                          absl::Time now);

// The terminal status once the safety window passed without an outcome (FinalizeFailed).
nlohmann::json CommitRequestTimedOutStatus(const nlohmann::json& commit_request,
                                           const CommandAttribution& attribution, absl::Time now);

// When an unresolved request must fail closed: creation + kSafetyWindow (from `first_seen` when
// the creation time is missing or malformed).
absl::Time CommitRequestDeadline(const nlohmann::json& commit_request, absl::Time first_seen);

}  // namespace reverser::catalog
