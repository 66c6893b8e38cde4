#pragma once

// A small Prometheus metrics registry: counters, gauges and histograms with labels, rendered in
// the Prometheus text exposition format (version 0.0.4). Thread-safe; updates are lock-free for
// a label set already seen.

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace reverser::runtime {

using Labels = std::vector<std::pair<std::string, std::string>>;

class Counter {
 public:
  void Increment(double by = 1.0);
  double Value() const { return value_.load(); }

 private:
  std::atomic<double> value_{0};
};

class Gauge {
 public:
  void Set(double value) { value_.store(value); }
  void Add(double by);
  double Value() const { return value_.load(); }

 private:
  std::atomic<double> value_{0};
};

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void Observe(double value);
  uint64_t Count() const;
  double Sum() const;
  // Cumulative counts per bound (the +Inf bucket is Count()).
  std::vector<uint64_t> CumulativeCounts() const;
  const std::vector<double>& bounds() const { return bounds_; }

 private:
  std::vector<double> bounds_;
  mutable absl::Mutex mu_;
  std::vector<uint64_t> counts_ ABSL_GUARDED_BY(mu_);
  uint64_t count_ ABSL_GUARDED_BY(mu_) = 0;
  double sum_ ABSL_GUARDED_BY(mu_) = 0;
};

// Default latency buckets in seconds (1 ms .. 60 s).
std::vector<double> LatencyBuckets();

class MetricsRegistry {
 public:
  // Returns the series for (name, labels), creating the family on first use. The same name must
  // always be used with the same type; `help` is taken from the first call.
  Counter& GetCounter(absl::string_view name, absl::string_view help, const Labels& labels = {});
  Gauge& GetGauge(absl::string_view name, absl::string_view help, const Labels& labels = {});
  Histogram& GetHistogram(absl::string_view name, absl::string_view help,
                          const Labels& labels = {},
                          const std::vector<double>& bounds = LatencyBuckets());

  // The whole registry in the Prometheus text format.
  std::string RenderText() const;

  // The process-wide registry the services use.
  static MetricsRegistry& Global();

 private:
  enum class Type { kCounter, kGauge, kHistogram };
  struct Family {
    Type type;
    std::string help;
    std::map<Labels, std::unique_ptr<Counter>> counters;
    std::map<Labels, std::unique_ptr<Gauge>> gauges;
    std::map<Labels, std::unique_ptr<Histogram>> histograms;
  };
  Family& FamilyFor(absl::string_view name, absl::string_view help, Type type)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  std::map<std::string, Family> families_ ABSL_GUARDED_BY(mu_);
};

// Escapes a label value for the text format (backslash, quote, newline).
std::string EscapeLabelValue(absl::string_view value);

}  // namespace reverser::runtime
