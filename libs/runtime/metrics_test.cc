#include "libs/runtime/metrics.h"

#include "gtest/gtest.h"

namespace reverser::runtime {
namespace {

TEST(MetricsTest, RendersCountersGaugesWithLabels) {
  MetricsRegistry registry;
  registry.GetCounter("audit_events_total", "Audit events.", {{"outcome", "queued"}}).Increment();
  registry.GetCounter("audit_events_total", "Audit events.", {{"outcome", "queued"}}).Increment(2);
  registry.GetCounter("audit_events_total", "Audit events.", {{"outcome", "dry_run"}}).Increment();
  registry.GetGauge("checkpoint_items", "Items.").Set(42);
  std::string text = registry.RenderText();
  EXPECT_NE(text.find("# HELP audit_events_total Audit events.\n# TYPE audit_events_total counter\n"),
            std::string::npos);
  EXPECT_NE(text.find("audit_events_total{outcome=\"queued\"} 3\n"), std::string::npos);
  EXPECT_NE(text.find("audit_events_total{outcome=\"dry_run\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("# TYPE checkpoint_items gauge\ncheckpoint_items 42\n"), std::string::npos);
}

TEST(MetricsTest, HistogramBucketsAreCumulative) {
  MetricsRegistry registry;
  auto& h = registry.GetHistogram("latency_seconds", "Latency.", {}, {0.1, 1});
  h.Observe(0.05);
  h.Observe(0.5);
  h.Observe(5);
  std::string text = registry.RenderText();
  EXPECT_NE(text.find("latency_seconds_bucket{le=\"0.10000000000000001\"} 1\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("latency_seconds_bucket{le=\"1\"} 2\n"), std::string::npos);
  EXPECT_NE(text.find("latency_seconds_bucket{le=\"+Inf\"} 3\n"), std::string::npos);
  EXPECT_NE(text.find("latency_seconds_count 3\n"), std::string::npos);
  EXPECT_NE(text.find("latency_seconds_sum 5.5499999999999998\n"), std::string::npos) << text;
}

TEST(MetricsTest, EscapesLabelValues) {
  EXPECT_EQ(EscapeLabelValue("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
  MetricsRegistry registry;
  registry.GetCounter("x_total", "X.", {{"name", "evil\"\n"}}).Increment();
  EXPECT_NE(registry.RenderText().find("x_total{name=\"evil\\\"\\n\"} 1"), std::string::npos);
}

TEST(MetricsTest, CountersNeverDecrease) {
  Counter c;
  c.Increment(2);
  c.Increment(-1);
  EXPECT_EQ(c.Value(), 2);
}

}  // namespace
}  // namespace reverser::runtime
