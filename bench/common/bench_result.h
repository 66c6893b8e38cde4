// Machine-readable bench results: one JSON object per figure, appended as one line to the file
// named by the environment variable REVERSER_BENCH_JSON (bench/run_all sets it; unset: nothing is
// written, the bench prints its prose only). The schema is shared with bench/bench_result.py:
//
//   {"bench": "materializer", "figure": "audit_events", "label": "...", "unit": "events/s",
//    "better": "higher", "samples": [...], "min": x, "median": x, "max": x,
//    "anchor": {"name": "...", "label": "...", "samples": [...], "min", "median", "max"} | null,
//    "ratio": median / anchor median | null, "ratio_samples": [per-round ratios],
//    "goal": {"text": "...", "on": "ratio" | "value", "op": ">=" | "<=", "value": x} | null,
//    "verdict": "met" | "not met" | "no goal", "timing": "how subject and anchor were timed",
//    "context": false}
//
// The verdict is the median (of the ratio, or of the value) against the goal; ratios are only
// ever between samples taken in the same run.
#pragma once

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"

namespace reverser::bench {

struct Stats {
  double min = 0, median = 0, max = 0;
};

inline Stats StatsOf(std::vector<double> samples) {
  Stats s;
  if (samples.empty()) return s;
  std::sort(samples.begin(), samples.end());
  s.min = samples.front();
  s.max = samples.back();
  const size_t n = samples.size();
  s.median = n % 2 == 1 ? samples[n / 2] : (samples[n / 2 - 1] + samples[n / 2]) / 2;
  return s;
}

inline double Median(const std::vector<double>& samples) { return StatsOf(samples).median; }

struct Series {
  std::string name;   // short key, e.g. "xadd_c50_p16"
  std::string label;  // what it is, for a reader
  std::vector<double> samples;
};

struct Goal {
  std::string text;  // as the issue names it, e.g. ">= 25 % of redis-benchmark XADD"
  std::string on;    // "ratio" or "value"
  std::string op;    // ">=" or "<="
  double value = 0;
};

struct Figure {
  std::string bench;
  std::string figure;
  std::string label;
  std::string unit;
  std::string better = "higher";  // or "lower"
  std::vector<double> samples;
  std::optional<Series> anchor;
  std::optional<Goal> goal;
  std::string timing;    // how subject and anchor were timed (the same way)
  bool context = false;  // printed beside a verdict, not a verdict of its own
  nlohmann::json extra = nlohmann::json::object();
};

inline nlohmann::json SeriesJson(const std::vector<double>& samples) {
  const Stats s = StatsOf(samples);
  return {{"samples", samples}, {"min", s.min}, {"median", s.median}, {"max", s.max}};
}

// The verdict and ratio of `f`, as written to the JSON line.
inline nlohmann::json FigureJson(const Figure& f) {
  nlohmann::json j = {{"bench", f.bench},    {"figure", f.figure}, {"label", f.label},
                      {"unit", f.unit},      {"better", f.better}, {"timing", f.timing},
                      {"context", f.context}};
  j.update(SeriesJson(f.samples));
  std::optional<double> ratio;
  if (f.anchor.has_value()) {
    nlohmann::json a = {{"name", f.anchor->name}, {"label", f.anchor->label}};
    a.update(SeriesJson(f.anchor->samples));
    j["anchor"] = a;
    const double anchor_median = Median(f.anchor->samples);
    if (anchor_median != 0) ratio = Median(f.samples) / anchor_median;
    std::vector<double> paired;
    for (size_t i = 0; i < std::min(f.samples.size(), f.anchor->samples.size()); ++i) {
      if (f.anchor->samples[i] != 0) paired.push_back(f.samples[i] / f.anchor->samples[i]);
    }
    j["ratio_samples"] = paired;
  } else {
    j["anchor"] = nullptr;
    j["ratio_samples"] = nlohmann::json::array();
  }
  j["ratio"] = ratio.has_value() ? nlohmann::json(*ratio) : nlohmann::json(nullptr);
  if (f.goal.has_value()) {
    j["goal"] = {
        {"text", f.goal->text}, {"on", f.goal->on}, {"op", f.goal->op}, {"value", f.goal->value}};
    std::optional<double> x = f.goal->on == "ratio" ? ratio : Median(f.samples);
    if (!x.has_value()) {
      j["verdict"] = "not met";
    } else {
      const bool met = f.goal->op == ">=" ? *x >= f.goal->value : *x <= f.goal->value;
      j["verdict"] = met ? "met" : "not met";
    }
  } else {
    j["goal"] = nullptr;
    j["verdict"] = "no goal";
  }
  if (!f.extra.empty()) j["extra"] = f.extra;
  return j;
}

// Appends `f` to $REVERSER_BENCH_JSON (if set) and returns its verdict ("met", "not met",
// "no goal").
inline std::string EmitFigure(const Figure& f) {
  nlohmann::json j = FigureJson(f);
  if (const char* path = std::getenv("REVERSER_BENCH_JSON"); path != nullptr && *path != '\0') {
    std::ofstream out(path, std::ios::app);
    out << j.dump() << "\n";
  }
  return j["verdict"].get<std::string>();
}

// Free-form data for the report's plots (e.g. RSS over time): {"bench", "series": name, "data"}.
inline void EmitSeries(const std::string& bench, const std::string& name,
                       const nlohmann::json& data) {
  if (const char* path = std::getenv("REVERSER_BENCH_JSON"); path != nullptr && *path != '\0') {
    std::ofstream out(path, std::ios::app);
    out << nlohmann::json({{"bench", bench}, {"series", name}, {"data", data}}).dump() << "\n";
  }
}

}  // namespace reverser::bench
