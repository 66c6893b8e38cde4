#include "libs/runtime/metrics.h"

#include <cmath>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace reverser::runtime {
namespace {

void AtomicAdd(std::atomic<double>& target, double by) {
  double current = target.load();
  while (!target.compare_exchange_weak(current, current + by)) {
  }
}

std::string FormatValue(double v) {
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (std::isnan(v)) return "NaN";
  if (v == std::floor(v) && std::fabs(v) < 1e15) return absl::StrFormat("%.0f", v);
  return absl::StrFormat("%.17g", v);
}

std::string RenderLabels(const Labels& labels, const std::string& extra_key = "",
                         const std::string& extra_value = "") {
  if (labels.empty() && extra_key.empty()) return "";
  std::string out = "{";
  bool first = true;
  for (const auto& [k, v] : labels) {
    absl::StrAppend(&out, first ? "" : ",", k, "=\"", EscapeLabelValue(v), "\"");
    first = false;
  }
  if (!extra_key.empty()) {
    absl::StrAppend(&out, first ? "" : ",", extra_key, "=\"", extra_value, "\"");
  }
  out += "}";
  return out;
}

}  // namespace

void Counter::Increment(double by) {
  if (by < 0) return;  // counters only go up
  AtomicAdd(value_, by);
}

void Gauge::Add(double by) { AtomicAdd(value_, by); }

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(bounds_.size(), 0) {}

void Histogram::Observe(double value) {
  absl::MutexLock lock(&mu_);
  for (size_t i = 0; i < bounds_.size(); ++i) {
    if (value <= bounds_[i]) {
      ++counts_[i];
      break;
    }
  }
  ++count_;
  sum_ += value;
}

uint64_t Histogram::Count() const {
  absl::MutexLock lock(&mu_);
  return count_;
}

double Histogram::Sum() const {
  absl::MutexLock lock(&mu_);
  return sum_;
}

std::vector<uint64_t> Histogram::CumulativeCounts() const {
  absl::MutexLock lock(&mu_);
  std::vector<uint64_t> out(counts_.size());
  uint64_t running = 0;
  for (size_t i = 0; i < counts_.size(); ++i) {
    running += counts_[i];
    out[i] = running;
  }
  return out;
}

std::vector<double> LatencyBuckets() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
}

MetricsRegistry::Family& MetricsRegistry::FamilyFor(absl::string_view name, absl::string_view help,
                                                    Type type) {
  auto [it, inserted] = families_.try_emplace(std::string(name));
  if (inserted) {
    it->second.type = type;
    it->second.help = std::string(help);
  }
  return it->second;
}

Counter& MetricsRegistry::GetCounter(absl::string_view name, absl::string_view help,
                                     const Labels& labels) {
  absl::MutexLock lock(&mu_);
  auto& slot = FamilyFor(name, help, Type::kCounter).counters[labels];
  if (!slot) slot = std::make_unique<Counter>();
  return *slot;
}

Gauge& MetricsRegistry::GetGauge(absl::string_view name, absl::string_view help,
                                 const Labels& labels) {
  absl::MutexLock lock(&mu_);
  auto& slot = FamilyFor(name, help, Type::kGauge).gauges[labels];
  if (!slot) slot = std::make_unique<Gauge>();
  return *slot;
}

Histogram& MetricsRegistry::GetHistogram(absl::string_view name, absl::string_view help,
                                         const Labels& labels, const std::vector<double>& bounds) {
  absl::MutexLock lock(&mu_);
  auto& slot = FamilyFor(name, help, Type::kHistogram).histograms[labels];
  if (!slot) slot = std::make_unique<Histogram>(bounds);
  return *slot;
}

std::string MetricsRegistry::RenderText() const {
  absl::MutexLock lock(&mu_);
  std::string out;
  for (const auto& [name, family] : families_) {
    const char* type = family.type == Type::kCounter ? "counter"
                       : family.type == Type::kGauge ? "gauge"
                                                     : "histogram";
    absl::StrAppend(&out, "# HELP ", name, " ", family.help, "\n# TYPE ", name, " ", type, "\n");
    for (const auto& [labels, c] : family.counters) {
      absl::StrAppend(&out, name, RenderLabels(labels), " ", FormatValue(c->Value()), "\n");
    }
    for (const auto& [labels, g] : family.gauges) {
      absl::StrAppend(&out, name, RenderLabels(labels), " ", FormatValue(g->Value()), "\n");
    }
    for (const auto& [labels, h] : family.histograms) {
      auto cumulative = h->CumulativeCounts();
      for (size_t i = 0; i < h->bounds().size(); ++i) {
        absl::StrAppend(&out, name, "_bucket", RenderLabels(labels, "le", FormatValue(h->bounds()[i])),
                        " ", cumulative[i], "\n");
      }
      absl::StrAppend(&out, name, "_bucket", RenderLabels(labels, "le", "+Inf"), " ", h->Count(),
                      "\n");
      absl::StrAppend(&out, name, "_sum", RenderLabels(labels), " ", FormatValue(h->Sum()), "\n");
      absl::StrAppend(&out, name, "_count", RenderLabels(labels), " ", h->Count(), "\n");
    }
  }
  return out;
}

MetricsRegistry& MetricsRegistry::Global() {
  static MetricsRegistry* registry = new MetricsRegistry();
  return *registry;
}

std::string EscapeLabelValue(absl::string_view value) {
  std::string out;
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace reverser::runtime
