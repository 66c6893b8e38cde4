// Model-based test: random appends (new, same-RV, older, RV-less, non-numeric; alone or in
// AppendAll batches, some with a LIST swap landing between the append's read and its commit),
// compactions, LIST-style checkpoint swaps and stale swaps against a real redis-server, checked
// after every step against an in-memory model of the object set and of where each append must land.
// A lagging tail reader (ReadAfter, re-splicing when it falls behind the checkpoint) must converge
// to the same object set.

#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "libs/redisstore/materialization_store.h"
#include "tests/fixtures/redis_server.h"
#include "libs/redisstore/test_redis.h"

namespace reverser::redisstore {
namespace {

using core::StreamPosition;

struct Model {
  ObjectMap objects;   // what checkpoint + tail must fold to
  StreamPosition top;  // last generated stream ID (zero: none)
  std::optional<StreamPosition> checkpoint;
  int64_t appended = 0;
  std::vector<std::string> top_fields;  // the encoded top entry

  // Where an append lands, mirroring the store's rule; nullopt = diverted.
  std::optional<StreamPosition> Place(std::optional<uint64_t> rv, const StreamEntry& entry) const {
    if (!rv) {
      if (top.IsZero()) return std::nullopt;
      rv = top.rv();
    }
    if (*rv < top.rv()) return std::nullopt;
    StreamPosition candidate =
        *rv > top.rv() ? StreamPosition(*rv, 0) : StreamPosition(*rv, top.seq() + 1);
    if (checkpoint && candidate <= *checkpoint) return std::nullopt;
    // A byte-identical repeat of the (untrimmed) top entry is absorbed.
    bool top_in_stream = !checkpoint || top > *checkpoint;
    if (*rv == top.rv() && top_in_stream && EncodeEntryFields(entry) == top_fields) {
      return std::nullopt;
    }
    return candidate;
  }
};

// A splicer-like follower: splice once, then tail; splice again when behind the checkpoint.
struct Follower {
  ObjectMap objects;
  StreamPosition position;
  int resplices = 0;

