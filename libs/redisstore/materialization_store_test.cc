#include "libs/redisstore/materialization_store.h"

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "tests/fixtures/redis_server.h"
#include "libs/redisstore/test_redis.h"

namespace reverser::redisstore {
namespace {

using core::StreamPosition;

const core::GroupVersionResource kConfigMaps{"", "v1", "configmaps"};

class MaterializationStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto server = testing::RedisServer::Start();
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    redis_ = Connect();
    ASSERT_NE(redis_, nullptr);
    store_ = std::make_unique<MaterializationStore>(redis_.get(), KeyPrefix::Default(), kConfigMaps,
                                                    core::WatchScope::Cluster());
  }

  std::unique_ptr<RedisConnection> Connect() {
    auto connection = ConnectTo(*server_);
    EXPECT_TRUE(connection.ok()) << connection.status();
    return connection.ok() ? std::move(*connection) : nullptr;
  }

  static StreamEntry Change(ChangeOp op, std::string name, std::string rv, std::string body = "") {
    StreamEntry entry;
    entry.op = op;
    entry.uid = "uid-" + name;
    entry.namespace_ = "default";
    entry.name = std::move(name);
    entry.resource_version = std::move(rv);
    if (op != ChangeOp::kDeleted) {
      entry.object_json = body.empty() ? "{\"rv\":\"" + entry.resource_version + "\"}" : body;
    }
    return entry;
  }

  AppendResult MustAppend(const StreamEntry& entry) {
    auto result = store_->Append(entry);
    EXPECT_TRUE(result.ok()) << result.status();
    return result.ok() ? *result : AppendResult{};
  }

  std::unique_ptr<testing::RedisServer> server_;
  std::unique_ptr<RedisConnection> redis_;
  std::unique_ptr<MaterializationStore> store_;
};

