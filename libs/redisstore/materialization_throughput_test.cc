// Prints how fast the store's hot paths run against a real redis-server on this machine
// (appends one at a time and batched, checkpoint swap, splice load). Reports numbers; asserts only
// correctness.

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "libs/redisstore/materialization_store.h"
#include "tests/fixtures/redis_server.h"

namespace reverser::redisstore {
namespace {

// Microseconds Redis spent in EVALSHA since the last CONFIG RESETSTAT (INFO commandstats).
double ScriptMicroseconds(RedisConnection& redis) {
  auto info = redis.Command({"INFO", "commandstats"});
  if (!info.ok()) return 0;
  absl::string_view text = info->str();
  size_t at = text.find("cmdstat_evalsha:");
  if (at == absl::string_view::npos) return 0;
  at = text.find("usec=", at);
  if (at == absl::string_view::npos) return 0;
  text.remove_prefix(at + 5);
  double usec = 0;
  return absl::SimpleAtod(text.substr(0, text.find(',')), &usec) ? usec : 0;
}

TEST(MaterializationThroughputTest, ReportsAppendSwapAndLoadRates) {
  auto server = testing::RedisServer::Start();
  ASSERT_TRUE(server.ok()) << server.status();
  RedisOptions options;
  options.host = (*server)->host();
  options.port = (*server)->port();
  auto redis = RedisConnection::Connect(options);
  ASSERT_TRUE(redis.ok()) << redis.status();
  MaterializationStore store(redis->get(), KeyPrefix::Default(), {"", "v1", "configmaps"},
                             core::WatchScope::Cluster());

  constexpr int kObjects = 20000;
  const std::string body = "{\"data\":\"" + std::string(1000, 'x') + "\"}";
  ObjectMap items;
  for (int i = 0; i < kObjects; ++i) items["ns/cm-" + std::to_string(i)] = body;
  absl::Time start = absl::Now();
  auto swap = store.ReplaceCheckpoint(items, core::StreamPosition::EndOf(1));
  absl::Duration swap_time = absl::Now() - start;
  ASSERT_TRUE(swap.ok()) << swap.status();

  constexpr int kAppends = 5000;
  start = absl::Now();
  for (int i = 0; i < kAppends; ++i) {
    StreamEntry entry;
    entry.op = ChangeOp::kModified;
    entry.namespace_ = "ns";
    entry.name = "cm-" + std::to_string(i % kObjects);
    entry.uid = "uid-" + entry.name;
    entry.resource_version = std::to_string(2 + i);
    entry.object_json = body;
    auto appended = store.Append(entry);
    ASSERT_TRUE(appended.ok() && appended->appended);
  }
  absl::Duration append_time = absl::Now() - start;
  ASSERT_TRUE((*redis)->Command({"CONFIG", "RESETSTAT"}).ok());

  // The same, through AppendAll in batches of 100 (the materializer's way), on another stream.
  MaterializationStore batched(redis->get(), KeyPrefix::Default(), {"", "v1", "configmaps"},
                               core::WatchScope::Namespace("batched"));
  std::vector<StreamEntry> entries;
  for (int i = 0; i < kAppends; ++i) {
    StreamEntry entry;
    entry.op = ChangeOp::kModified;
    entry.namespace_ = "ns";
    entry.name = "cm-" + std::to_string(i % kObjects);
    entry.uid = "uid-" + entry.name;
    entry.resource_version = std::to_string(2 + i);
    entry.object_json = body;
    entries.push_back(std::move(entry));
  }
  start = absl::Now();
  for (size_t first = 0; first < entries.size(); first += 100) {
    std::vector<StreamEntry> batch(entries.begin() + first, entries.begin() + first + 100);
    auto appended = batched.AppendAll(batch);
    ASSERT_TRUE(appended.ok()) << appended.status();
    ASSERT_TRUE(appended->back().appended);
  }
  absl::Duration append_all_time = absl::Now() - start;
  const double script_usec = ScriptMicroseconds(**redis);

  start = absl::Now();
  auto view = store.Load();
  absl::Duration load_time = absl::Now() - start;
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_EQ(view->Fold().size(), static_cast<size_t>(kObjects));
  EXPECT_EQ(view->tail.size(), static_cast<size_t>(kAppends));

  start = absl::Now();
  auto compacted = store.Compact();
  absl::Duration compact_time = absl::Now() - start;
  ASSERT_TRUE(compacted.ok()) << compacted.status();
  EXPECT_TRUE(compacted->compacted);

  std::printf("appends: %d in %s (%.0f/s, 1 KiB bodies, one round trip each)\n", kAppends,
              absl::FormatDuration(append_time).c_str(),
              kAppends / absl::ToDoubleSeconds(append_time));
  std::printf("AppendAll: %d in %s (%.0f/s, batches of 100; Redis spent %.2f us per entry)\n",
              kAppends, absl::FormatDuration(append_all_time).c_str(),
              kAppends / absl::ToDoubleSeconds(append_all_time), script_usec / kAppends);
  std::printf("checkpoint swap: %d objects in %s\n", kObjects,
              absl::FormatDuration(swap_time).c_str());
  std::printf("load (checkpoint + %d tail entries): %s\n", kAppends,
              absl::FormatDuration(load_time).c_str());
  std::printf("compaction of %d entries onto %d objects: %s\n", kAppends, kObjects,
              absl::FormatDuration(compact_time).c_str());
}

}  // namespace
}  // namespace reverser::redisstore