  void CatchUp(MaterializationStore& store) {
    for (;;) {
      auto batch = store.ReadAfter(position, 7);
      ASSERT_TRUE(batch.ok()) << batch.status();
      if (batch->behind_checkpoint) {
        auto view = store.Load();
        ASSERT_TRUE(view.ok()) << view.status();
        ASSERT_TRUE(view->checkpoint.has_value());
        objects = view->Fold();
        position = view->CoverageHead();
        ++resplices;
        continue;
      }
      if (batch->entries.empty()) return;
      for (const StreamEntry& entry : batch->entries) ApplyEntry(entry, objects);
      position = batch->last_scanned;
    }
  }
};

class MaterializationModelTest : public ::testing::TestWithParam<uint32_t> {};

TEST_P(MaterializationModelTest, CheckpointPlusTailAlwaysEqualsTheModel) {
  auto server = testing::RedisServer::Start();
  ASSERT_TRUE(server.ok()) << server.status();
  RedisOptions options = RedisOptionsFor(**server);
  auto redis = RedisConnection::Connect(options);
  ASSERT_TRUE(redis.ok()) << redis.status();
  MaterializationStore store(redis->get(), KeyPrefix::Default(), {"apps", "v1", "deployments"},
                             core::WatchScope::Namespace("team-a"));
  // Another writer of the same keys (a LIST landing while an append is in flight).
  auto other_redis = RedisConnection::Connect(options);
  ASSERT_TRUE(other_redis.ok()) << other_redis.status();
  MaterializationStore other(other_redis->get(), KeyPrefix::Default(),
                             {"apps", "v1", "deployments"}, core::WatchScope::Namespace("team-a"));

  std::mt19937 rng(GetParam());
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  Model model;
  Follower follower;

  // Start like a materializer: an empty LIST at some RV.
  uint64_t list_rv = uniform(1, 20);
  auto first = store.ReplaceCheckpoint({}, StreamPosition::EndOf(list_rv));
  ASSERT_TRUE(first.ok()) << first.status();
  model.checkpoint = StreamPosition::EndOf(list_rv);
  uint64_t rv_clock = list_rv;  // the "API server" RV, ahead of or at the stream top

  constexpr int kSteps = 400;
  std::optional<StreamEntry> last_appended;
  int compactions = 0, swaps = 0, stale_swaps = 0, diverts = 0, duplicates = 0, batches = 0,
      raced = 0;
  for (int step = 0; step < kSteps; ++step) {
    int dice = uniform(0, 99);
    if (dice < 72) {
      // One append (Append), or a run of them in one AppendAll: each entry must land exactly
      // where it would alone, after the ones before it in the batch.
      const int batch_size = uniform(0, 2) == 0 ? uniform(2, 12) : 1;
      // Sometimes a LIST swap lands between the append's read and its commit: the append must
      // come out as if the swap had come first (EXEC aborts, the chunk is decided again).
      std::optional<StreamPosition> racing_list;
      ObjectMap racing_items;
      if (uniform(0, 5) == 0) {
        rv_clock += uniform(0, 2);
        racing_list = StreamPosition::EndOf(std::max(rv_clock, model.top.rv()));
        racing_items = model.objects;
        if (*racing_list >= *model.checkpoint) {
          model.checkpoint = *racing_list;
          ++swaps;
        }
      }
      int decisions = 0;
      store.SetBeforeAppendCommitForTesting([&] {
        if (++decisions > 1 || !racing_list) return;
        auto result = other.ReplaceCheckpoint(racing_items, *racing_list);
        ASSERT_TRUE(result.ok()) << result.status();
        ASSERT_EQ(result->swapped, model.checkpoint == *racing_list);
      });
      std::vector<StreamEntry> batch;
      std::vector<std::optional<StreamPosition>> expected;
      for (int b = 0; b < batch_size; ++b) {
        StreamEntry entry;
        entry.name = "obj-" + std::to_string(uniform(0, 7));
        entry.namespace_ = "team-a";
        entry.uid = "uid-" + entry.name;
        entry.op = uniform(0, 4) == 0 ? ChangeOp::kDeleted : ChangeOp::kModified;
        if (entry.op != ChangeOp::kDeleted)
          entry.object_json = "{\"step\":" + std::to_string(step) + "." + std::to_string(b) + "}";
        std::optional<uint64_t> rv;
        int kind = uniform(0, 99);
        if (kind < 65) {
          rv_clock += uniform(1, 3);
          rv = rv_clock;
        } else if (kind < 78) {
          rv = std::max<uint64_t>(model.top.rv(), 1);  // same RV as the top
        } else if (kind < 88) {
          rv = model.top.rv() > 3 ? model.top.rv() - uniform(1, 3) : 1;  // late
        } else if (kind < 95) {
          rv = std::nullopt;  // RV-less: attach to the top
        } else {
          entry.resource_version = "v" + std::to_string(step);  // non-numeric
        }
        if (rv) entry.resource_version = std::to_string(*rv);
        if (last_appended && uniform(0, 19) == 0) entry = *last_appended;  // a retried append
        if (!entry.resource_version.empty()) {
          auto parsed = core::ParseResourceVersion(entry.resource_version);
          rv = parsed.ok() ? std::optional<uint64_t>(*parsed) : std::nullopt;
        } else {
          rv = std::nullopt;
        }
        std::optional<StreamPosition> placed =
            entry.resource_version.empty() || rv ? model.Place(rv, entry) : std::nullopt;
        if (placed) {
          model.top = *placed;
          model.top_fields = EncodeEntryFields(entry);
          last_appended = entry;
          rv_clock = std::max(rv_clock, placed->rv());
          ApplyEntry(entry, model.objects);
          ++model.appended;
        }
        batch.push_back(std::move(entry));
        expected.push_back(placed);
      }
      std::vector<AppendResult> results;
      if (batch_size == 1) {
        auto result = store.Append(batch[0]);
        ASSERT_TRUE(result.ok()) << result.status();
        results.push_back(*result);
      } else {
        auto result = store.AppendAll(batch);
        ASSERT_TRUE(result.ok()) << result.status();
        results = std::move(*result);
        ++batches;
      }
      store.SetBeforeAppendCommitForTesting(nullptr);
      bool reads_the_stream = false;  // a batch of only non-numeric RVs needs no read
      for (const StreamEntry& entry : batch) {
        reads_the_stream = reads_the_stream || entry.resource_version.empty() ||
                           core::ParseResourceVersion(entry.resource_version).ok();
      }
      if (racing_list && model.checkpoint == *racing_list && reads_the_stream) {
        ASSERT_EQ(decisions, 2) << "step " << step;  // aborted once, then decided again
        ++raced;
      }
      ASSERT_EQ(results.size(), batch.size());
      for (size_t b = 0; b < batch.size(); ++b) {
        ASSERT_EQ(results[b].appended, expected[b].has_value()) << "step " << step << "." << b;
        if (expected[b]) {
          ASSERT_EQ(results[b].position, *expected[b]) << "step " << step << "." << b;
        } else {
          ASSERT_TRUE(results[b].diverted.has_value());
          ++diverts;
          if (results[b].diverted == DivertReason::kDuplicateOfStreamTop) ++duplicates;
        }
      }
    } else if (dice < 84) {
      // Compact up to a random point at or after the checkpoint.
      StreamPosition through = model.top;
      if (uniform(0, 1) == 0 && model.top.rv() > model.checkpoint->rv()) {
        through = StreamPosition::EndOf(uniform(model.checkpoint->rv(), model.top.rv()));
      }
      auto view = store.Load();
      ASSERT_TRUE(view.ok());
      std::optional<StreamPosition> last;
      for (const StreamEntry& e : view->tail) {
        if (e.position <= through) last = e.position;
      }
      auto result = store.Compact(through);
      ASSERT_TRUE(result.ok()) << result.status();
      ASSERT_EQ(result->compacted, last.has_value()) << "step " << step;
      if (last) {
        ASSERT_EQ(result->position, *last);
        model.checkpoint = *last;
        ++compactions;
      }
    } else if (dice < 96) {
      // A fresh LIST: the current object set at an RV at or beyond the stream top.
      rv_clock += uniform(0, 2);
      StreamPosition position = StreamPosition::EndOf(std::max(rv_clock, model.top.rv()));
      auto result = store.ReplaceCheckpoint(model.objects, position);
      ASSERT_TRUE(result.ok()) << result.status();
      ASSERT_EQ(result->swapped, position >= *model.checkpoint);
      if (result->swapped) {
        model.checkpoint = position;
        ++swaps;
      }
    } else if (model.checkpoint->rv() > 1) {
      // A stale writer offers an older generation with wrong contents: refused.
      auto result = store.ReplaceCheckpoint({{"team-a/bogus", "{}"}},
                                            StreamPosition(model.checkpoint->rv() - 1, 0));
      ASSERT_TRUE(result.ok()) << result.status();
      ASSERT_FALSE(result->swapped);
      ++stale_swaps;
    }

    auto view = store.Load();
    ASSERT_TRUE(view.ok()) << view.status();
    ASSERT_EQ(view->checkpoint, model.checkpoint) << "step " << step;
    ASSERT_EQ(view->malformed, 0u);
    ASSERT_EQ(view->Fold(), model.objects) << "step " << step;
    StreamPosition expected_head = model.top > *model.checkpoint ? model.top : *model.checkpoint;
    ASSERT_EQ(view->CoverageHead(), expected_head) << "step " << step;
    for (const StreamEntry& e : view->tail) ASSERT_GT(e.position, *model.checkpoint);

    if (uniform(0, 9) == 0) {
      follower.CatchUp(store);
      ASSERT_EQ(follower.objects, model.objects) << "follower at step " << step;
    }
  }
  follower.CatchUp(store);
  EXPECT_EQ(follower.objects, model.objects);
  auto counts = store.ReadCounts();
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ(counts->appended, model.appended);
  int64_t diverted_total = 0;
  for (const auto& [reason, n] : counts->diverted) diverted_total += n;
  EXPECT_EQ(diverted_total, diverts);
  // The mix really exercised every path.
  EXPECT_GT(compactions, 0);
  EXPECT_GT(swaps, 0);
  EXPECT_GT(diverts, 0);
  EXPECT_GT(duplicates, 0);
  EXPECT_GT(batches, 0);
  EXPECT_GT(raced, 0);
  RecordProperty("compactions", compactions);
  RecordProperty("swaps", swaps);
  RecordProperty("stale_swaps", stale_swaps);
  RecordProperty("duplicates", duplicates);
  RecordProperty("batches", batches);
  RecordProperty("raced", raced);
  RecordProperty("resplices", follower.resplices);
}

INSTANTIATE_TEST_SUITE_P(Seeds, MaterializationModelTest, ::testing::Values(1u, 7u, 42u, 2026u));

}  // namespace
}  // namespace reverser::redisstore
