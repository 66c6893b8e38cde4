// How much work GitTargets arriving one by one cost the splicer, against the same targets
// arriving in one table update (the anchor: nothing can cost less than one resync per stream):
// resyncs sent, splice-stream threads and Redis connections once every stream tails.
//
//   bazel run -c opt //bench/splicer:target_churn_bench -- --targets=100 --types=3
//
// A real redis-server holds one small checkpoint per type (namespace `team`); the gitworker peer
// acks every delivery as pushed at once. Each target follows every type in `team`.

#include <fstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/common/bench_result.h"
#include "bench/splicer/accepting_gitworker.h"
#include "libs/redisstore/materialization_store.h"
#include "libs/redisstore/test_redis.h"
#include "libs/runtime/metrics.h"
#include "services/splicer/delivery_client.h"
#include "services/splicer/target_manager.h"
#include "services/splicer/test_support.h"
#include "tests/fixtures/process.h"
#include "tests/fixtures/redis_server.h"

ABSL_FLAG(int, targets, 100, "GitTargets.");
ABSL_FLAG(int, types, 3, "Types each target follows (one materialization each).");

namespace reverser::bench {
namespace {

std::string TypeName(int i) { return absl::StrCat("widgets", i); }

// Targets of each run have their own uids: no run resumes from another's delivery cursors.
reverser::v1::WatchedTypeTable TableOf(const std::string& run, int target, int types) {
  reverser::v1::WatchedTypeTable table =
      splicer::testutil::ConfigMapTable(absl::StrCat(run, "-target-", target), "team");
  reverser::v1::WatchedType type = table.types(0);
  table.clear_types();
  for (int i = 0; i < types; ++i) {
    type.mutable_type()->mutable_gvr()->set_resource(TypeName(i));
    *table.add_types() = type;
  }
  return table;
}

int ProcessThreads() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("Threads:", 0) == 0) return std::stoi(line.substr(8));
  }
  return -1;
}

struct Outcome {
  int64_t resyncs = 0;
  int threads = 0;
  std::string redis_clients;
};

// Runs one arrival pattern against a fresh splicer; counts once every stream tails and the
// resync count held still over a quiet second (the bench waits; tests never do).
Outcome Run(testing::RedisServer& redis, bool one_by_one, int targets, int types) {
  AcceptingGitWorker peer;
  LocalGrpcServer server = LocalGrpcServer::Start(&peer);
  splicer::DeliveryClient delivery("127.0.0.1:" + std::to_string(server.port), 100,
                                   grpc::InsecureChannelCredentials());
  delivery.Start();
  runtime::MetricsRegistry metrics;
  splicer::TargetManagerOptions options;
  options.stream_defaults.redis = redisstore::RedisOptionsFor(redis);
  options.stream_defaults.attribution = false;
  auto manager = std::make_unique<splicer::TargetManager>(options, &delivery, &metrics);
  if (one_by_one) {
    for (int t = 0; t < targets; ++t) {
      reverser::v1::TableUpdate update;
      update.set_generation(t + 1);
      *update.add_upserted() = TableOf("one-by-one", t, types);
      manager->Apply(update);
    }
  } else {
    reverser::v1::TableUpdate update;
    update.set_generation(1);
    update.set_full(true);
    for (int t = 0; t < targets; ++t) *update.add_upserted() = TableOf("batch", t, types);
    manager->Apply(update);
  }
  const int64_t streams = static_cast<int64_t>(targets) * types;
  testing::WaitFor([&] { return peer.resyncs() >= streams; }, absl::Minutes(5));
  int64_t last = -1;
  while (peer.resyncs() != last) {
    last = peer.resyncs();
    absl::SleepFor(absl::Seconds(1));
  }
  Outcome out;
  out.resyncs = peer.resyncs();
  out.threads = ProcessThreads();
  auto info = redis.Cli({"INFO", "clients"});
  if (info.ok()) {
    auto at = info->find("connected_clients:");
    if (at != std::string::npos) {
      out.redis_clients = info->substr(at + 18, info->find_first_of("\r\n", at) - at - 18);
    }
  }
  manager->StopAll();
  manager.reset();
  delivery.Stop();
  server.server->Shutdown();
  return out;
}

int Main() {
  const int targets = absl::GetFlag(FLAGS_targets);
  const int types = absl::GetFlag(FLAGS_types);
  auto redis = testing::RedisServer::Start();
  if (!redis.ok()) {
    absl::FPrintF(stderr, "redis: %s\n", redis.status().ToString());
    return 1;
  }
  auto conn = redisstore::ConnectTo(**redis);
  if (!conn.ok()) return 1;
  for (int i = 0; i < types; ++i) {
    redisstore::MaterializationStore store(conn->get(), redisstore::KeyPrefix::Default(),
                                           {"", "v1", TypeName(i)},
                                           core::WatchScope::Namespace("team"));
    auto seeded =
        store.ReplaceCheckpoint({{"team/a", splicer::testutil::ConfigMapJson("team", "a", "1", 5)}},
                                core::StreamPosition::EndOf(5));
    if (!seeded.ok()) return 1;
  }
  const int base_threads = ProcessThreads();
  Outcome batch = Run(**redis, false, targets, types);
  Outcome churn = Run(**redis, true, targets, types);
  absl::PrintF("%d targets x %d types = %d streams; %d threads before any splicer\n", targets,
               types, targets * types, base_threads);
  absl::PrintF(
      "| arrival | resyncs | per stream | threads | redis clients |\n|---|---|---|---|---|\n");
  absl::PrintF("| one table update (anchor) | %d | %.2f | %d | %s |\n", batch.resyncs,
               static_cast<double>(batch.resyncs) / (targets * types), batch.threads,
               batch.redis_clients);
  absl::PrintF("| one target per update | %d | %.2f | %d | %s |\n", churn.resyncs,
               static_cast<double>(churn.resyncs) / (targets * types), churn.threads,
               churn.redis_clients);
  absl::PrintF("ratio one-by-one / anchor: %.2fx\n",
               static_cast<double>(churn.resyncs) / std::max<int64_t>(batch.resyncs, 1));
  EmitFigure({.bench = "target_churn",
              .figure = "resyncs",
              .label = absl::StrCat(targets, " GitTargets × ", types,
                                    " types arriving one table update each: resyncs sent"),
              .unit = "resyncs",
              .better = "lower",
              .samples = {static_cast<double>(churn.resyncs)},
              .anchor = Series{"one_update",
                               "the same targets in one table update",
                               {static_cast<double>(batch.resyncs)}},
              .timing = "counted (not timed) once every stream tails and the count held still "
                        "for a second; one run each, same process",
              .extra = {{"threads", churn.threads},
                        {"anchor_threads", batch.threads},
                        {"redis_clients", churn.redis_clients},
                        {"anchor_redis_clients", batch.redis_clients}}});
  return 0;
}

}  // namespace
}  // namespace reverser::bench

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return reverser::bench::Main();
}
