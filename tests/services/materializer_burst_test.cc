// The materializer binary killed with SIGKILL in the middle of a burst of 10,000 ConfigMap writes
// (creates, updates, deletes), restarted each time, against kube-sim and a real redis-server.
//
// What "every change exactly once" means here. The materialization is a checkpoint at a position
// P plus the stream of changes after P (docs/redis-keys.md). A change at or below P is
// represented by the checkpoint — as the object state it produced — and by no stream entry; a
// change above P is in the stream exactly once, at ID `<rv>-0`, in RV order. So, against the
// API server's own record of the burst (an independent watch opened before it):
//   1. the stream holds exactly the burst's changes with RV > P, each once, IDs strictly
//      increasing, with the change's op, identity, RV and object;
//   2. the checkpoint items are exactly the objects that existed at P;
//   3. checkpoint + stream fold to what the API server holds at the end.
// With history kept (first test) P never moves past the pre-burst sync, so the stream must hold
// all 10,000 changes. When history is compacted — by the materializer's own compaction, and by
// the API server forgetting the RVs the restarted materializer wants to resume from (410, a full
// replay) — P moves forward and rules 1-3 still pin the result exactly (second test).

#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "libs/redisstore/redis_connection.h"
#include "tests/fixtures/process.h"
#include "tests/fixtures/redis_server.h"
#include "tests/fixtures/service_process.h"
#include "tests/fixtures/temp_dir.h"
#include "tools/kube-sim/kube_sim.h"
#include "tools/kube-sim/test_support.h"
#include "libs/redisstore/test_redis.h"

namespace reverser {
namespace {

using nlohmann::json;

constexpr int kWrites = 10000;
constexpr int kNames = 400;
constexpr char kNamespace[] = "burst";
constexpr char kStream[] = "reverser:mat:v1:{configmaps:ns:burst}:stream";
constexpr char kCheckpointRv[] = "reverser:mat:v1:{configmaps:ns:burst}:ckpt:rv";
constexpr char kCheckpointItems[] = "reverser:mat:v1:{configmaps:ns:burst}:ckpt:items";
constexpr absl::Duration kDeadline = absl::Seconds(60);

// The RV of a stream position `<rv>-<seq>` (or a bare `<rv>`).
uint64_t RvOf(absl::string_view position) {
  uint64_t rv = 0;
  std::vector<absl::string_view> parts = absl::StrSplit(position, '-');
  if (parts.empty() || !absl::SimpleAtoi(parts[0], &rv)) return 0;
  return rv;
}

json WithoutManagedFields(json object) {
  if (object.contains("metadata")) object["metadata"].erase("managedFields");
  return object;
}

// One change as the API server reported it on the oracle watch.
struct Change {
  std::string type;  // ADDED, MODIFIED, DELETED
  json object;
  uint64_t rv = 0;
};

struct BurstOptions {
  std::string compact_after_entries = "1000000";  // effectively never
  // Forget the API server's history while the second kill has the materializer down, so its
  // resume gets 410 and it replays.
  bool expire_history_at_second_kill = false;
};

class MaterializerBurstTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto redis = testing::RedisServer::Start();
    ASSERT_TRUE(redis.ok()) << redis.status();
    redis_ = std::move(*redis);
    kubesim::KubeSimOptions options;
    options.history_limit = 4 * kWrites;  // compaction only when a test asks for it
    auto sim = kubesim::KubeSim::Start(options);
    ASSERT_TRUE(sim.ok()) << sim.status();
    sim_ = std::move(*sim);
    ASSERT_TRUE(sim_->WriteKubeconfig(dir_.path() + "/kubeconfig").ok());
    ASSERT_EQ(
        sim_->Call("POST", "/api/v1/namespaces", json{{"metadata", {{"name", kNamespace}}}}.dump())
            .status,
        201);
    auto connection = redisstore::ConnectTo(*redis_);
    ASSERT_TRUE(connection.ok()) << connection.status();
    redis_connection_ = std::move(*connection);
  }

  void TearDown() override {
    if (HasFailure()) {
      for (const auto& m : materializers_) std::cerr << "--- materializer log\n" << m->Logs();
    }
  }

