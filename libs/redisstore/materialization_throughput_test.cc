// Prints how fast the store's hot paths run against a real redis-server on this machine
// (appends one at a time and batched, checkpoint swap, splice load). Reports numbers; asserts only
// correctness.

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "libs/redisstore/materialization_store.h"
#include "tests/fixtures/redis_server.h"
#include "libs/redisstore/test_redis.h"

namespace reverser::redisstore {
namespace {

// Microseconds Redis spent running the commands an append sends at top level since the last
// CONFIG RESETSTAT (INFO commandstats). EXEC's and EVALSHA's times include the commands they
// run, so those (XADD, HINCRBY, HSET) are not added again. Socket reads and command parsing are
// not in these figures; RedisCpuSeconds has them.
double AppendMicroseconds(RedisConnection& redis) {
  auto info = redis.Command({"INFO", "commandstats"});
  if (!info.ok()) return 0;
  double total = 0;
  for (absl::string_view command : {"watch", "exists", "hget", "get", "xrevrange", "xinfo",
                                    "unwatch", "multi", "exec", "evalsha", "eval"}) {
    absl::string_view text = info->str();
    size_t at = text.find(absl::StrCat("cmdstat_", command, ":"));
    if (at == absl::string_view::npos) continue;
    at = text.find("usec=", at);
    if (at == absl::string_view::npos) continue;
    text.remove_prefix(at + 5);
    double usec = 0;
    if (absl::SimpleAtod(text.substr(0, text.find(',')), &usec)) total += usec;
  }
  return total;
}

// The Redis server's CPU time so far (user + system, INFO cpu): all of its work, I/O included.
double RedisCpuSeconds(RedisConnection& redis) {
  auto info = redis.Command({"INFO", "cpu"});
  if (!info.ok()) return 0;
  double total = 0;
  for (absl::string_view field : {"used_cpu_sys:", "used_cpu_user:"}) {
    absl::string_view text = info->str();
    size_t at = text.find(field);
    if (at == absl::string_view::npos) continue;
    text.remove_prefix(at + field.size());
    double seconds = 0;
    if (absl::SimpleAtod(text.substr(0, text.find('\r')), &seconds)) total += seconds;
  }
  return total;
}

TEST(MaterializationThroughputTest, ReportsAppendSwapAndLoadRates) {
  auto server = testing::RedisServer::Start();
  ASSERT_TRUE(server.ok()) << server.status();
  auto redis = ConnectTo(**server);
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
  ASSERT_TRUE((*redis)->Command({"CONFIG", "RESETSTAT"}).ok());
  start = absl::Now();
  // The i-th update of kObjects objects, as the materializer would append it.
  auto update = [&](int i) {
    StreamEntry entry;
    entry.op = ChangeOp::kModified;
    entry.namespace_ = "ns";
    entry.name = "cm-" + std::to_string(i % kObjects);
    entry.uid = "uid-" + entry.name;
    entry.resource_version = std::to_string(2 + i);
    entry.object_json = body;
    return entry;
  };
  for (int i = 0; i < kAppends; ++i) {
    auto appended = store.Append(update(i));
    ASSERT_TRUE(appended.ok() && appended->appended);
  }
  absl::Duration append_time = absl::Now() - start;
  const double append_usec = AppendMicroseconds(**redis);
  ASSERT_TRUE((*redis)->Command({"CONFIG", "RESETSTAT"}).ok());

  // The same, through AppendAll in batches of 100 (the materializer's way), on another stream.
  MaterializationStore batched(redis->get(), KeyPrefix::Default(), {"", "v1", "configmaps"},
                               core::WatchScope::Namespace("batched"));
  std::vector<StreamEntry> entries;
  for (int i = 0; i < kAppends; ++i) entries.push_back(update(i));
  const double cpu_before = RedisCpuSeconds(**redis);
  start = absl::Now();
  for (size_t first = 0; first < entries.size(); first += 100) {
    std::vector<StreamEntry> batch(entries.begin() + first, entries.begin() + first + 100);
    auto appended = batched.AppendAll(batch);
    ASSERT_TRUE(appended.ok()) << appended.status();
    ASSERT_TRUE(appended->back().appended);
  }
  absl::Duration append_all_time = absl::Now() - start;
  const double append_all_usec = AppendMicroseconds(**redis);
  const double append_all_cpu = RedisCpuSeconds(**redis) - cpu_before;

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

  std::printf("appends: %d in %s (%.0f/s, 1 KiB bodies; Redis commands %.2f us per entry)\n",
              kAppends, absl::FormatDuration(append_time).c_str(),
              kAppends / absl::ToDoubleSeconds(append_time), append_usec / kAppends);
  std::printf(
      "AppendAll: %d in %s (%.0f/s, batches of 100; Redis commands %.2f us per entry, Redis CPU "
      "%.2f us per entry)\n",
      kAppends, absl::FormatDuration(append_all_time).c_str(),
      kAppends / absl::ToDoubleSeconds(append_all_time), append_all_usec / kAppends,
      append_all_cpu * 1e6 / kAppends);
  std::printf("checkpoint swap: %d objects in %s\n", kObjects,
              absl::FormatDuration(swap_time).c_str());
  std::printf("load (checkpoint + %d tail entries): %s\n", kAppends,
              absl::FormatDuration(load_time).c_str());
  std::printf("compaction of %d entries onto %d objects: %s\n", kAppends, kObjects,
              absl::FormatDuration(compact_time).c_str());
}

}  // namespace
}  // namespace reverser::redisstore
