// Our metrics registry (libs/runtime/metrics.h) against prometheus-cpp 1.0 (Debian's
// prometheus-cpp-dev, core library) on what the services do with metrics, each timed the same
// way in the same run (issue #15 asks for prometheus-cpp or a measured reason not to):
//   increment  a counter already looked up, from 2 threads at once
//   lookup     name + labels → the series, then increment (the services' inline GetCounter)
//   histogram  observe one latency
//   render     the text exposition of 2,000 series (the /metrics scrape)
// Prints ns per operation for both and the ratio ours / prometheus-cpp (< 1: ours is faster).
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
#include "libs/runtime/metrics.h"

namespace {

using Clock = std::chrono::steady_clock;

// Median of `rounds` timings of `ops` calls of `body` split over `threads` threads, in ns/op.
double NsPerOp(int threads, int64_t ops, int rounds, const std::function<void(int64_t)>& body) {
  std::vector<double> samples;
  for (int r = 0; r < rounds; ++r) {
    auto start = Clock::now();
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&body, ops, threads] {
        for (int64_t i = 0; i < ops / threads; ++i) body(i);
      });
    }
    for (auto& thread : pool) thread.join();
    samples.push_back(std::chrono::duration<double, std::nano>(Clock::now() - start).count() /
                      static_cast<double>(ops));
  }
  std::sort(samples.begin(), samples.end());
  return samples[samples.size() / 2];
}

void Row(const char* what, double ours, double theirs) {
  std::printf("%-44s ours %9.1f ns   prometheus-cpp %9.1f ns   ours/prometheus-cpp %.2f\n", what,
              ours, theirs, ours / theirs);
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
  Row("increment (held series, 2 threads)",
      NsPerOp(2, 4'000'000, kRounds, [&](int64_t) { our_counter.Increment(); }),
      NsPerOp(2, 4'000'000, kRounds, [&](int64_t) { their_counter.Increment(); }));

  // Lookup by name and labels, then increment: what an inline GetCounter(...) call costs.
  const std::vector<std::string> kinds = {"resync", "event", "target_config", "empty"};
  Row("lookup + increment (4 label values)",
      NsPerOp(1, 1'000'000, kRounds,
              [&](int64_t i) {
                ours.GetCounter("bench_messages_total", "Messages.", {{"kind", kinds[i % 4]}})
                    .Increment();
              }),
      NsPerOp(1, 1'000'000, kRounds, [&](int64_t i) {
        prometheus::BuildCounter()
            .Name("bench_messages_total")
            .Help("Messages.")
            .Register(*theirs)
            .Add({{"kind", kinds[i % 4]}})
            .Increment();
      }));

  // One latency observation.
  auto& our_histogram = ours.GetHistogram("bench_latency_seconds", "Latency.");
  auto& their_histogram =
      prometheus::BuildHistogram().Name("bench_latency_seconds").Help("Latency.").Register(*theirs).Add(
          {}, prometheus::Histogram::BucketBoundaries(reverser::runtime::LatencyBuckets()));
  Row("histogram observe (1 thread)",
      NsPerOp(1, 2'000'000, kRounds, [&](int64_t i) { our_histogram.Observe(0.001 * (i % 500)); }),
      NsPerOp(1, 2'000'000, kRounds, [&](int64_t i) { their_histogram.Observe(0.001 * (i % 500)); }));

  // The scrape: 2,000 series (100 label values × 20 families).
  MetricsRegistry our_scrape;
  auto their_scrape = std::make_shared<prometheus::Registry>();
  for (int f = 0; f < 20; ++f) {
    const std::string name = absl::StrCat("bench_family_", f, "_total");
    auto& family = prometheus::BuildCounter().Name(name).Help("A family.").Register(*their_scrape);
    for (int v = 0; v < 100; ++v) {
      our_scrape.GetCounter(name, "A family.", {{"target", absl::StrCat("team/t", v)}}).Increment(v);
      family.Add({{"target", absl::StrCat("team/t", v)}}).Increment(v);
    }
  }
  size_t sink = 0;
  Row("render 2,000 series (per scrape)",
      NsPerOp(1, 200, kRounds, [&](int64_t) { sink += our_scrape.RenderText().size(); }),
      NsPerOp(1, 200, kRounds, [&](int64_t) {
        sink += prometheus::TextSerializer().Serialize(their_scrape->Collect()).size();
      }));
  std::printf("(rendered %zu bytes in all)\n", sink);
  return 0;
}
