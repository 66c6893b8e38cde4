#include "services/catalog/commit_request_status.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "services/catalog/conditions.h"
#include "services/catalog/objects.h"

namespace reverser::catalog {
namespace {

Condition Attributed(const CommandAttribution& attribution) {
  if (attribution.author.has_value()) {
    return {"AuthorAttributed", kTrue, commit_request::kAttributedFromAdmission,
            absl::StrCat("Attributed to ", *attribution.author, " from admission")};
  }
  return {"AuthorAttributed", kFalse, commit_request::kCommitterFallback,
          "No command author was recorded at admission; the commit is authored by the committer"};
}

nlohmann::json Render(const nlohmann::json& commit_request, std::vector<Condition> conditions,
                      absl::Time now) {
  const int64_t generation = GenerationOf(commit_request);
  nlohmann::json out = nlohmann::json::object();
  out["conditions"] = RenderConditions(conditions, NodeAt(commit_request, {"status", "conditions"}),
                                       generation, now);
  out["observedGeneration"] = generation;
  return out;
}

}  // namespace

std::string CommitRequestReadyReason(const nlohmann::json& status) {
  const nlohmann::json* ready = FindCondition(NodeAt(status, {"conditions"}), "Ready");
  return ready == nullptr ? "" : StringAt(*ready, {"reason"});
}

bool CommitRequestTerminal(const nlohmann::json& commit_request) {
  const std::string reason = CommitRequestReadyReason(NodeAt(commit_request, {"status"}));
  return !reason.empty() && reason != commit_request::kWaitingForCloseDelay;
}

nlohmann::json CommitRequestInProgressStatus(const nlohmann::json& commit_request,
                                             const CommandAttribution& attribution,
                                             absl::Time now) {
  std::vector<Condition> conditions = Trio(Outcome::kPending, commit_request::kWaitingForCloseDelay,
                                           "Waiting for the author's commit window to close");
  conditions.push_back(Attributed(attribution));
  conditions.push_back(
      {"Pushed", kUnknown, commit_request::kWaitingForCloseDelay, "Not pushed yet"});
  return Render(commit_request, std::move(conditions), now);
}

nlohmann::json CommitRequestOutcomeStatus(const nlohmann::json& commit_request,
                                          const CommandAttribution& attribution,
                                          const reverser::v1::FinalizeResult& result,
                                          absl::Time now) {
  std::vector<Condition> conditions;
  bool pushed = false;
  std::string reason;
  switch (result.outcome()) {
    case reverser::v1::FINALIZE_OUTCOME_COMMITTED:
      pushed = true;
      conditions = Trio(Outcome::kReady, commit_request::kCommitted,
                        absl::StrCat("Committed and pushed as ", result.sha()));
      break;
    case reverser::v1::FINALIZE_OUTCOME_ALREADY_PRESENT:
      conditions = Trio(Outcome::kReady, commit_request::kAlreadyPresent,
                        "The window produced no change: the branch already holds it");
      break;
    case reverser::v1::FINALIZE_OUTCOME_NO_OPEN_WINDOW:
      conditions = Trio(Outcome::kReady, commit_request::kNoWindowInGrace,
                        "No open commit window of this author and GitTarget by the deadline");
      break;
    case reverser::v1::FINALIZE_OUTCOME_WINDOW_MISMATCH:
      conditions = Trio(Outcome::kStalled, commit_request::kWindowMismatch,
                        "The window this request is bound to does not match the request");
      break;
    case reverser::v1::FINALIZE_OUTCOME_FAILED:
      conditions = Trio(Outcome::kStalled, commit_request::kFinalizeFailed,
                        "The window's commit could not be pushed");
      break;
    default:
      conditions = Trio(Outcome::kStalled, commit_request::kUnexpectedOutcome,
                        absl::StrCat("Unexpected outcome ",
                                     reverser::v1::FinalizeOutcome_Name(result.outcome())));
      break;
  }
  conditions.push_back(Attributed(attribution));
  conditions.push_back(pushed ? Condition{"Pushed", kTrue, commit_request::kPushed,
                                          absl::StrCat("Pushed to ", result.branch())}
                              : Condition{"Pushed", kFalse, conditions.front().reason,
                                          "Nothing was pushed for this request"});
  nlohmann::json status = Render(commit_request, std::move(conditions), now);
  if (!result.branch().empty()) status["branch"] = result.branch();
  if (pushed) status["sha"] = result.sha();
  return status;
}

nlohmann::json CommitRequestTimedOutStatus(const nlohmann::json& commit_request,
                                           const CommandAttribution& attribution, absl::Time now) {
  std::vector<Condition> conditions = Trio(Outcome::kStalled, commit_request::kFinalizeFailed,
                                           "The request did not resolve within the safety window");
  conditions.push_back(Attributed(attribution));
  conditions.push_back(
      {"Pushed", kFalse, commit_request::kFinalizeFailed, "Nothing was pushed for this request"});
  return Render(commit_request, std::move(conditions), now);
}

absl::Time CommitRequestDeadline(const nlohmann::json& commit_request, absl::Time first_seen) {
  const nlohmann::json& created = NodeAt(commit_request, {"metadata", "creationTimestamp"});
  std::optional<absl::Time> at;
  if (created.is_string()) at = ParseKubeTime(created.get<std::string>());
  return at.value_or(first_seen) + commit_request::kSafetyWindow;
}

}  // namespace reverser::catalog
