#include "services/materializer/audit_metrics.h"

#include <string>

namespace reverser::materializer {

void AuditMetrics::CountList(absl::string_view outcome) {
  registry_
      ->GetCounter("gitopsreverser_audit_eventlists_total", "Audit EventList requests, by outcome.",
                   {{"outcome", std::string(outcome)}})
      .Increment();
}

void AuditMetrics::Answered(absl::string_view outcome, size_t items, absl::Duration took) {
  CountList(outcome);
  const runtime::Labels labels = {{"outcome", std::string(outcome)}};
  registry_
      ->GetHistogram("gitopsreverser_audit_eventlist_duration_seconds",
                     "Time to answer one audit EventList request, by outcome.", labels,
                     {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300})
      .Observe(absl::ToDoubleSeconds(took));
  if (outcome == "decode_error") return;
  registry_
      ->GetCounter("gitopsreverser_audit_eventlist_events_total",
                   "Audit event items carried by EventList requests, by the request's outcome.",
                   labels)
      .Increment(static_cast<double>(items));
}

void AuditMetrics::RefusedPath() { CountList("decode_error"); }

void AuditMetrics::BodyRefused(absl::string_view reason) {
  registry_
      ->GetCounter("reverser_materializer_audit_bodies_refused_total",
                   "Audit webhook bodies refused as a whole, by reason: malformed (broken "
                   "framing, or not an EventList), too_large, client_not_allowed (a CA-signed "
                   "certificate whose name is not in --audit_client_names).",
                   {{"reason", std::string(reason)}})
      .Increment();
}

void AuditMetrics::FactEvents(absl::string_view op, size_t events) {
  registry_
      ->GetCounter("gitopsreverser_attribution_fact_events_total",
                   "Author fact operations, by op: written (an event's facts), "
                   "deletecollection_expanded (a deletecollection's items as facts).",
                   {{"op", std::string(op)}})
      .Increment(static_cast<double>(events));
}

void AuditMetrics::FactIndexSize(int64_t keys) {
  registry_
      ->GetGauge("gitopsreverser_attribution_fact_index_size",
                 "Audit author fact keys held in Redis, counted after facts were written.")
      .Set(static_cast<double>(keys));
}

}  // namespace reverser::materializer
