#include "services/catalog/commit_request_tracker.h"

#include <gtest/gtest.h>

#include "services/catalog/conditions.h"

namespace reverser::catalog {
namespace {

using Kind = CommitRequestAction::Kind;
using WriteResult = CommitRequestTracker::WriteResult;

const absl::Time kCreated = absl::FromUnixSeconds(1'800'000'000);

nlohmann::json Request(const std::string& uid = "cr-1", int64_t close_delay = 0) {
  return nlohmann::json{{"apiVersion", "configbutler.ai/v1alpha3"},
                        {"kind", "CommitRequest"},
                        {"metadata",
                         {{"name", "save-" + uid},
                          {"namespace", "team"},
                          {"uid", uid},
                          {"generation", 1},
                          {"creationTimestamp", FormatKubeTime(kCreated)}}},
                        {"spec",
                         {{"targetRef", {{"name", "site"}}},
                          {"message", "Save: new banner"},
                          {"closeDelaySeconds", close_delay}}}};
}

std::string ReadyReason(const nlohmann::json& status) {
  const nlohmann::json* ready = FindCondition(status["conditions"], "Ready");
  return ready == nullptr ? "<none>" : (*ready)["reason"].get<std::string>();
}

reverser::v1::FinalizeResult Unresolved() { return {}; }

reverser::v1::FinalizeResult Committed(const std::string& sha) {
  reverser::v1::FinalizeResult result;
  result.set_resolved(true);
  result.set_outcome(reverser::v1::FINALIZE_OUTCOME_COMMITTED);
  result.set_branch("main");
  result.set_sha(sha);
  return result;
}

// One action due now, of `kind`.
CommitRequestAction Only(CommitRequestTracker& tracker, Kind kind) {
  std::vector<CommitRequestAction> due = tracker.TakeDue();
  EXPECT_EQ(due.size(), 1u);
  if (due.empty()) return {};
  EXPECT_EQ(due[0].kind, kind);
  return due[0];
}

class CommitRequestTrackerTest : public ::testing::Test {
 protected:
  core::FakeClock clock_{kCreated};
  CommitRequestTracker tracker_{&clock_};

  // Through attribution (author or committer) and the in-progress stamp, to the first attach.
  CommitRequestAction ToFirstAttach(const std::optional<std::string>& author) {
    tracker_.AuthorLookedUp("cr-1", author);
    CommitRequestAction stamp = Only(tracker_, Kind::kWriteStatus);
    EXPECT_FALSE(stamp.terminal);
    EXPECT_EQ(ReadyReason(stamp.status), "WaitingForCloseDelay");
    tracker_.StatusWritten("cr-1", false, WriteResult::kWritten);
    return Only(tracker_, Kind::kAttach);
  }
};

TEST_F(CommitRequestTrackerTest, AttributesStampsAttachesPollsAndWritesTheOutcome) {
  tracker_.Observe(Request("cr-1", 5));
  CommitRequestAction lookup = Only(tracker_, Kind::kLookupAuthor);
  EXPECT_EQ(lookup.uid, "cr-1");
  EXPECT_TRUE(tracker_.TakeDue().empty()) << "an action in flight is not handed out twice";

  CommitRequestAction attach = ToFirstAttach(std::string("alice"));
  EXPECT_EQ(attach.attach.author().username(), "alice");
  EXPECT_EQ(attach.attach.target().namespace_(), "team");
  EXPECT_EQ(attach.attach.target().name(), "site");
  EXPECT_EQ(attach.attach.message(), "Save: new banner");
  EXPECT_EQ(attach.attach.close_delay_seconds(), 5u);
  EXPECT_EQ(attach.attach.uid(), "cr-1");

  tracker_.Attached("cr-1", Unresolved());
  EXPECT_TRUE(tracker_.TakeDue().empty()) << "the next poll waits for the poll interval";
  EXPECT_EQ(tracker_.NextDue(), clock_.Now() + commit_request::kPollInterval);
  clock_.Advance(commit_request::kPollInterval);
  Only(tracker_, Kind::kAttach);
  tracker_.Attached("cr-1", absl::UnavailableError("gitworker down"));
  clock_.Advance(commit_request::kPollInterval);
  Only(tracker_, Kind::kAttach);
  tracker_.Attached("cr-1", Committed("abc123"));

  CommitRequestAction done = Only(tracker_, Kind::kWriteStatus);
  EXPECT_TRUE(done.terminal);
  EXPECT_EQ(ReadyReason(done.status), "Committed");
  EXPECT_EQ(done.status["sha"], "abc123");
  EXPECT_EQ(done.status["branch"], "main");
  tracker_.StatusWritten("cr-1", true, WriteResult::kWritten);
  EXPECT_EQ(tracker_.size(), 0u);
  EXPECT_FALSE(tracker_.NextDue().has_value());
}

TEST_F(CommitRequestTrackerTest, WithoutARecordedAuthorTheCommitterIsUsed) {
  tracker_.Observe(Request());
  Only(tracker_, Kind::kLookupAuthor);
  CommitRequestAction attach = ToFirstAttach(std::nullopt);
  EXPECT_EQ(attach.attach.author().username(), "");
  EXPECT_EQ(attach.attach.author().resolution(), "absent");
}

TEST_F(CommitRequestTrackerTest, AFailingAuthorStoreIsAskedAgainThenFallsBack) {
  tracker_.Observe(Request());
  for (int i = 1; i < CommitRequestTracker::kMaxAuthorLookups; ++i) {
    Only(tracker_, Kind::kLookupAuthor);
    tracker_.AuthorLookedUp("cr-1", absl::UnavailableError("redis down"));
    EXPECT_TRUE(tracker_.TakeDue().empty());
    clock_.Advance(commit_request::kPollInterval);
  }
  Only(tracker_, Kind::kLookupAuthor);
  tracker_.AuthorLookedUp("cr-1", absl::UnavailableError("redis down"));
  CommitRequestAction stamp = Only(tracker_, Kind::kWriteStatus);
  const nlohmann::json* attributed = FindCondition(stamp.status["conditions"], "AuthorAttributed");
  ASSERT_NE(attributed, nullptr);
  EXPECT_EQ((*attributed)["reason"], "CommitterFallback");
}

TEST_F(CommitRequestTrackerTest, UnresolvedPastTheSafetyWindowFailsClosed) {
  tracker_.Observe(Request());
  Only(tracker_, Kind::kLookupAuthor);
  ToFirstAttach(std::string("alice"));
  tracker_.Attached("cr-1", Unresolved());
  // The safety window counts from creation, not from when the catalog first saw the request.
  clock_.Set(kCreated + commit_request::kSafetyWindow);
  CommitRequestAction done = Only(tracker_, Kind::kWriteStatus);
  EXPECT_TRUE(done.terminal);
  EXPECT_EQ(ReadyReason(done.status), "FinalizeFailed");
  const nlohmann::json* stalled = FindCondition(done.status["conditions"], "Stalled");
  ASSERT_NE(stalled, nullptr);
  EXPECT_EQ((*stalled)["status"], "True");
  // An attach answer arriving after the verdict does not change it.
  tracker_.Attached("cr-1", Committed("late"));
  tracker_.StatusWritten("cr-1", true, WriteResult::kWritten);
  EXPECT_EQ(tracker_.size(), 0u);
}

TEST_F(CommitRequestTrackerTest, AFailedTerminalWriteIsRetriedAndAGoneRequestForgotten) {
  tracker_.Observe(Request());
  Only(tracker_, Kind::kLookupAuthor);
  ToFirstAttach(std::string("alice"));
  tracker_.Attached("cr-1", Committed("abc"));
  Only(tracker_, Kind::kWriteStatus);
  tracker_.StatusWritten("cr-1", true, WriteResult::kFailed);
  EXPECT_TRUE(tracker_.TakeDue().empty());
  clock_.Advance(commit_request::kPollInterval);
  CommitRequestAction again = Only(tracker_, Kind::kWriteStatus);
  EXPECT_EQ(again.status["sha"], "abc");
  tracker_.StatusWritten("cr-1", true, WriteResult::kGone);
  EXPECT_EQ(tracker_.size(), 0u);
}

TEST_F(CommitRequestTrackerTest, TerminalRequestsAreLeftAloneAndARelistPicksUpTheRest) {
  // After a restart: the listing holds one finished request and one still in progress.
  nlohmann::json finished = Request("cr-done");
  finished["status"] = CommitRequestOutcomeStatus(finished, {}, Committed("abc"), kCreated);
  nlohmann::json unfinished = Request("cr-open");
  unfinished["status"] = CommitRequestInProgressStatus(unfinished, {}, kCreated);
  tracker_.Replace({finished, unfinished});
  EXPECT_EQ(tracker_.size(), 1u);
  CommitRequestAction lookup = Only(tracker_, Kind::kLookupAuthor);
  EXPECT_EQ(lookup.uid, "cr-open");

  // A relist without it forgets it; a deletion does too.
  tracker_.Replace({});
  EXPECT_EQ(tracker_.size(), 0u);
  tracker_.Observe(Request("cr-2"));
  tracker_.Forget(Request("cr-2"));
  EXPECT_EQ(tracker_.size(), 0u);
  tracker_.AuthorLookedUp("cr-2", std::nullopt);  // a late answer for a forgotten request
  EXPECT_TRUE(tracker_.TakeDue().empty());
}

}  // namespace
}  // namespace reverser::catalog
