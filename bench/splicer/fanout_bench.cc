// A splicer following many GitTargets over few materializations (issue #15): the threads and
// Redis connections it holds once every stream tails, and whether every target received
// exactly its events, in stream order.
//
//   bazel run -c opt //bench/splicer:fanout_bench -- --targets=200 --types=5 --events=20
//
// A real redis-server holds one materialization per type (namespace `team`, one object). Every
// target follows every type there; even targets take every operation, odd ones creates only.
// Once each stream has sent its resync, `events` creates and `events` updates are appended per
// type; a gitworker peer acks every delivery as pushed at once and records the events.

#include <fstream>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "bench/common/bench_result.h"
#include "bench/splicer/accepting_gitworker.h"
#include "libs/core/proto_convert.h"
#include "libs/redisstore/materialization_store.h"
#include "libs/redisstore/test_redis.h"
#include "libs/runtime/metrics.h"
#include "services/splicer/delivery_client.h"
#include "services/splicer/target_manager.h"
#include "services/splicer/test_support.h"
#include "tests/fixtures/process.h"
#include "tests/fixtures/redis_server.h"

ABSL_FLAG(int, targets, 200, "GitTargets.");
ABSL_FLAG(int, types, 5, "Types each target follows (one materialization each).");
ABSL_FLAG(int, events, 20, "Creates and updates appended per type once every stream tails.");

namespace reverser::bench {
namespace {

std::string TypeName(int i) { return absl::StrCat("widgets", i); }

// What a target received of one type: (position, name, operation) in arrival order.
using Received = std::vector<std::tuple<core::StreamPosition, std::string, int>>;

// Acks every delivery as pushed at once and keeps each (target, type)'s events.
class RecordingGitWorker final : public reverser::v1::GitWorker::Service {
 public:
  grpc::Status Deliver(grpc::ServerContext* /*context*/,
                       grpc::ServerReaderWriter<reverser::v1::DeliveryFeedback,
                                                reverser::v1::DeliveryMessage>* stream) override {
    reverser::v1::DeliveryMessage message;
    while (stream->Read(&message)) {
      reverser::v1::DeliveryFeedback accepted;
      accepted.set_accepted_sequence(message.sequence());
      if (!stream->Write(accepted)) break;
      std::optional<reverser::v1::DeliveryFeedback> pushed = splicer::testutil::PushedAck(message);
      {
        std::lock_guard lock(mu_);
        if (message.has_resync()) ++resyncs_;
        if (message.has_event()) {
          const auto& event = message.event();
          ++events_;
          received_[{event.target().uid(), event.claim().type().gvr().resource()}].emplace_back(
              core::FromProto(event.position()), event.object().ref().name(),
              static_cast<int>(event.operation()));
        }
      }
      if (pushed && !stream->Write(*pushed)) break;
    }
    return grpc::Status::OK;
  }

  int64_t resyncs() const {
    std::lock_guard lock(mu_);
    return resyncs_;
  }
  int64_t events() const {
    std::lock_guard lock(mu_);
    return events_;
  }
  std::map<std::pair<std::string, std::string>, Received> received() const {
    std::lock_guard lock(mu_);
    return received_;
  }