  void StartMaterializer(const BurstOptions& burst) {
    auto service = testing::ServiceProcess::Start(
        "materializer", testing::RunfilePath("services/materializer/materializer"),
        {"--kubeconfig=" + dir_.path() + "/kubeconfig", "--redis_address=" + redis_->address(),
         absl::StrCat("--static_claims=v1/configmaps@", kNamespace), "--audit_webhook=false",
         "--compact_after_entries=" + burst.compact_after_entries});
    ASSERT_TRUE(service.ok()) << service.status();
    materializers_.push_back(std::move(*service));
  }

  void KillMaterializer() {
    materializers_.back()->process().Kill();
    ASSERT_TRUE(materializers_.back()->process().Wait(absl::Seconds(10)).ok());
  }

  std::optional<std::string> Get(const std::string& key) {
    auto reply = redis_connection_->Command({"GET", key});
    if (!reply.ok() || reply->IsNil()) return std::nullopt;
    return reply->str();
  }

  // The stream's last generated ID (survives trimming), or "" without a stream.
  std::string StreamTop() {
    auto reply = redis_connection_->Command({"XINFO", "STREAM", kStream});
    if (!reply.ok()) return "";
    auto fields = reply->elements();
    for (size_t i = 0; i + 1 < fields.size(); i += 2) {
      if (fields[i].str() == "last-generated-id") return fields[i + 1].str();
    }
    return "";
  }

  // The highest RV the materialization covers (stream top or checkpoint).
  uint64_t CoveredRv() {
    uint64_t covered = RvOf(StreamTop());
    if (auto checkpoint = Get(kCheckpointRv)) covered = std::max(covered, RvOf(*checkpoint));
    return covered;
  }

  // Runs the burst with two SIGKILLs, then checks rules 1-3 (file comment).
  void RunBurst(const BurstOptions& burst) {
    StartMaterializer(burst);
    if (HasFatalFailure()) return;
    ASSERT_TRUE(testing::WaitFor([&] { return Get(kCheckpointRv).has_value(); }, kDeadline))
        << "no initial checkpoint";
    const std::string initial_checkpoint = *Get(kCheckpointRv);
    const int64_t start_rv = sim_->CurrentResourceVersion();

    // The oracle: the API server's own record of every change, read as it happens.
    kubesim::testing::StreamReader watch(
        sim_->port(), absl::StrCat("/api/v1/namespaces/", kNamespace,
                                   "/configmaps?watch=1&resourceVersion=", start_rv));
    ASSERT_TRUE(sim_->WaitForActiveWatches(2, absl::Seconds(10)));  // the materializer's + ours
    std::vector<Change> changes;
    std::atomic<int> seen{0};
    std::thread oracle([&] {
      while (seen < kWrites) {
        json event = watch.NextJson(kDeadline);
        if (!event.is_object() || !event.contains("object")) return;
        Change change{event["type"], event["object"], 0};
        change.rv = RvOf(change.object["metadata"].value("resourceVersion", ""));
        changes.push_back(std::move(change));
        ++seen;
      }
    });

    // The writer: a fixed random mix over a few hundred names. It holds at two gates until the
    // matching kill has happened, so each kill lands mid-burst.
    std::mutex mu;
    std::condition_variable cv;
    int kills = 0;
    int gate_reached = 0;  // the writes done when the writer is held at a gate
    std::atomic<int> written{0};
    std::string write_error;
    std::thread writer([&] {
      std::mt19937 random(20261129);
      std::vector<bool> exists(kNames, false);
      const std::string base = absl::StrCat("/api/v1/namespaces/", kNamespace, "/configmaps");
      for (int i = 0; i < kWrites; ++i) {
        if (i == 4000 || i == 7500) {
          std::unique_lock lock(mu);
          gate_reached = i;
          cv.notify_all();
          cv.wait(lock, [&] { return kills >= (i == 4000 ? 1 : 2); });
        }
        int n = static_cast<int>(random() % kNames);
        std::string name = absl::StrCat("cm-", n);
        json body = {{"apiVersion", "v1"},
                     {"kind", "ConfigMap"},
                     {"metadata", {{"name", name}, {"namespace", kNamespace}}},
                     {"data", {{"k", std::to_string(i)}}}};
        kubesim::KubeSim::Response r;
        int want = 200;
        if (!exists[n]) {
          r = sim_->Call("POST", base, body.dump());
          want = 201;
          exists[n] = true;
        } else if (random() % 4 != 0) {
          r = sim_->Call("PUT", base + "/" + name, body.dump());
        } else {
          r = sim_->Call("DELETE", base + "/" + name);
          exists[n] = false;
        }
        if (r.status != want) {
          write_error = absl::StrCat("write ", i, " answered ", r.status, ": ", r.body);
          return;
        }
        ++written;
      }
    });
    auto release = [&](int kill_number) {
      std::lock_guard lock(mu);
      kills = kill_number;
      cv.notify_all();
    };
    auto cleanup = [&] {
      release(2);
      writer.join();
      oracle.join();
    };

    // Kill 1: once the materializer has appended a good part of the first stretch.
    bool progressed = testing::WaitFor(
        [&] { return CoveredRv() >= static_cast<uint64_t>(start_rv) + 2000; }, kDeadline);
    if (!progressed) cleanup();
    ASSERT_TRUE(progressed) << "the materializer never reached 2,000 changes";
    KillMaterializer();
    release(1);
    StartMaterializer(burst);

    // Kill 2: after the restarted process made progress of its own.
    progressed = testing::WaitFor(
        [&] { return CoveredRv() >= static_cast<uint64_t>(start_rv) + 5500; }, kDeadline);
    if (!progressed) cleanup();
    ASSERT_TRUE(progressed) << "the restarted materializer never reached 5,500 changes";
    KillMaterializer();
    if (burst.expire_history_at_second_kill) {
      // The oracle must not lose events to the compaction: hold the writer at its gate and let
      // the oracle catch up first.
      bool held = testing::WaitFor(
          [&] {
            std::lock_guard lock(mu);
            return gate_reached == 7500 && seen == 7500;
          },
          kDeadline);
      if (!held) cleanup();
      ASSERT_TRUE(held);
      sim_->Compact();
    }
    release(2);
    StartMaterializer(burst);

    writer.join();
    ASSERT_EQ(write_error, "");
    ASSERT_EQ(written, kWrites);
    oracle.join();
    ASSERT_EQ(changes.size(), static_cast<size_t>(kWrites)) << "the oracle watch ended early";
    const uint64_t final_rv = static_cast<uint64_t>(sim_->CurrentResourceVersion());
    ASSERT_EQ(changes.back().rv, final_rv);
    ASSERT_TRUE(testing::WaitFor([&] { return CoveredRv() == final_rv; }, kDeadline))
        << "the materialization covers " << CoveredRv() << ", the API server is at " << final_rv;

    CheckExactlyOnce(changes, static_cast<uint64_t>(start_rv));
    checkpoint_moved_ = *Get(kCheckpointRv) != initial_checkpoint;
  }

