#include "services/catalog/commit_request_status.h"

#include <gtest/gtest.h>

#include "services/catalog/conditions.h"

namespace reverser::catalog {
namespace {

const absl::Time kCreated = absl::FromUnixSeconds(1'800'000'000);

nlohmann::json Request() {
  return nlohmann::json{{"apiVersion", "configbutler.ai/v1alpha3"},
                        {"kind", "CommitRequest"},
                        {"metadata",
                         {{"name", "release-1"},
                          {"namespace", "team"},
                          {"uid", "cr-1"},
                          {"generation", 1},
                          {"creationTimestamp", FormatKubeTime(kCreated)}}},
                        {"spec", {{"targetRef", {{"name", "site"}}}, {"message", "Release 1"}}}};
}

std::string ConditionField(const nlohmann::json& status, const std::string& type,
                           const char* field) {
  const nlohmann::json* condition = FindCondition(status["conditions"], type);
  return condition == nullptr ? "<none>" : (*condition)[field].get<std::string>();
}

reverser::v1::FinalizeResult Result(reverser::v1::FinalizeOutcome outcome,
                                    const std::string& sha = "") {
  reverser::v1::FinalizeResult result;
  result.set_resolved(true);
  result.set_outcome(outcome);
  result.set_branch("main");
  result.set_sha(sha);
  return result;
}

TEST(CommitRequestStatusTest, FirstSightIsInProgressAndNamesWhoItIsAttributedTo) {
  nlohmann::json request = Request();
  const nlohmann::json status =
      CommitRequestInProgressStatus(request, {.author = "alice"}, kCreated);
  EXPECT_EQ(ConditionField(status, "Ready", "status"), "False");
  EXPECT_EQ(ConditionField(status, "Ready", "reason"), "WaitingForCloseDelay");
  EXPECT_EQ(ConditionField(status, "Reconciling", "status"), "True");
  EXPECT_EQ(ConditionField(status, "Pushed", "status"), "Unknown");
  EXPECT_EQ(ConditionField(status, "AuthorAttributed", "status"), "True");
  EXPECT_EQ(ConditionField(status, "AuthorAttributed", "reason"), "AttributedFromAdmission");
  EXPECT_EQ(status["observedGeneration"], 1);
  request["status"] = status;
  EXPECT_FALSE(CommitRequestTerminal(request)) << "in progress is not terminal";

  const nlohmann::json fallback = CommitRequestInProgressStatus(Request(), {}, kCreated);
  EXPECT_EQ(ConditionField(fallback, "AuthorAttributed", "status"), "False");
  EXPECT_EQ(ConditionField(fallback, "AuthorAttributed", "reason"), "CommitterFallback");
}

TEST(CommitRequestStatusTest, ACommitIsReadyAndPushedWithItsBranchAndSha) {
  nlohmann::json request = Request();
  const nlohmann::json status = CommitRequestOutcomeStatus(
      request, {}, Result(reverser::v1::FINALIZE_OUTCOME_COMMITTED, "abc123"), kCreated);
  EXPECT_EQ(ConditionField(status, "Ready", "status"), "True");
  EXPECT_EQ(ConditionField(status, "Ready", "reason"), "Committed");
  EXPECT_EQ(ConditionField(status, "Stalled", "status"), "False");
  EXPECT_EQ(ConditionField(status, "Pushed", "status"), "True");
  EXPECT_EQ(ConditionField(status, "Pushed", "reason"), "Pushed");
  EXPECT_EQ(status["branch"], "main");
  EXPECT_EQ(status["sha"], "abc123");
  request["status"] = status;
  EXPECT_TRUE(CommitRequestTerminal(request));
}

TEST(CommitRequestStatusTest, BenignOutcomesWithoutACommitAreReadyButNotPushed) {
  for (auto [outcome, reason] :
       {std::pair{reverser::v1::FINALIZE_OUTCOME_NO_OPEN_WINDOW, "NoWindowInGrace"},
        std::pair{reverser::v1::FINALIZE_OUTCOME_ALREADY_PRESENT, "AlreadyPresent"}}) {
    const nlohmann::json status =
        CommitRequestOutcomeStatus(Request(), {}, Result(outcome), kCreated);
    EXPECT_EQ(ConditionField(status, "Ready", "status"), "True") << reason;
    EXPECT_EQ(ConditionField(status, "Ready", "reason"), reason);
    EXPECT_EQ(ConditionField(status, "Stalled", "status"), "False") << reason;
    EXPECT_EQ(ConditionField(status, "Pushed", "status"), "False") << reason;
    EXPECT_FALSE(status.contains("sha")) << reason;
  }
}

TEST(CommitRequestStatusTest, FailuresStall) {
  for (auto [outcome, reason] :
       {std::pair{reverser::v1::FINALIZE_OUTCOME_WINDOW_MISMATCH, "WindowMismatch"},
        std::pair{reverser::v1::FINALIZE_OUTCOME_FAILED, "FinalizeFailed"},
        std::pair{reverser::v1::FINALIZE_OUTCOME_UNSPECIFIED, "UnexpectedOutcome"}}) {
    const nlohmann::json status =
        CommitRequestOutcomeStatus(Request(), {}, Result(outcome), kCreated);
    EXPECT_EQ(ConditionField(status, "Ready", "status"), "False") << reason;
    EXPECT_EQ(ConditionField(status, "Ready", "reason"), reason);
    EXPECT_EQ(ConditionField(status, "Stalled", "status"), "True") << reason;
  }
}

TEST(CommitRequestStatusTest, AnUnresolvedRequestFailsClosed420sAfterItsCreation) {
  EXPECT_EQ(CommitRequestDeadline(Request(), kCreated + absl::Hours(1)),
            kCreated + absl::Seconds(420))
      << "anchored at creation, not at when the controller first saw it";
  nlohmann::json undated = Request();
  undated["metadata"].erase("creationTimestamp");
  EXPECT_EQ(CommitRequestDeadline(undated, kCreated), kCreated + absl::Seconds(420));

  nlohmann::json request = Request();
  request["status"] = CommitRequestInProgressStatus(request, {}, kCreated);
  const nlohmann::json status =
      CommitRequestTimedOutStatus(request, {}, kCreated + absl::Seconds(420));
  EXPECT_EQ(ConditionField(status, "Ready", "reason"), "FinalizeFailed");
  EXPECT_EQ(ConditionField(status, "Stalled", "status"), "True");
  EXPECT_EQ(ConditionField(status, "Pushed", "status"), "False");
  EXPECT_NE(ConditionField(status, "Ready", "message").find("safety window"), std::string::npos);
}

TEST(CommitRequestStatusTest, AMalformedObjectIsNeverTerminalAndDoesNotThrow) {
  EXPECT_FALSE(CommitRequestTerminal(nlohmann::json::array()));
  EXPECT_FALSE(CommitRequestTerminal(nlohmann::json{{"status", {{"conditions", "x"}}}}));
  const nlohmann::json status =
      CommitRequestInProgressStatus(nlohmann::json("garbage"), {}, kCreated);
  EXPECT_EQ(status["observedGeneration"], 0);
}

}  // namespace
}  // namespace reverser::catalog