// AppendAll is Append, batched: same results, same stream, same counts — also after SCRIPT FLUSH
// (appends use no script) and when the batch is resent whole.
TEST_F(MaterializationStoreTest, AppendAllMatchesOneAppendAtATime) {
  const std::vector<StreamEntry> batch = {
      Change(ChangeOp::kDeleted, "x", ""),  // nothing to attach to yet
      Change(ChangeOp::kAdded, "a", "10"),     Change(ChangeOp::kModified, "a", "12"),
      Change(ChangeOp::kAdded, "b", "12"),      // same RV: next seq
      Change(ChangeOp::kModified, "b", "11"),   // older than the top
      Change(ChangeOp::kModified, "b", "12x"),  // not a number
      Change(ChangeOp::kDeleted, "a", ""),      // attaches to the top's RV
      Change(ChangeOp::kAdded, "c", "15"),     Change(ChangeOp::kAdded, "c", "15"),  // duplicate
  };
  MaterializationStore one_by_one(redis_.get(), KeyPrefix::Default(), kConfigMaps,
                                  core::WatchScope::Namespace("one"));
  MaterializationStore pipelined(redis_.get(), KeyPrefix::Default(), kConfigMaps,
                                 core::WatchScope::Namespace("all"));
  std::vector<AppendResult> expected;
  for (const StreamEntry& entry : batch) {
    auto result = one_by_one.Append(entry);
    ASSERT_TRUE(result.ok()) << result.status();
    expected.push_back(*result);
  }
  ASSERT_TRUE(redis_->Command({"SCRIPT", "FLUSH"}).ok());
  auto results = pipelined.AppendAll(batch);
  ASSERT_TRUE(results.ok()) << results.status();
  ASSERT_EQ(results->size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ((*results)[i].appended, expected[i].appended) << i;
    EXPECT_EQ((*results)[i].diverted, expected[i].diverted) << i;
    EXPECT_EQ((*results)[i].position, expected[i].position) << i;
  }
  auto stream_of = [&](const MaterializationStore& store) {
    auto range = redis_->Command({"XRANGE", store.keys().stream, "-", "+"});
    EXPECT_TRUE(range.ok());
    return range.ok() ? range->DebugString() : "";
  };
  EXPECT_EQ(stream_of(pipelined), stream_of(one_by_one));
  auto counts_of = [&](const MaterializationStore& store) {
    auto counts = redis_->Command({"HGETALL", store.keys().counts});
    EXPECT_TRUE(counts.ok());
    auto map = counts->AsStringMap();
    return std::map<std::string, std::string>(map->begin(), map->end());
  };
  EXPECT_EQ(counts_of(pipelined), counts_of(one_by_one));

  // A resent batch of watch changes (all with RVs; its reply lost) changes no entry.
  auto resent = pipelined.AppendAll({batch[1], batch[2], batch[3], batch[7]});
  ASSERT_TRUE(resent.ok()) << resent.status();
  for (const AppendResult& r : *resent) EXPECT_FALSE(r.appended);
  EXPECT_EQ(stream_of(pipelined), stream_of(one_by_one));

  // An invalid entry (an upsert without a body) sends nothing.
  StreamEntry bodyless = Change(ChangeOp::kAdded, "d", "20");
  bodyless.object_json.clear();
  EXPECT_EQ(pipelined.AppendAll({Change(ChangeOp::kAdded, "e", "19"), bodyless}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(stream_of(pipelined), stream_of(one_by_one));
  auto empty = pipelined.AppendAll({});
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
}

// "appended 10-0", "diverted older_than_stream_top", "diverted duplicate_of_stream_top 10-0".
std::string Describe(const AppendResult& result) {
  if (result.appended) return "appended " + result.position.ToString();
  std::string text = "diverted ";
  text += result.diverted ? std::string(DivertReasonName(*result.diverted)) : "(no reason)";
  if (!result.position.IsZero()) text += " " + result.position.ToString();
  return text;
}

std::vector<std::string> Describe(const std::vector<AppendResult>& results) {
  std::vector<std::string> out;
  for (const AppendResult& result : results) out.push_back(Describe(result));
  return out;
}

// Inside one batch (one transaction) every entry is judged against the stream as the entries
// before it left it: the top moves with each append, the checkpoint applies to all, and only a
// repeat of the current top is a duplicate.
TEST_F(MaterializationStoreTest, AppendAllJudgesEachEntryAfterTheOnesBeforeIt) {
  ASSERT_TRUE(store_->ReplaceCheckpoint({}, StreamPosition::EndOf(5)).ok());
  const StreamEntry a10 = Change(ChangeOp::kAdded, "a", "10");
  const StreamEntry b_gone = Change(ChangeOp::kDeleted, "b", "");
  const std::vector<StreamEntry> batch = {
      Change(ChangeOp::kAdded, "c", "3"),       // below the checkpoint
      Change(ChangeOp::kDeleted, "x", ""),      // no top to attach to yet
      a10,                                      //
      a10,                                      // repeat of the top just appended
      Change(ChangeOp::kModified, "b", "10x"),  // not a number, in the middle
      Change(ChangeOp::kAdded, "b", "10"),      // same RV: next seq
      a10,  // equal to an earlier entry, but not to the top: appended
      Change(ChangeOp::kModified, "a", "9"),  // older than the top
      b_gone,                                 // RV-less: attaches to the top's RV
      b_gone,                                 // an RV-less repeat of the top
      Change(ChangeOp::kModified, "c", "12"),
  };
  auto results = store_->AppendAll(batch);
  ASSERT_TRUE(results.ok()) << results.status();
  EXPECT_EQ(Describe(*results), (std::vector<std::string>{
                                    "diverted covered_by_checkpoint",
                                    "diverted rvless_empty_stream",
                                    "appended 10-0",
                                    "diverted duplicate_of_stream_top 10-0",
                                    "diverted non_numeric_rv",
                                    "appended 10-1",
                                    "appended 10-2",
                                    "diverted older_than_stream_top",
                                    "appended 10-3",
                                    "diverted duplicate_of_stream_top 10-3",
                                    "appended 12-0",
                                }));
  auto counts = store_->ReadCounts();
  ASSERT_TRUE(counts.ok()) << counts.status();
  EXPECT_EQ(counts->appended, 5);
  EXPECT_EQ(counts->diverted, (std::map<std::string, int64_t>{{"covered_by_checkpoint", 1},
                                                              {"duplicate_of_stream_top", 2},
                                                              {"non_numeric_rv", 1},
                                                              {"older_than_stream_top", 1},
                                                              {"rvless_empty_stream", 1}}));
  auto top = redis_->Command({"HGET", store_->keys().counts, "top"});
  ASSERT_TRUE(top.ok());
  EXPECT_EQ(top->str(), "12-0");
  auto read = store_->ReadAfter(StreamPosition::Zero(), 100);
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_EQ(read->entries.size(), 5u);
  EXPECT_EQ(read->entries[2].name, "a");
  EXPECT_EQ(read->entries[3].op, ChangeOp::kDeleted);
  EXPECT_EQ(read->entries[3].position, StreamPosition(10, 3));

  // Across batches: the next batch starts from the top the last one left, and a repeat of that
  // top (a batch resent after a lost reply) is absorbed.
  auto next = store_->AppendAll({batch.back(), Change(ChangeOp::kModified, "d", "13")});
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(Describe(*next),
            (std::vector<std::string>{"diverted duplicate_of_stream_top 12-0", "appended 13-0"}));
  // A checkpoint swapped in between batches applies to the next one.
  ASSERT_TRUE(store_->ReplaceCheckpoint({}, StreamPosition::EndOf(14)).ok());
  auto later = store_->AppendAll(
      {Change(ChangeOp::kModified, "d", "14"), Change(ChangeOp::kModified, "d", "15")});
  ASSERT_TRUE(later.ok()) << later.status();
  EXPECT_EQ(Describe(*later),
            (std::vector<std::string>{"diverted covered_by_checkpoint", "appended 15-0"}));
  // A batch of nothing but non-numeric RVs still counts them.
  auto odd = store_->AppendAll(
      {Change(ChangeOp::kModified, "e", "x1"), Change(ChangeOp::kModified, "e", "x2")});
  ASSERT_TRUE(odd.ok()) << odd.status();
  EXPECT_EQ(Describe(*odd),
            (std::vector<std::string>{"diverted non_numeric_rv", "diverted non_numeric_rv"}));
  counts = store_->ReadCounts();
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ(counts->appended, 7);
  EXPECT_EQ(counts->diverted["duplicate_of_stream_top"], 3);
  EXPECT_EQ(counts->diverted["covered_by_checkpoint"], 2);
  EXPECT_EQ(counts->diverted["non_numeric_rv"], 3);
}

// How often Redis ran `command` (lower case) since the last CONFIG RESETSTAT.
int64_t CommandCalls(RedisConnection& redis, const std::string& command) {
  auto info = redis.Command({"INFO", "commandstats"});
  if (!info.ok()) return -1;
  const std::string& text = info->str();
  const std::string field = "cmdstat_" + command + ":calls=";
  size_t at = text.find(field);
  if (at == std::string::npos) return 0;
  return std::stoll(text.substr(at + field.size()));
}

// A large batch is split into transactions of at most 256 entries; the stream top carries over
// from one to the next (a duplicate across the split is still caught). No script is involved
// (SCRIPT FLUSH, as after a restart, changes nothing).
TEST_F(MaterializationStoreTest, LargeAppendAllSpansTransactions) {
  auto first = store_->AppendAll({Change(ChangeOp::kAdded, "warm", "1")});
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(redis_->Command({"SCRIPT", "FLUSH"}).ok());
  std::vector<StreamEntry> batch;
  for (int i = 0; i < 600; ++i) {
    batch.push_back(
        Change(ChangeOp::kModified, "o" + std::to_string(i % 50), std::to_string(2 + i)));
  }
  batch[256] = batch[255];  // the first entry of the second call repeats the first call's last
  batch[300].resource_version = "three hundred";
  auto results = store_->AppendAll(batch);
  ASSERT_TRUE(results.ok()) << results.status();
  ASSERT_EQ(results->size(), batch.size());
  for (size_t i = 0; i < batch.size(); ++i) {
    if (i == 256) {
      EXPECT_EQ(Describe((*results)[i]), "diverted duplicate_of_stream_top 257-0");
    } else if (i == 300) {
      EXPECT_EQ(Describe((*results)[i]), "diverted non_numeric_rv");
    } else {
      EXPECT_EQ(Describe((*results)[i]), "appended " + std::to_string(2 + i) + "-0") << i;
    }
  }
  auto counts = store_->ReadCounts();
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ(counts->appended, 1 + 598);

  // One transaction per 256 entries, not one per entry, and no script.
  ASSERT_TRUE(redis_->Command({"CONFIG", "RESETSTAT"}).ok());
  std::vector<StreamEntry> more;
  for (int i = 0; i < 600; ++i) {
    more.push_back(Change(ChangeOp::kModified, "p", std::to_string(1000 + i)));
  }
  auto appended = store_->AppendAll(more);
  ASSERT_TRUE(appended.ok()) << appended.status();
  EXPECT_EQ(Describe(appended->back()), "appended 1599-0");
  EXPECT_EQ(CommandCalls(*redis_, "exec"), 3);
  EXPECT_EQ(CommandCalls(*redis_, "evalsha") + CommandCalls(*redis_, "eval"), 0);
}

// Big bodies: a transaction carries several entries only while they total at most 4 MiB (a
// bigger single entry still goes, alone).
TEST_F(MaterializationStoreTest, AppendAllBoundsTheBytesPerTransaction) {
  ASSERT_TRUE(store_->AppendAll({Change(ChangeOp::kAdded, "warm", "1")}).ok());
  ASSERT_TRUE(redis_->Command({"CONFIG", "RESETSTAT"}).ok());
  std::vector<StreamEntry> batch;
  for (int i = 0; i < 5; ++i) {  // 1.5 MiB each: two per call
    batch.push_back(Change(ChangeOp::kModified, "big", std::to_string(2 + i),
                           "{\"data\":\"" + std::string(3 << 19, 'a' + i) + "\"}"));
  }
  batch.push_back(Change(ChangeOp::kModified, "huge", "10", std::string(5 << 20, 'h')));
  auto results = store_->AppendAll(batch);
  ASSERT_TRUE(results.ok()) << results.status();
  for (const AppendResult& result : *results) EXPECT_TRUE(result.appended);
  EXPECT_EQ(CommandCalls(*redis_, "exec"), 4);
  auto view = store_->ReadAfter(StreamPosition::Zero(), 10);
  ASSERT_TRUE(view.ok());
  ASSERT_EQ(view->entries.size(), 7u);
  EXPECT_EQ(view->entries[5].object_json, batch[4].object_json);
  EXPECT_EQ(view->entries[6].object_json, batch[5].object_json);
}

// Appends are optimistic transactions: the rules are decided on what round trip 1 read, and
// EXEC writes nothing if the stream, checkpoint or counts changed since. A checkpoint swap or
// another writer landing in between makes the chunk be read and decided again, with the results
// the new state gives.
TEST_F(MaterializationStoreTest, AChangeBetweenReadAndCommitMakesTheChunkDecideAgain) {
  ASSERT_TRUE(store_->ReplaceCheckpoint({}, StreamPosition::EndOf(5)).ok());
  ASSERT_TRUE(MustAppend(Change(ChangeOp::kAdded, "a", "10")).appended);
  std::unique_ptr<RedisConnection> other_connection = Connect();
  ASSERT_NE(other_connection, nullptr);
  MaterializationStore other(other_connection.get(), KeyPrefix::Default(), kConfigMaps,
                             core::WatchScope::Cluster());
  int decisions = 0;
  std::function<void()> interfere;
  store_->SetBeforeAppendCommitForTesting([&] {
    if (++decisions == 1) interfere();
  });

  // A checkpoint swap at 12 (it trims 10-0): 11 is now covered.
  interfere = [&] { ASSERT_TRUE(other.ReplaceCheckpoint({}, StreamPosition::EndOf(12)).ok()); };
  auto swapped = store_->AppendAll(
      {Change(ChangeOp::kModified, "b", "11"), Change(ChangeOp::kModified, "c", "13")});
  ASSERT_TRUE(swapped.ok()) << swapped.status();
  EXPECT_EQ(decisions, 2);
  EXPECT_EQ(Describe(*swapped),
            (std::vector<std::string>{"diverted covered_by_checkpoint", "appended 13-0"}));

  // Another writer appends the very entry this batch starts with: the retry sees it as the top.
  decisions = 0;
  const StreamEntry d20 = Change(ChangeOp::kModified, "d", "20");
  interfere = [&] { ASSERT_TRUE(other.Append(d20).ok()); };
  auto raced = store_->AppendAll({d20, Change(ChangeOp::kModified, "e", "20")});
  ASSERT_TRUE(raced.ok()) << raced.status();
  EXPECT_EQ(decisions, 2);
  EXPECT_EQ(Describe(*raced),
            (std::vector<std::string>{"diverted duplicate_of_stream_top 20-0", "appended 20-1"}));

  // A single Append takes the same path.
  decisions = 0;
  interfere = [&] { ASSERT_TRUE(other.Append(Change(ChangeOp::kModified, "f", "21")).ok()); };
  EXPECT_EQ(Describe(MustAppend(Change(ChangeOp::kModified, "g", "21"))), "appended 21-1");
  EXPECT_EQ(decisions, 2);

  auto read = store_->ReadAfter(StreamPosition::Zero(), 10);
  ASSERT_TRUE(read.ok()) << read.status();
  std::vector<std::string> stream;
  for (const StreamEntry& entry : read->entries) {
    stream.push_back(entry.position.ToString() + " " + entry.name);
  }
  EXPECT_EQ(stream, (std::vector<std::string>{"13-0 c", "20-0 d", "20-1 e", "21-0 f", "21-1 g"}));
  auto counts = store_->ReadCounts();
  ASSERT_TRUE(counts.ok()) << counts.status();
  EXPECT_EQ(counts->appended, 6);  // a, c, d (other), e, f (other), g
  EXPECT_EQ(counts->diverted, (std::map<std::string, int64_t>{{"covered_by_checkpoint", 1},
                                                              {"duplicate_of_stream_top", 1}}));
  auto top = redis_->Command({"HGET", store_->keys().counts, "top"});
  ASSERT_TRUE(top.ok());
  EXPECT_EQ(top->str(), "21-1");
}

// A chunk whose watched keys change every time gives up after a bounded number of attempts with
// a clear error, having written nothing, and leaves the connection usable (no watch behind).
TEST_F(MaterializationStoreTest, AppendGivesUpWhenTheStreamKeepsChangingAndWritesNothing) {
  ASSERT_TRUE(store_->ReplaceCheckpoint({}, StreamPosition::EndOf(5)).ok());
  ASSERT_TRUE(MustAppend(Change(ChangeOp::kAdded, "a", "10")).appended);
  std::unique_ptr<RedisConnection> other = Connect();
  ASSERT_NE(other, nullptr);
  auto snapshot = [&] {
    std::string text;
    for (const std::string& key : {store_->keys().stream, store_->keys().counts}) {
      auto dump = redis_->Command({"DUMP", key});
      EXPECT_TRUE(dump.ok());
      if (dump.ok()) text += dump->str();
    }
    return text;
  };
  const std::string before = snapshot();
  int decisions = 0;
  store_->SetBeforeAppendCommitForTesting([&] {
    ++decisions;
    // Rewriting the same checkpoint position still counts as a change to the watched key.
    ASSERT_TRUE(
        other->Command({"SET", store_->keys().checkpoint_rv, "5-18446744073709551615"}).ok());
  });
  auto result = store_->AppendAll(
      {Change(ChangeOp::kModified, "b", "11"), Change(ChangeOp::kModified, "b", "x")});
  EXPECT_EQ(result.status().code(), absl::StatusCode::kAborted) << result.status();
  EXPECT_NE(result.status().message().find("gave up after 8 attempts"), std::string::npos)
      << result.status();
  EXPECT_EQ(decisions, 8);
  EXPECT_EQ(snapshot(), before);

  store_->SetBeforeAppendCommitForTesting(nullptr);
  EXPECT_EQ(Describe(MustAppend(Change(ChangeOp::kModified, "b", "11"))), "appended 11-0");
}

// An append that fails after WATCH (here: a corrupt cached top) un-watches, so the connection's
// next transaction is not aborted by a later change to those keys.
TEST_F(MaterializationStoreTest, AFailedAppendLeavesNoWatchBehind) {
  ASSERT_TRUE(MustAppend(Change(ChangeOp::kAdded, "a", "10")).appended);
  ASSERT_TRUE(redis_->Command({"HSET", store_->keys().counts, "top", "not-a-position"}).ok());
  EXPECT_FALSE(store_->Append(Change(ChangeOp::kAdded, "b", "11")).ok());
  std::unique_ptr<RedisConnection> other = Connect();
  ASSERT_NE(other, nullptr);
  ASSERT_TRUE(other->Command({"XADD", store_->keys().stream, "12-0", "op", "ADDED"}).ok());
  auto read = redis_->Transaction({{"XLEN", store_->keys().stream}});
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ((*read)[0].integer(), 2);
}

// Streams written before `counts top` existed: the top is read once from XINFO STREAM, and the
// first append caches it again. An RV whose last seq is taken cannot get another entry.
TEST_F(MaterializationStoreTest, AStreamWithoutACachedTopFallsBackToXinfo) {
  const StreamEntry a10 = Change(ChangeOp::kAdded, "a", "10");
  ASSERT_TRUE(MustAppend(a10).appended);
  ASSERT_TRUE(redis_->Command({"HDEL", store_->keys().counts, "top"}).ok());
  EXPECT_EQ(Describe(MustAppend(a10)), "diverted duplicate_of_stream_top 10-0");
  EXPECT_EQ(Describe(MustAppend(Change(ChangeOp::kModified, "a", "10"))), "appended 10-1");
  auto top = redis_->Command({"HGET", store_->keys().counts, "top"});
  ASSERT_TRUE(top.ok());
  EXPECT_EQ(top->str(), "10-1");

  ASSERT_TRUE(redis_
                  ->Command({"XADD", store_->keys().stream, "11-18446744073709551615", "op",
                             "ADDED", "name", "z", "obj", "{}", "src", "watch"})
                  .ok());
  ASSERT_TRUE(redis_->Command({"HDEL", store_->keys().counts, "top"}).ok());
  EXPECT_EQ(Describe(MustAppend(Change(ChangeOp::kModified, "b", "11"))),
            "diverted older_than_stream_top");
  EXPECT_EQ(Describe(MustAppend(Change(ChangeOp::kModified, "b", "12"))), "appended 12-0");
}

TEST_F(MaterializationStoreTest, AppendAssignsRvSeqAndDivertsWithoutReordering) {
  // No stream top yet: an RV-less entry has nothing to attach to.
  auto rvless = MustAppend(Change(ChangeOp::kDeleted, "x", ""));
  EXPECT_FALSE(rvless.appended);
  EXPECT_EQ(rvless.diverted, DivertReason::kRvlessEmptyStream);

  EXPECT_EQ(MustAppend(Change(ChangeOp::kAdded, "a", "10")).position, StreamPosition(10, 0));
  EXPECT_EQ(MustAppend(Change(ChangeOp::kAdded, "b", "10")).position, StreamPosition(10, 1));
  EXPECT_EQ(MustAppend(Change(ChangeOp::kModified, "a", "0012")).position, StreamPosition(12, 0));
  auto older = MustAppend(Change(ChangeOp::kModified, "b", "11"));
  EXPECT_FALSE(older.appended);
  EXPECT_EQ(older.diverted, DivertReason::kOlderThanStreamTop);
  auto bad = MustAppend(Change(ChangeOp::kModified, "b", "12abc"));
  EXPECT_EQ(bad.diverted, DivertReason::kNonNumericRv);
  // An RV-less delete attaches to the top RV, after the entries already there.
  EXPECT_EQ(MustAppend(Change(ChangeOp::kDeleted, "b", "")).position, StreamPosition(12, 1));

  auto top = store_->StreamTop();
  ASSERT_TRUE(top.ok());
  EXPECT_EQ(**top, StreamPosition(12, 1));
  auto counts = store_->ReadCounts();
  ASSERT_TRUE(counts.ok()) << counts.status();
  EXPECT_EQ(counts->appended, 4);
  EXPECT_EQ(counts->diverted["older_than_stream_top"], 1);
  EXPECT_EQ(counts->diverted["non_numeric_rv"], 1);
  EXPECT_EQ(counts->diverted["rvless_empty_stream"], 1);

  // Stream order is exactly append order; the diverted entries are not there.
  auto batch = store_->ReadAfter(StreamPosition::Zero(), 100);
  ASSERT_TRUE(batch.ok()) << batch.status();
  ASSERT_EQ(batch->entries.size(), 4u);
  EXPECT_EQ(batch->entries[2].name, "a");
  EXPECT_EQ(batch->entries[2].resource_version, "0012");  // as the source said it
  EXPECT_EQ(batch->entries[3].op, ChangeOp::kDeleted);
  EXPECT_EQ(batch->entries[3].resource_version, "");
}

TEST_F(MaterializationStoreTest, RetriedAppendIsAbsorbedAsDuplicate) {
  StreamEntry entry = Change(ChangeOp::kModified, "a", "20");
  EXPECT_EQ(MustAppend(entry).position, StreamPosition(20, 0));
  // The same bytes again (a retry after a lost reply, or a re-delivered watch event).
  auto again = MustAppend(entry);
  EXPECT_FALSE(again.appended);
  EXPECT_EQ(again.diverted, DivertReason::kDuplicateOfStreamTop);
  EXPECT_EQ(again.position, StreamPosition(20, 0));
  // Different content at the same RV is a distinct entry.
  StreamEntry other = entry;
  other.user = "bob";
  EXPECT_EQ(MustAppend(other).position, StreamPosition(20, 1));
  auto counts = store_->ReadCounts();
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ(counts->diverted["duplicate_of_stream_top"], 1);
}

TEST_F(MaterializationStoreTest, InvalidEntriesAreRejected) {
  StreamEntry nameless = Change(ChangeOp::kAdded, "a", "1");
  nameless.name.clear();
  EXPECT_EQ(store_->Append(nameless).status().code(), absl::StatusCode::kInvalidArgument);
  StreamEntry bodiless = Change(ChangeOp::kModified, "a", "1");
  bodiless.object_json.clear();
  EXPECT_EQ(store_->Append(bodiless).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(MaterializationStoreTest, WaitAfterEndsOnTheWakeSignal) {
  MaterializationStore::WakeSignal signal;
  signal.key = "test:signal";
  ASSERT_TRUE(redis_->Command({"XADD", signal.key, "5-0", "uid", "u"}).ok());
  // A signal entry after last_id ends the wait at once, with no data.
  auto woke = store_->WaitAfter(StreamPosition::Zero(), 10, absl::Seconds(30), &signal);
  ASSERT_TRUE(woke.ok()) << woke.status();
  EXPECT_TRUE(signal.fired);
  EXPECT_TRUE(woke->entries.empty());
  // Data is still returned when both are there.
  signal.fired = false;
  MustAppend(Change(ChangeOp::kAdded, "a", "1"));
  auto both = store_->WaitAfter(StreamPosition::Zero(), 10, absl::Seconds(30), &signal);
  ASSERT_TRUE(both.ok());
  EXPECT_EQ(both->entries.size(), 1u);
  // Nothing new on either: the wait times out.
  signal.fired = false;
  signal.last_id = "5-0";
  auto idle = store_->WaitAfter(both->last_scanned, 10, absl::Milliseconds(1), &signal);
  ASSERT_TRUE(idle.ok());
  EXPECT_FALSE(signal.fired);
  EXPECT_TRUE(idle->entries.empty());
}

TEST_F(MaterializationStoreTest, ReadAfterIsExclusiveAndPages) {
  for (int rv = 1; rv <= 5; ++rv) MustAppend(Change(ChangeOp::kAdded, "o", std::to_string(rv)));
  MustAppend(Change(ChangeOp::kModified, "o", "5"));  // 5-1
  auto page = store_->ReadAfter(StreamPosition(2, 0), 2);
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->entries.size(), 2u);
  EXPECT_EQ(page->entries[0].position, StreamPosition(3, 0));
  EXPECT_EQ(page->last_scanned, StreamPosition(4, 0));
  auto rest = store_->ReadAfter(page->last_scanned, 10);
  ASSERT_TRUE(rest.ok());
  ASSERT_EQ(rest->entries.size(), 2u);
  EXPECT_EQ(rest->entries[1].position, StreamPosition(5, 1));
  // The end of RV 5 is after both 5-0 and 5-1.
  auto none = store_->ReadAfter(StreamPosition::EndOf(5), 10);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->entries.empty());
  EXPECT_EQ(none->last_scanned, StreamPosition::EndOf(5));
  EXPECT_EQ(store_->ReadAfter(StreamPosition::Zero(), 0).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(MaterializationStoreTest, MalformedEntriesAreSkippedAndCounted) {
  MustAppend(Change(ChangeOp::kAdded, "a", "1"));
  ASSERT_TRUE(redis_->Command({"XADD", store_->keys().stream, "2-0", "op", "EXPLODED"}).ok());
  MustAppend(Change(ChangeOp::kAdded, "b", "3"));
  auto batch = store_->ReadAfter(StreamPosition::Zero(), 10);
  ASSERT_TRUE(batch.ok()) << batch.status();
  EXPECT_EQ(batch->entries.size(), 2u);
  EXPECT_EQ(batch->malformed, 1u);
  EXPECT_EQ(batch->last_scanned, StreamPosition(3, 0));
}

TEST_F(MaterializationStoreTest, CheckpointSwapTrimsAndDivertsCoveredEntries) {
  // No checkpoint: a splice must fail closed.
  auto empty = store_->Load();
  ASSERT_TRUE(empty.ok());
  EXPECT_FALSE(empty->checkpoint.has_value());

  for (int rv = 1; rv <= 5; ++rv) {
    MustAppend(Change(ChangeOp::kAdded, "o" + std::to_string(rv), std::to_string(rv)));
  }
  ObjectMap items = {{"default/o1", "{\"rv\":\"1\"}"},
                     {"default/o2", "{\"rv\":\"2\"}"},
                     {"default/o3", "{\"rv\":\"3\"}"}};
  auto swap = store_->ReplaceCheckpoint(items, StreamPosition::EndOf(3));
  ASSERT_TRUE(swap.ok()) << swap.status();
  EXPECT_TRUE(swap->swapped);
  EXPECT_EQ(swap->trimmed, 3);

  auto view = store_->Load();
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_EQ(*view->checkpoint, StreamPosition::EndOf(3));
  EXPECT_EQ(view->checkpoint_items, items);
  ASSERT_EQ(view->tail.size(), 2u);
  EXPECT_EQ(view->tail[0].position, StreamPosition(4, 0));
  EXPECT_EQ(view->Fold().size(), 5u);
  EXPECT_EQ(view->CoverageHead(), StreamPosition(5, 0));

  // A reader that is behind the checkpoint is told to splice again.
  auto behind = store_->ReadAfter(StreamPosition(2, 0), 10);
  ASSERT_TRUE(behind.ok());
  EXPECT_TRUE(behind->behind_checkpoint);
  auto current = store_->ReadAfter(StreamPosition(4, 0), 10);
  ASSERT_TRUE(current.ok());
  EXPECT_FALSE(current->behind_checkpoint);
  EXPECT_EQ(current->entries.size(), 1u);

  // An older checkpoint never replaces a newer one.
  auto stale = store_->ReplaceCheckpoint({}, StreamPosition(2, 0));
  ASSERT_TRUE(stale.ok()) << stale.status();
  EXPECT_FALSE(stale->swapped);
  EXPECT_EQ(stale->position, StreamPosition::EndOf(3));
  auto after_stale = store_->Load();
  ASSERT_TRUE(after_stale.ok());
  EXPECT_EQ(after_stale->checkpoint_items, items);
  // The refused generation's staging hash is gone.
  auto staged = redis_->Command({"KEYS", "*:ckpt:items:next:*"});
  ASSERT_TRUE(staged.ok());
  EXPECT_TRUE(staged->elements().empty());
}

TEST_F(MaterializationStoreTest, ListCheckpointAboveStreamTopDivertsWhatItCovers) {
  MustAppend(Change(ChangeOp::kAdded, "a", "5"));
  auto swap = store_->ReplaceCheckpoint({{"default/a", "{}"}, {"default/b", "{}"}},
                                        StreamPosition::EndOf(100));
  ASSERT_TRUE(swap.ok());
  EXPECT_EQ(swap->trimmed, 1);
  // A late watch event at or below the LIST's RV is already in the checkpoint.
  EXPECT_EQ(MustAppend(Change(ChangeOp::kModified, "a", "90")).diverted,
            DivertReason::kCoveredByCheckpoint);
  EXPECT_EQ(MustAppend(Change(ChangeOp::kModified, "a", "100")).diverted,
            DivertReason::kCoveredByCheckpoint);
  EXPECT_EQ(MustAppend(Change(ChangeOp::kModified, "a", "101")).position, StreamPosition(101, 0));
  // Attached RV-less entries land after the top, which is above the checkpoint now.
  EXPECT_EQ(MustAppend(Change(ChangeOp::kDeleted, "b", "")).position, StreamPosition(101, 1));
  auto view = store_->Load();
  ASSERT_TRUE(view.ok());
  ObjectMap folded = view->Fold();
  EXPECT_EQ(folded.size(), 1u);
  EXPECT_EQ(folded.at("default/a"), "{\"rv\":\"101\"}");
}

TEST_F(MaterializationStoreTest, SameRvEntriesAroundACompactionPosition) {
  MustAppend(Change(ChangeOp::kAdded, "a", "7"));  // 7-0
  MustAppend(Change(ChangeOp::kAdded, "b", "7"));  // 7-1
  ASSERT_TRUE(store_->ReplaceCheckpoint({}, StreamPosition(6, 0)).ok());
  auto compacted = store_->Compact(StreamPosition(7, 0));
  ASSERT_TRUE(compacted.ok()) << compacted.status();
  EXPECT_TRUE(compacted->compacted);
  EXPECT_EQ(compacted->position, StreamPosition(7, 0));
  EXPECT_EQ(compacted->folded, 1u);
  EXPECT_EQ(compacted->trimmed, 1);
  // 7-1 survives the trim and is still part of the view; the next same-RV entry is 7-2.
  auto view = store_->Load();
  ASSERT_TRUE(view.ok());
  ASSERT_EQ(view->tail.size(), 1u);
  EXPECT_EQ(view->tail[0].position, StreamPosition(7, 1));
  EXPECT_EQ(MustAppend(Change(ChangeOp::kModified, "a", "7")).position, StreamPosition(7, 2));
}

TEST_F(MaterializationStoreTest, CompactionFoldsLastWriterWinsAndDropsDeletes) {
  EXPECT_EQ(store_->Compact().status().code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(store_
                  ->ReplaceCheckpoint({{"default/keep", "k"}, {"default/gone", "g"}},
                                      StreamPosition::EndOf(1))
                  .ok());
  MustAppend(Change(ChangeOp::kModified, "keep", "2", "k2"));
  MustAppend(Change(ChangeOp::kDeleted, "gone", "3"));
  MustAppend(Change(ChangeOp::kAdded, "new", "4", "n4"));
  MustAppend(Change(ChangeOp::kModified, "keep", "5", "k5"));
  auto result = store_->Compact(StreamPosition(4, 0));
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_TRUE(result->compacted);
  EXPECT_EQ(result->folded, 3u);
  EXPECT_EQ(result->position, StreamPosition(4, 0));
  auto view = store_->Load();
  ASSERT_TRUE(view.ok());
  EXPECT_EQ(view->checkpoint_items, (ObjectMap{{"default/keep", "k2"}, {"default/new", "n4"}}));
  ASSERT_EQ(view->tail.size(), 1u);
  EXPECT_EQ(view->Fold(), (ObjectMap{{"default/keep", "k5"}, {"default/new", "n4"}}));
  // Nothing left below the bound: a no-op.
  auto again = store_->Compact(StreamPosition(4, 0));
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->compacted);
  // Everything: the checkpoint holds the full state and the stream is empty.
  auto all = store_->Compact();
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->position, StreamPosition(5, 0));
  auto final_view = store_->Load();
  ASSERT_TRUE(final_view.ok());
  EXPECT_TRUE(final_view->tail.empty());
  EXPECT_EQ(final_view->CoverageHead(), StreamPosition(5, 0));
  EXPECT_EQ(final_view->checkpoint_items.at("default/keep"), "k5");
}

TEST_F(MaterializationStoreTest, CompactionNeverOverwritesACheckpointThatReplacedItsBase) {
  ASSERT_TRUE(store_->ReplaceCheckpoint({{"default/a", "a1"}}, StreamPosition::EndOf(1)).ok());
  MustAppend(Change(ChangeOp::kModified, "a", "2", "a2"));
  MustAppend(Change(ChangeOp::kModified, "a", "5", "a5"));
  auto view = store_->Load();
  ASSERT_TRUE(view.ok());
  // Meanwhile a LIST at RV 3 heals a gap the stream never saw (object b).
  ASSERT_TRUE(
      store_
          ->ReplaceCheckpoint({{"default/a", "a2"}, {"default/b", "b3"}}, StreamPosition::EndOf(3))
          .ok());
  // The fold of the old base (through 5-0) would drop b: it must not be installed.
  auto result = store_->CompactView(*view);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_FALSE(result->compacted);
  EXPECT_EQ(result->position, StreamPosition::EndOf(3));
  auto after = store_->Load();
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->Fold(), (ObjectMap{{"default/a", "a5"}, {"default/b", "b3"}}));
  // Compacting the current view works.
  auto fresh = store_->Compact();
  ASSERT_TRUE(fresh.ok());
  EXPECT_TRUE(fresh->compacted);
  EXPECT_EQ(fresh->position, StreamPosition(5, 0));
}

TEST_F(MaterializationStoreTest, LargeCheckpointIsStagedInBatches) {
  ObjectMap items;
  std::string body(3000, 'x');
  for (int i = 0; i < 5000; ++i) items["ns/obj-" + std::to_string(i)] = body;
  auto swap = store_->ReplaceCheckpoint(items, StreamPosition::EndOf(9));
  ASSERT_TRUE(swap.ok()) << swap.status();
  auto view = store_->Load();
  ASSERT_TRUE(view.ok());
  EXPECT_EQ(view->checkpoint_items.size(), 5000u);
  auto ttl = redis_->Command({"TTL", store_->keys().checkpoint_items});
  ASSERT_TRUE(ttl.ok());
  EXPECT_EQ(ttl->integer(), -1);  // the live checkpoint never expires
}

TEST_F(MaterializationStoreTest, WaitAfterWakesOnAnAppendFromAnotherConnection) {
  MustAppend(Change(ChangeOp::kAdded, "a", "1"));
  auto idle = store_->WaitAfter(StreamPosition(1, 0), 10, absl::Milliseconds(20));
  ASSERT_TRUE(idle.ok()) << idle.status();
  EXPECT_TRUE(idle->entries.empty());

  std::unique_ptr<RedisConnection> writer_connection = Connect();
  std::thread writer([&] {
    MaterializationStore writer_store(writer_connection.get(), KeyPrefix::Default(), kConfigMaps,
                                      core::WatchScope::Cluster());
    auto appended = writer_store.Append(Change(ChangeOp::kModified, "a", "2"));
    EXPECT_TRUE(appended.ok() && appended->appended);
  });
  // Whether the append lands before or during the wait, the reader gets it.
  auto woke = store_->WaitAfter(StreamPosition(1, 0), 10, absl::Seconds(30));
  writer.join();
  ASSERT_TRUE(woke.ok()) << woke.status();
  ASSERT_EQ(woke->entries.size(), 1u);
  EXPECT_EQ(woke->entries[0].position, StreamPosition(2, 0));
}

TEST_F(MaterializationStoreTest, OneWaitServesManyStreams) {
  MaterializationStore secrets(redis_.get(), KeyPrefix::Default(), {"", "v1", "secrets"},
                               core::WatchScope::Namespace("team-a"));
  MustAppend(Change(ChangeOp::kAdded, "a", "1"));
  std::vector<std::pair<std::string, StreamPosition>> tails = {
      {store_->keys().stream, StreamPosition(1, 0)},
      {secrets.keys().stream, StreamPosition::Zero()}};
  auto idle = WaitForAnyStream(*redis_, tails, absl::Milliseconds(20));
  ASSERT_TRUE(idle.ok()) << idle.status();
  EXPECT_TRUE(idle->empty());

  std::unique_ptr<RedisConnection> writer_connection = Connect();
  std::thread writer([&] {
    MaterializationStore writer_store(writer_connection.get(), KeyPrefix::Default(),
                                      {"", "v1", "secrets"}, core::WatchScope::Namespace("team-a"));
    auto appended = writer_store.Append(Change(ChangeOp::kAdded, "s", "7"));
    EXPECT_TRUE(appended.ok() && appended->appended);
  });
  auto ready = WaitForAnyStream(*redis_, tails, absl::Seconds(30));
  writer.join();
  ASSERT_TRUE(ready.ok()) << ready.status();
  EXPECT_EQ(*ready, std::vector<std::string>{secrets.keys().stream});
  EXPECT_FALSE(WaitForAnyStream(*redis_, {}, absl::Milliseconds(1)).ok());
}

TEST_F(MaterializationStoreTest, StateIndexAndRelease) {
  MaterializationState state;
  state.phase = "synced";
  state.gvr = kConfigMaps;
  state.scope = core::WatchScope::Cluster();
  state.object_count = 3;
  state.checkpoint = "9-0";
  state.updated_at = absl::FromUnixMillis(1'700'000'000'123);
  state.reason = "WatchNotPermitted";
  state.message = "forbidden";
  ASSERT_TRUE(store_->WriteState(state).ok());
  auto read = store_->ReadState();
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_TRUE(read->has_value());
  EXPECT_EQ((*read)->gvr, kConfigMaps);
  EXPECT_EQ((*read)->updated_at, state.updated_at);
  EXPECT_EQ((*read)->object_count, 3);
  EXPECT_EQ((*read)->reason, "WatchNotPermitted");
  EXPECT_EQ((*read)->message, "forbidden");

  MaterializationStore deployments(redis_.get(), KeyPrefix::Default(),
                                   {"apps", "v1", "deployments"},
                                   core::WatchScope::Namespace("team-a"));
  ASSERT_TRUE(deployments.ReplaceCheckpoint({}, StreamPosition::EndOf(1)).ok());
  ASSERT_TRUE(redis_->Command({"SADD", "reverser:mat:v1:index", "garbage"}).ok());
  auto listed = ListMaterializations(*redis_, KeyPrefix::Default());
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->size(), 2u);
  EXPECT_EQ((*listed)[0].member.group_resource, "apps/deployments");
  EXPECT_EQ((*listed)[0].member.scope, core::WatchScope::Namespace("team-a"));
  EXPECT_FALSE((*listed)[0].state.has_value());
  EXPECT_EQ((*listed)[1].member.group_resource, "configmaps");
  ASSERT_TRUE((*listed)[1].state.has_value());
  EXPECT_EQ((*listed)[1].state->phase, "synced");

  // A malformed state is an error for the reader, not a crash.
  ASSERT_TRUE(redis_->Command({"SET", store_->keys().state, "{not json"}).ok());
  EXPECT_EQ(store_->ReadState().status().code(), absl::StatusCode::kInvalidArgument);

  MustAppend(Change(ChangeOp::kAdded, "a", "1"));
  ASSERT_TRUE(store_->Release().ok());
  auto keys = redis_->Command({"KEYS", "reverser:mat:v1:{configmaps:*"});
  ASSERT_TRUE(keys.ok());
  EXPECT_TRUE(keys->elements().empty()) << keys->DebugString();
  auto after = ListMaterializations(*redis_, KeyPrefix::Default());
  ASSERT_TRUE(after.ok());
  ASSERT_EQ(after->size(), 1u);
  EXPECT_EQ((*after)[0].member.group_resource, "apps/deployments");
}

}  // namespace
}  // namespace reverser::redisstore

