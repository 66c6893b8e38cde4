#pragma once

// The audit webhook's request metrics, with gitops-reverser v0.36.0's names and labels, each
// declared once here (docs/behaviour.md, Metrics).

#include <cstdint>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "libs/runtime/metrics.h"

namespace reverser::materializer {

class AuditMetrics {
 public:
  explicit AuditMetrics(runtime::MetricsRegistry* registry) : registry_(registry) {}

  // One EventList request answered with `outcome` (processed, empty, decode_error,
  // process_error): gitopsreverser_audit_eventlists_total, and, once the body was read,
  // gitopsreverser_audit_eventlist_duration_seconds and the `items` it carried in
  // gitopsreverser_audit_eventlist_events_total (as the reference, no item sample for
  // decode_error: the items of a body that is not an EventList are not known).
  void Answered(absl::string_view outcome, size_t items, absl::Duration took);
  // A request refused on its path alone: counted, neither timed nor its items counted.
  void RefusedPath();
  // reverser_materializer_audit_bodies_refused_total{reason}: a body refused as a whole, for
  // `reason` malformed (400), too_large (413) or client_not_allowed (403).
  void BodyRefused(absl::string_view reason);

  // gitopsreverser_attribution_fact_events_total{op}: `events` whose facts were written (`written`,
  // or `deletecollection_expanded` for a deletecollection whose items became facts).
  void FactEvents(absl::string_view op, size_t events);
  // gitopsreverser_attribution_fact_index_size: the audit fact keys Redis holds.
  void FactIndexSize(int64_t keys);

 private:
  void CountList(absl::string_view outcome);

  runtime::MetricsRegistry* registry_;
};

}  // namespace reverser::materializer