  void CheckExactlyOnce(const std::vector<Change>& changes, uint64_t start_rv) {
    auto checkpoint = Get(kCheckpointRv);
    ASSERT_TRUE(checkpoint.has_value());
    const uint64_t covered = RvOf(*checkpoint);
    ASSERT_GE(covered, start_rv);

    // Rule 1: the stream is exactly the changes above the checkpoint, in order, once each.
    auto range = redis_connection_->Command({"XRANGE", kStream, "-", "+"});
    ASSERT_TRUE(range.ok()) << range.status();
    std::vector<const Change*> expected;
    for (const Change& c : changes) {
      if (c.rv > covered) expected.push_back(&c);
    }
    const auto& entries = range->elements();
    ASSERT_EQ(entries.size(), expected.size()) << "checkpoint " << *checkpoint;
    uint64_t previous = 0;
    for (size_t i = 0; i < entries.size(); ++i) {
      const std::string& id = entries[i].elements()[0].str();
      auto fields = entries[i].elements()[1].AsStringMap();
      ASSERT_TRUE(fields.ok());
      const Change& want = *expected[i];
      SCOPED_TRACE(absl::StrCat("stream entry ", i, " id ", id));
      ASSERT_EQ(id, absl::StrCat(want.rv, "-0"));
      ASSERT_GT(RvOf(id), previous);
      previous = RvOf(id);
      EXPECT_EQ((*fields)["op"], want.type);
      EXPECT_EQ((*fields)["name"], want.object["metadata"]["name"]);
      EXPECT_EQ((*fields)["uid"], want.object["metadata"]["uid"]);
      EXPECT_EQ((*fields)["ns"], kNamespace);
      EXPECT_EQ((*fields)["rv"], std::to_string(want.rv));
      EXPECT_EQ((*fields)["src"], "watch");
      // A delete carries the object's last state too (at the deletion's RV).
      EXPECT_EQ(json::parse((*fields)["obj"], nullptr, false), WithoutManagedFields(want.object));
    }

    // Rule 2: the checkpoint is the state at its position (the oracle folded up to it).
    std::map<std::string, json> at_checkpoint;
    std::map<std::string, json> at_end;
    for (const Change& c : changes) {
      std::string identity =
          absl::StrCat(kNamespace, "/", c.object["metadata"]["name"].get<std::string>());
      for (auto* state : {&at_end, c.rv <= covered ? &at_checkpoint : nullptr}) {
        if (state == nullptr) continue;
        if (c.type == "DELETED") {
          state->erase(identity);
        } else {
          (*state)[identity] = WithoutManagedFields(c.object);
        }
      }
    }
    auto items = redis_connection_->Command({"HGETALL", kCheckpointItems});
    ASSERT_TRUE(items.ok());
    auto item_map = items->AsStringMap();
    ASSERT_TRUE(item_map.ok());
    std::map<std::string, json> checkpoint_items;
    for (const auto& [identity, body] : *item_map) {
      checkpoint_items[identity] = json::parse(body, nullptr, false);
    }
    EXPECT_EQ(checkpoint_items.size(), at_checkpoint.size());
    EXPECT_TRUE(checkpoint_items == at_checkpoint)
        << "checkpoint differs from the state at " << *checkpoint;

    // Rule 3: checkpoint + stream fold to the API server's final state.
    std::map<std::string, json> folded = checkpoint_items;
    for (const auto& entry : entries) {
      auto fields = *entry.elements()[1].AsStringMap();
      std::string identity = absl::StrCat(fields["ns"], "/", fields["name"]);
      if (fields["op"] == "DELETED") {
        folded.erase(identity);
      } else {
        folded[identity] = json::parse(fields["obj"], nullptr, false);
      }
    }
    std::map<std::string, json> cluster;
    json list = json::parse(
        sim_->Call("GET", absl::StrCat("/api/v1/namespaces/", kNamespace, "/configmaps")).body);
    for (const auto& item : list["items"]) {
      cluster[absl::StrCat(kNamespace, "/", item["metadata"]["name"].get<std::string>())] =
          WithoutManagedFields(item);
    }
    // List items carry no kind/apiVersion (as on a real API server); compare without them.
    for (auto* state : {&folded, &at_end}) {
      for (auto& [identity, object] : *state) {
        object.erase("kind");
        object.erase("apiVersion");
      }
    }
    EXPECT_EQ(folded.size(), cluster.size());
    EXPECT_TRUE(folded == cluster) << "checkpoint + stream differ from the API server's state";
    EXPECT_TRUE(at_end == cluster);
  }

