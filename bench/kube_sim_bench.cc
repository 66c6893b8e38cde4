// kube-sim under load: creates N ConfigMaps over HTTP (keep-alive) while W watchers follow, then
// lists them all. Prints writes/s, the time until every watcher has seen every event, the list
// time, and peak RSS. Then a fresh bare watch replays the whole backlog from the first
// resourceVersion (what a client resuming after downtime reads). The server must never be the
// bottleneck of the project's own benchmarks.
//
//   bazel run -c opt //bench:kube_sim_bench -- --objects=100000 --watchers=5
//   bazel run -c opt //bench:kube_sim_bench -- --objects=20000 --watchers=0 --replays=3

#include <sys/resource.h>

#include <iostream>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "bench/common/bench_result.h"
#include "httplib.h"
#include "tools/kube-sim/kube_sim.h"
#include "tools/kube-sim/test_support.h"

ABSL_FLAG(int, objects, 100000, "ConfigMaps to create.");
ABSL_FLAG(int, watchers, 5, "Watches following the creates.");
ABSL_FLAG(int, data_bytes, 0,
          "Bytes of a labelled ConfigMap's payload (400: the materializer bench's objects); 0: "
          "a bare {k: v}.");
ABSL_FLAG(int, replays, 1, "Bare watches replaying the backlog one after another, each timed.");

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  using namespace reverser::kubesim;
  const int n = absl::GetFlag(FLAGS_objects);
  const int w = absl::GetFlag(FLAGS_watchers);
  const int data_bytes = absl::GetFlag(FLAGS_data_bytes);
  KubeSimOptions options;
  options.history_limit = static_cast<size_t>(n) + 100;
  auto sim = KubeSim::Start(options);
  if (!sim.ok()) {
    std::cerr << sim.status() << "\n";
    return 1;
  }
  const std::string from = std::to_string((*sim)->CurrentResourceVersion());
  std::vector<std::unique_ptr<testing::StreamReader>> watches;
  for (int i = 0; i < w; ++i) {
    watches.push_back(std::make_unique<testing::StreamReader>(
        (*sim)->port(), "/api/v1/namespaces/default/configmaps?watch=1&resourceVersion=" + from));
  }
  std::vector<absl::Time> seen_all(w);
  std::vector<std::thread> readers;
  for (int i = 0; i < w; ++i) {
    readers.emplace_back([&, i] {
      for (int k = 0; k < n; ++k) {
        if (watches[i]->Next().empty()) return;
      }
      seen_all[i] = absl::Now();
    });
  }
  httplib::Client client("127.0.0.1", (*sim)->port());
  client.set_keep_alive(true);
  client.set_tcp_nodelay(true);
  absl::Time start = absl::Now();
  for (int i = 0; i < n; ++i) {
    Json cm = {{"metadata", {{"name", "cm-" + std::to_string(i)}}}, {"data", {{"k", "v"}}}};
    if (data_bytes > 0) {
      cm["metadata"]["labels"] = {{"app", "bench"}};
      cm["data"] = {{"key", std::to_string(i)}, {"config.yaml", std::string(data_bytes, 'x')}};
    }
    auto res = client.Post("/api/v1/namespaces/default/configmaps", cm.dump(), "application/json");
    if (!res || res->status != 201) {
      std::cerr << "create " << i << " failed\n";
      return 2;
    }
  }
  absl::Duration writes = absl::Now() - start;
  for (auto& t : readers) t.join();
  absl::Time last_seen = start;
  for (absl::Time t : seen_all) last_seen = std::max(last_seen, t);
  absl::Time list_start = absl::Now();
  auto list = client.Get("/api/v1/namespaces/default/configmaps");
  absl::Duration list_time = absl::Now() - list_start;
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  // Backlog replay: one watch at a time, from before the first create, to the last event.
  // CPU time too (server + client, one process): steadier than rates on a shared machine.
  auto cpu_now = [] {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return absl::DurationFromTimeval(u.ru_utime) + absl::DurationFromTimeval(u.ru_stime);
  };
  struct Replay {
    double per_second;
    double cpu_us_per_event;
  };
  std::vector<Replay> replays;
  for (int r = 0; r < absl::GetFlag(FLAGS_replays); ++r) {
    absl::Time replay_start = absl::Now();
    absl::Duration cpu_start = cpu_now();
    testing::StreamReader replay(
        (*sim)->port(), "/api/v1/namespaces/default/configmaps?watch=1&resourceVersion=" + from);
    for (int k = 0; k < n; ++k) {
      if (replay.Next().empty()) {
        std::cerr << "replay ended after " << k << " events\n";
        return 3;
      }
    }
    replays.push_back({n / absl::ToDoubleSeconds(absl::Now() - replay_start),
                       absl::ToDoubleMicroseconds(cpu_now() - cpu_start) / n});
  }
  std::cout << "kube-sim: " << n << " creates with " << w
            << " watchers: " << n / absl::ToDoubleSeconds(writes) << " writes/s";
  if (w > 0) {
    std::cout << "; every watcher had every event "
              << absl::ToDoubleMilliseconds(last_seen - start - writes)
              << " ms after the last write";
  }
  std::cout << "\n"
            << "  list of " << n << ": " << absl::ToDoubleMilliseconds(list_time) << " ms ("
            << (list ? list->body.size() : 0) / (1024 * 1024) << " MiB)\n"
            << "  peak RSS (server + client in one process): " << usage.ru_maxrss / 1024 << " MiB\n"
            << "  ratio to the pipeline bench's 50 writes/s: "
            << (n / absl::ToDoubleSeconds(writes)) / 50.0 << "x headroom\n";
  std::vector<double> replay_rates, replay_cpu;
  for (const Replay& r : replays) {
    std::cout << "  backlog of " << n << " replayed to a bare watch: " << r.per_second
              << " events/s, " << r.cpu_us_per_event << " CPU us/event (server + reader)\n";
    replay_rates.push_back(r.per_second);
    replay_cpu.push_back(r.cpu_us_per_event);
  }
  using reverser::bench::EmitFigure;
  const std::string shape = absl::StrCat(n, " ConfigMaps, ", w, " watchers");
  EmitFigure({.bench = "kube_sim",
              .figure = "writes",
              .label = "kube-sim creates over one keep-alive HTTP connection, " + shape,
              .unit = "writes/s",
              .samples = {n / absl::ToDoubleSeconds(writes)},
              .timing = "first request to last answer; one run (the test API server: context "
                        "for the other benches, no goal)",
              .context = true,
              .extra = {{"list_ms", absl::ToDoubleMilliseconds(list_time)},
                        {"peak_rss_mib", usage.ru_maxrss / 1024.0}}});
  EmitFigure({.bench = "kube_sim",
              .figure = "replay",
              .label = absl::StrCat("backlog of ", n, " replayed to a bare watch"),
              .unit = "events/s",
              .samples = replay_rates,
              .timing = "one bare watch at a time, first byte to last event",
              .context = true,
              .extra = {{"cpu_us_per_event", replay_cpu}}});
  return 0;
}