 private:
  mutable std::mutex mu_;
  int64_t resyncs_ = 0;
  int64_t events_ = 0;
  std::map<std::pair<std::string, std::string>, Received> received_;
};

reverser::v1::WatchedTypeTable TableOf(int target, int types) {
  reverser::v1::WatchedTypeTable table =
      splicer::testutil::ConfigMapTable(absl::StrCat("fanout-target-", target), "team");
  reverser::v1::WatchedType type = table.types(0);
  if (target % 2 == 1) {
    auto& ops = (*type.mutable_namespaces())["team"];
    ops.Clear();
    ops.add_operations(reverser::v1::OPERATION_CREATE);
  }
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

std::string RedisClients(testing::RedisServer& redis) {
  auto info = redis.Cli({"INFO", "clients"});
  if (!info.ok()) return "?";
  auto at = info->find("connected_clients:");
  if (at == std::string::npos) return "?";
  return info->substr(at + 18, info->find_first_of("\r\n", at) - at - 18);
}

int Main() {
  const int targets = absl::GetFlag(FLAGS_targets);
  const int types = absl::GetFlag(FLAGS_types);
  const int events = absl::GetFlag(FLAGS_events);
  auto redis = testing::RedisServer::Start();
  if (!redis.ok()) {
    absl::FPrintF(stderr, "redis: %s\n", redis.status().ToString());
    return 1;
  }
  auto conn = redisstore::ConnectTo(**redis);
  if (!conn.ok()) return 1;
  auto store_of = [&](int i) {
    return redisstore::MaterializationStore(conn->get(), redisstore::KeyPrefix::Default(),
                                            {"", "v1", TypeName(i)},
                                            core::WatchScope::Namespace("team"));
  };
  for (int i = 0; i < types; ++i) {
    auto seeded = store_of(i).ReplaceCheckpoint(
        {{"team/a", splicer::testutil::ConfigMapJson("team", "a", "1", 5)}},
        core::StreamPosition::EndOf(5));
    if (!seeded.ok()) return 1;
  }
  const int base_threads = ProcessThreads();
  const std::string base_clients = RedisClients(**redis);

  RecordingGitWorker peer;
  LocalGrpcServer server = LocalGrpcServer::Start(&peer);
  splicer::DeliveryClient delivery("127.0.0.1:" + std::to_string(server.port), 1000,
                                   grpc::InsecureChannelCredentials());
  delivery.Start();
  runtime::MetricsRegistry metrics;
  splicer::TargetManagerOptions options;
  options.stream_defaults.redis = redisstore::RedisOptionsFor(**redis);
  options.stream_defaults.attribution = false;
  auto manager = std::make_unique<splicer::TargetManager>(options, &delivery, &metrics);
  reverser::v1::TableUpdate update;
  update.set_generation(1);
  update.set_full(true);
  for (int t = 0; t < targets; ++t) *update.add_upserted() = TableOf(t, types);
  const absl::Time started = absl::Now();
  manager->Apply(update);
  const int64_t streams = static_cast<int64_t>(targets) * types;
  if (!testing::WaitFor([&] { return peer.resyncs() >= streams; }, absl::Minutes(5))) {
    absl::FPrintF(stderr, "only %d of %d resyncs arrived\n", peer.resyncs(), streams);
    return 1;
  }
  const absl::Duration resynced = absl::Now() - started;
  const int tail_threads = ProcessThreads();
  const std::string tail_clients = RedisClients(**redis);

  // Per type: creates of o0.. and updates of team/a, interleaved; positions in append order.
  std::vector<std::vector<std::tuple<core::StreamPosition, std::string, int>>> appended(types);
  const absl::Time appending = absl::Now();
  for (int i = 0; i < types; ++i) {
    std::vector<redisstore::StreamEntry> entries;
    uint64_t rv = 6;
    for (int e = 0; e < events; ++e) {
      entries.push_back(splicer::testutil::ConfigMapEntry("team", absl::StrCat("o", e), "1", rv++,
                                                          redisstore::ChangeOp::kAdded));
      entries.push_back(splicer::testutil::ConfigMapEntry("team", "a", absl::StrCat("v", e), rv++,
                                                          redisstore::ChangeOp::kModified));
    }
    auto store = store_of(i);
    auto results = store.AppendAll(entries);
    if (!results.ok()) {
      absl::FPrintF(stderr, "append: %s\n", results.status().ToString());
      return 1;
    }
    for (size_t k = 0; k < entries.size(); ++k) {
      appended[i].emplace_back(
          (*results)[k].position, entries[k].name,
          k % 2 == 0 ? reverser::v1::OPERATION_CREATE : reverser::v1::OPERATION_UPDATE);
    }
  }
  const int64_t expected_events =
      static_cast<int64_t>(types) * events * (2 * ((targets + 1) / 2) + (targets / 2));
  const bool all_came =
      testing::WaitFor([&] { return peer.events() >= expected_events; }, absl::Minutes(5));
  const absl::Duration delivered = absl::Now() - appending;

  // Every target: exactly its events of each type, in stream order, nothing else.
  auto received = peer.received();
  int wrong = 0;
  for (int t = 0; t < targets; ++t) {
    for (int i = 0; i < types; ++i) {
      Received want;
      for (const auto& entry : appended[i]) {
        if (t % 2 == 0 || std::get<2>(entry) == reverser::v1::OPERATION_CREATE) {
          want.push_back(entry);
        }
      }
      auto it = received.find({absl::StrCat("fanout-target-", t), TypeName(i)});
      const Received& got = it == received.end() ? Received() : it->second;
      if (got != want) {
        if (wrong < 5) {
          absl::FPrintF(stderr, "target %d type %s: %d event(s), %d expected\n", t, TypeName(i),
                        got.size(), want.size());
        }
        ++wrong;
      }
    }
  }
  const int64_t total_events = peer.events();
  manager->StopAll();
  manager.reset();
  delivery.Stop();
  server.server->Shutdown();

  absl::PrintF("%d targets x %d types = %d streams over %d materializations\n", targets, types,
               streams, types);
  absl::PrintF("| | threads | redis clients |\n|---|---|---|\n");
  absl::PrintF("| before the splicer | %d | %s |\n", base_threads, base_clients);
  absl::PrintF("| every stream tailing | %d | %s |\n", tail_threads, tail_clients);
  absl::PrintF("resyncs: %d in %s; events: %d of %d in %s\n", peer.resyncs(),
               absl::FormatDuration(resynced), total_events, expected_events,
               absl::FormatDuration(delivered));
  absl::PrintF("streams with exactly their events, in order: %d of %d\n", streams - wrong, streams);
  const std::string shape = absl::StrCat(targets, " targets × ", types, " types (", streams,
                                         " streams over ", types, " materializations)");
  EmitFigure({.bench = "fanout",
              .figure = "threads_tailing",
              .label = "splicer threads once every stream tails, " + shape,
              .unit = "threads",
              .better = "lower",
              .samples = {static_cast<double>(tail_threads)},
              .timing = "counted from /proc/self/status",
              .context = true,
              .extra = {{"before", base_threads}}});
  EmitFigure(
      {.bench = "fanout",
       .figure = "delivery_s",
       .label = absl::StrCat(expected_events, " events delivered, every stream exact, ", shape),
       .unit = "s",
       .better = "lower",
       .samples = {absl::ToDoubleSeconds(delivered)},
       .timing = "from the first append to the last event received by the peer",
       .context = true,
       .extra = {{"exact_streams", streams - wrong}, {"streams", streams}}});
  return all_came && wrong == 0 && total_events == expected_events ? 0 : 1;
}

}  // namespace
}  // namespace reverser::bench

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return reverser::bench::Main();
}
