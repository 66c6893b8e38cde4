// Our metrics registry (libs/runtime/metrics.h) against prometheus-cpp 1.0 (Debian's
// prometheus-cpp-dev, core library) on what the services do with metrics, each timed the same
// way in the same run (issue #15 asks for prometheus-cpp or a measured reason not to):
//   increment  a counter already looked up, from 2 threads at once
//   lookup     name + labels → the series, then increment (the services' inline GetCounter)
//   histogram  observe one latency
//   render     the text exposition of 2,000 series (the /metrics scrape)
// Both sides are timed the same way (steady_clock around the same loop), the same number of
// rounds, interleaved (ours, theirs, ours, theirs, ...). Prints the median (min–max) ns per
// operation of both and the ratio of the medians ours / prometheus-cpp (< 1: ours is faster).
//
//   bazel run -c opt //bench/runtime:metrics_bench

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench/common/bench_result.h"
#include "libs/runtime/metrics.h"

namespace {

using Clock = std::chrono::steady_clock;

// One timing of `ops` calls of `body` split over `threads` threads, in ns/op.
double NsPerOp(int threads, int64_t ops, const std::function<void(int64_t)>& body) {
  auto start = Clock::now();
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&body, ops, threads] {
      for (int64_t i = 0; i < ops / threads; ++i) body(i);
    });
  }
  for (auto& thread : pool) thread.join();
  return std::chrono::duration<double, std::nano>(Clock::now() - start).count() /
         static_cast<double>(ops);
}

// `rounds` timings of each, interleaved; prints and emits the figure.
void Compare(const char* key, const char* what, int threads, int64_t ops, int rounds,
             const std::function<void(int64_t)>& ours, const std::function<void(int64_t)>& theirs) {
  std::vector<double> our_ns, their_ns;
  for (int r = 0; r < rounds; ++r) {
    our_ns.push_back(NsPerOp(threads, ops, ours));
    their_ns.push_back(NsPerOp(threads, ops, theirs));
  }
  using reverser::bench::StatsOf;
  const auto o = StatsOf(our_ns), t = StatsOf(their_ns);
  std::printf(
      "%-40s ours %9.1f ns (%.1f–%.1f)   prometheus-cpp %9.1f ns (%.1f–%.1f)   ratio %.2f\n", what,
      o.median, o.min, o.max, t.median, t.min, t.max, o.median / t.median);
  reverser::bench::EmitFigure(
      {.bench = "metrics",
       .figure = key,
       .label = what,
       .unit = "ns/op",
       .better = "lower",
       .samples = our_ns,
       .anchor = reverser::bench::Series{"prometheus_cpp", "prometheus-cpp 1.0, the same operation",
                                         their_ns},
       .timing = absl::StrCat("the same loop around each, ", rounds, " rounds each, interleaved")});
}

}  // namespace

int main() {
  constexpr int kRounds = 7;
  using reverser::runtime::MetricsRegistry;
  MetricsRegistry ours;
  auto theirs = std::make_shared<prometheus::Registry>();

  // Increment of a series already held.
  auto& our_counter = ours.GetCounter("bench_events_total", "Events.", {{"kind", "a"}});
  auto& their_family =
      prometheus::BuildCounter().Name("bench_events_total").Help("Events.").Register(*theirs);
  auto& their_counter = their_family.Add({{"kind", "a"}});
  Compare(
      "increment", "increment (held series, 2 threads)", 2, 4'000'000, kRounds,
      [&](int64_t) { our_counter.Increment(); }, [&](int64_t) { their_counter.Increment(); });

  // Lookup by name and labels, then increment: what an inline GetCounter(...) call costs.
  const std::vector<std::string> kinds = {"resync", "event", "target_config", "empty"};
  Compare(
      "lookup_increment", "lookup + increment (4 label values)", 1, 1'000'000, kRounds,
      [&](int64_t i) {
        ours.GetCounter("bench_messages_total", "Messages.", {{"kind", kinds[i % 4]}}).Increment();
      },
      [&](int64_t i) {
        prometheus::BuildCounter()
            .Name("bench_messages_total")
            .Help("Messages.")
            .Register(*theirs)
            .Add({{"kind", kinds[i % 4]}})
            .Increment();
      });

  // One latency observation.
  auto& our_histogram = ours.GetHistogram("bench_latency_seconds", "Latency.");
  auto& their_histogram =
      prometheus::BuildHistogram()
          .Name("bench_latency_seconds")
          .Help("Latency.")
          .Register(*theirs)
          .Add({}, prometheus::Histogram::BucketBoundaries(reverser::runtime::LatencyBuckets()));
  Compare(
      "histogram_observe", "histogram observe (1 thread)", 1, 2'000'000, kRounds,
      [&](int64_t i) { our_histogram.Observe(0.001 * (i % 500)); },
      [&](int64_t i) { their_histogram.Observe(0.001 * (i % 500)); });

  // The scrape: 2,000 series (100 label values × 20 families).
  MetricsRegistry our_scrape;
  auto their_scrape = std::make_shared<prometheus::Registry>();
  for (int f = 0; f < 20; ++f) {
    const std::string name = absl::StrCat("bench_family_", f, "_total");
    auto& family = prometheus::BuildCounter().Name(name).Help("A family.").Register(*their_scrape);
    for (int v = 0; v < 100; ++v) {
      our_scrape.GetCounter(name, "A family.", {{"target", absl::StrCat("team/t", v)}})
          .Increment(v);
      family.Add({{"target", absl::StrCat("team/t", v)}}).Increment(v);
    }
  }
  size_t sink = 0;
  Compare(
      "render_2000", "render 2,000 series (per scrape)", 1, 200, kRounds,
      [&](int64_t) { sink += our_scrape.RenderText().size(); },
      [&](int64_t) {
        sink += prometheus::TextSerializer().Serialize(their_scrape->Collect()).size();
      });
  std::printf("(rendered %zu bytes in all)\n", sink);
  return 0;
}
