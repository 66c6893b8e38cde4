#include "libs/redisstore/append_plan.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace reverser::redisstore::internal {
namespace {

using core::StreamPosition;

StreamEntry Change(std::string name, std::string rv) {
  StreamEntry entry;
  entry.uid = "uid-" + name;
  entry.name = std::move(name);
  entry.resource_version = std::move(rv);
  entry.object_json = "{}";
  return entry;
}

std::vector<std::string> Describe(const AppendPlan& plan) {
  std::vector<std::string> out;
  for (const AppendResult& r : plan.results) {
    out.push_back(r.appended ? "appended " + r.position.ToString()
                             : std::string(DivertReasonName(*r.diverted)) +
                                   (r.position.IsZero() ? "" : " " + r.position.ToString()));
  }
  return out;
}

// The stream's last entry is read only for the duplicate check, at most once, and only counts
// when it is still the top (not trimmed away).
TEST(AppendPlanTest, ReadsTheLastEntryOnlyWhenAnEntryMayRepeatTheTop) {
  const StreamEntry a10 = Change("a", "10");
  std::vector<std::string> a10_fields;
  const std::vector<StreamEntry> just_a10 = {a10};
  const PreparedChunk prepared_a10(just_a10);
  for (absl::string_view f : prepared_a10.Fields(0)) a10_fields.emplace_back(f);
  int reads = 0;
  auto last_is_a10 = [&]() -> absl::StatusOr<std::optional<LastEntry>> {
    ++reads;
    return std::optional<LastEntry>(LastEntry{StreamPosition(10, 0), a10_fields});
  };
  const std::vector<StreamEntry> newer = {Change("b", "11"), Change("b", "12")};
  auto plan = PlanAppends(PreparedChunk(newer), {StreamPosition(10, 0), std::nullopt}, last_is_a10);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(reads, 0);
  EXPECT_EQ(Describe(*plan), (std::vector<std::string>{"appended 11-0", "appended 12-0"}));
  EXPECT_EQ(plan->top, StreamPosition(12, 0));
  EXPECT_EQ(plan->appended, (std::vector<size_t>{0, 1}));

  const std::vector<StreamEntry> repeats = {a10, a10, Change("c", "10"), a10};
  plan = PlanAppends(PreparedChunk(repeats), {StreamPosition(10, 0), std::nullopt}, last_is_a10);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(reads, 1);
  EXPECT_EQ(Describe(*plan), (std::vector<std::string>{"duplicate_of_stream_top 10-0",
                                                       "duplicate_of_stream_top 10-0",
                                                       "appended 10-1", "appended 10-2"}));
  EXPECT_EQ(plan->diverted[static_cast<size_t>(DivertReason::kDuplicateOfStreamTop)], 2);

  // The top was trimmed (the last entry left is older): a repeat is a new entry.
  auto last_is_older = [&]() -> absl::StatusOr<std::optional<LastEntry>> {
    return std::optional<LastEntry>(LastEntry{StreamPosition(9, 0), a10_fields});
  };
  plan = PlanAppends(PreparedChunk({a10}), {StreamPosition(10, 0), std::nullopt}, last_is_older);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(Describe(*plan), (std::vector<std::string>{"appended 10-1"}));

  // A failed read fails the plan.
  plan = PlanAppends(PreparedChunk({a10}), {StreamPosition(10, 0), std::nullopt},
                     []() -> absl::StatusOr<std::optional<LastEntry>> {
                       return absl::UnavailableError("connection lost");
                     });
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kUnavailable);
}

TEST(AppendPlanTest, CheckpointRvlessNonNumericAndTheLastSeqOfAnRv) {
  auto no_read = []() -> absl::StatusOr<std::optional<LastEntry>> {
    ADD_FAILURE() << "no entry repeats the top";
    return std::optional<LastEntry>();
  };
  const std::vector<StreamEntry> batch = {
      Change("x", ""),                      // no top yet
      Change("a", "7"),                     // at 7-0, covered by 7-0
      Change("a", "0x7"),                   // not a number
      Change("a", "8"),   Change("b", ""),  // attaches to 8
  };
  auto plan =
      PlanAppends(PreparedChunk(batch), {StreamPosition::Zero(), StreamPosition(7, 0)}, no_read);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(Describe(*plan),
            (std::vector<std::string>{"rvless_empty_stream", "covered_by_checkpoint",
                                      "non_numeric_rv", "appended 8-0", "appended 8-1"}));
  EXPECT_TRUE(PreparedChunk(batch).NeedsSnapshot());
  EXPECT_FALSE(PreparedChunk({Change("a", "v1")}).NeedsSnapshot());

  // Same RV as a checkpoint at 7-3 with the top at 7-2: 7-3 would be covered; at 7-3, 7-4 is not.
  plan = PlanAppends(PreparedChunk({Change("c", "7")}),
                     {StreamPosition(7, 2), StreamPosition(7, 3)}, no_read);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(Describe(*plan), (std::vector<std::string>{"covered_by_checkpoint"}));

  // XADD cannot go past the last seq of an RV.
  auto last_other = []() -> absl::StatusOr<std::optional<LastEntry>> {
    return std::optional<LastEntry>();
  };
  plan = PlanAppends(PreparedChunk({Change("c", "7"), Change("c", "8")}),
                     {StreamPosition::EndOf(7), std::nullopt}, last_other);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(Describe(*plan), (std::vector<std::string>{"older_than_stream_top", "appended 8-0"}));
}

}  // namespace
}  // namespace reverser::redisstore::internal