namespace reverser::redisstore {
namespace {

// Every value of every key under the prefix, as Redis holds it (strings, hashes, streams).
std::string EverythingStored(testing::RedisServer& server) {
  std::string all;
  auto keys = server.Cli({"--scan", "--pattern", "reverser:*"});
  if (!keys.ok()) return "<scan failed>";
  for (absl::string_view key : absl::StrSplit(*keys, '\n', absl::SkipEmpty())) {
    const std::string k(key);
    auto type = server.Cli({"TYPE", k});
    const std::string t = type.ok() ? std::string(absl::StripAsciiWhitespace(*type)) : "";
    absl::StatusOr<std::string> value =
        t == "hash"     ? server.Cli({"HGETALL", k})
        : t == "stream" ? server.Cli({"XRANGE", k, "-", "+"})
        : t == "string" ? server.Cli({"GET", k})
                        : absl::StatusOr<std::string>(t);
    absl::StrAppend(&all, k, "\n", value.value_or("<unreadable>"), "\n");
  }
  return all;
}

TEST(SealedBodiesTest, ASensitiveMaterializationHoldsNoPlaintextAndReadsBackWhole) {
  auto server = testing::RedisServer::Start();
  ASSERT_TRUE(server.ok()) << server.status();
  auto conn = ConnectTo(**server);
  ASSERT_TRUE(conn.ok());
  auto cipher = BodyCipher::FromKeys({{"k1", std::string(32, 'k')}});
  ASSERT_TRUE(cipher.ok());
  const core::GroupVersionResource secrets{"", "v1", "secrets"};
  MaterializationStore store(conn->get(), KeyPrefix::Default(), secrets,
                             core::WatchScope::Namespace("team"));
  store.UseBodyCipher(cipher->get(), /*seal=*/true);
  auto body = [](const std::string& name, const std::string& rv) {
    return absl::StrCat(R"({"kind":"Secret","metadata":{"name":")", name,
                        R"(","resourceVersion":")", rv, R"("},"data":{"k":"TUFSS0VSLXNlY3JldA=="}})");
  };
  ASSERT_TRUE(store.ReplaceCheckpoint({{"team/a", body("a", "5")}}, StreamPosition::EndOf(5)).ok());
  StreamEntry change;
  change.op = ChangeOp::kModified;
  change.uid = "uid-b";
  change.namespace_ = "team";
  change.name = "b";
  change.resource_version = "6";
  change.object_json = body("b", "6");
  auto appended = store.Append(change);
  ASSERT_TRUE(appended.ok() && appended->appended) << appended.status();
  // A retried append (its reply lost) is still recognised as the duplicate it is.
  auto again = store.Append(change);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->diverted, DivertReason::kDuplicateOfStreamTop);

  const std::string stored = EverythingStored(**server);
  EXPECT_FALSE(absl::StrContains(stored, "TUFSS0VSLXNlY3JldA")) << stored;
  EXPECT_FALSE(absl::StrContains(stored, "\"kind\":\"Secret\"")) << stored;
  EXPECT_TRUE(absl::StrContains(stored, "rvenc1:k1:")) << stored;

  auto view = store.Load();
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_EQ(view->Fold(), (ObjectMap{{"team/a", body("a", "5")}, {"team/b", body("b", "6")}}));
  auto tail = store.ReadAfter(StreamPosition::EndOf(5), 10);
  ASSERT_TRUE(tail.ok()) << tail.status();
  ASSERT_EQ(tail->entries.size(), 1u);
  EXPECT_EQ(tail->entries[0].object_json, body("b", "6"));

  // A compaction keeps them sealed.
  auto compacted = store.Compact();
  ASSERT_TRUE(compacted.ok() && compacted->compacted) << compacted.status();
  EXPECT_FALSE(absl::StrContains(EverythingStored(**server), "TUFSS0VSLXNlY3JldA"));
  EXPECT_EQ(store.Load()->Fold().size(), 2u);

  // A reader without the key fails clearly instead of seeing objects vanish; a writer without
  // it writes nothing.
  MaterializationStore keyless(conn->get(), KeyPrefix::Default(), secrets,
                               core::WatchScope::Namespace("team"));
  EXPECT_EQ(keyless.Load().status().code(), absl::StatusCode::kFailedPrecondition);
  keyless.UseBodyCipher(nullptr, /*seal=*/true);
  change.resource_version = "7";
  EXPECT_EQ(keyless.Append(change).status().code(), absl::StatusCode::kFailedPrecondition);
  auto other_key = BodyCipher::FromKeys({{"k2", std::string(32, 'z')}});
  keyless.UseBodyCipher(other_key->get(), /*seal=*/false);
  absl::Status wrong = keyless.Load().status();
  EXPECT_EQ(wrong.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(wrong.message(), "\"k1\"")) << wrong;
}

}  // namespace
}  // namespace reverser::redisstore