  int LogsContaining(absl::string_view text) {
    int n = 0;
    for (const auto& m : materializers_) n += absl::StrContains(m->Logs(), text) ? 1 : 0;
    return n;
  }

  testing::ScopedTempDir dir_{"burst"};
  std::unique_ptr<testing::RedisServer> redis_;
  std::unique_ptr<kubesim::KubeSim> sim_;
  std::unique_ptr<redisstore::RedisConnection> redis_connection_;
  std::vector<std::unique_ptr<testing::ServiceProcess>> materializers_;
  bool checkpoint_moved_ = false;
};

TEST_F(MaterializerBurstTest, KillNineMidBurstKeepsEveryChangeExactlyOnceInRvOrder) {
  RunBurst({});
  if (HasFatalFailure()) return;
  // History was kept: both restarts resumed from the stream top, nothing was replayed, so the
  // stream holds all 10,000 changes.
  EXPECT_FALSE(checkpoint_moved_);
  EXPECT_EQ(LogsContaining("\"msg\":\"materialization resumed\""), 2);
  EXPECT_EQ(LogsContaining("\"msg\":\"checkpoint replaced\""), 1);  // the first start only
}

TEST_F(MaterializerBurstTest, KillNineWithCompactedHistoryKeepsEveryChangeExactlyOnce) {
  BurstOptions burst;
  burst.compact_after_entries = "1500";
  burst.expire_history_at_second_kill = true;
  RunBurst(burst);
  if (HasFatalFailure()) return;
  EXPECT_TRUE(checkpoint_moved_);
  // The third process found its cursor expired (410) and replayed.
  EXPECT_TRUE(absl::StrContains(materializers_.back()->Logs(), "ExpiredResourceVersion"))
      << materializers_.back()->Logs();
}

}  // namespace
}  // namespace reverser
