#include "services/splicer/splicer_metrics.h"

namespace reverser::splicer {

void SplicerMetrics::FactMatched() {
  registry_
      ->GetCounter("gitopsreverser_attribution_fact_events_total",
                   "Author fact operations, by op: matched (an event's author was found).",
                   {{"op", "matched"}})
      .Increment();
}

void SplicerMetrics::CursorResumed(const reverser::v1::GitTargetRef& target) {
  registry_
      ->GetCounter("gitopsreverser_target_reconcile_completed_total",
                   "Completed recovery passes per GitTarget and type, by trigger: cursor_resume (a "
                   "stream resumed from its cursor, splicer), type_reconcile (a resync applied, "
                   "gitworker).",
                   {{"gittarget_namespace", target.namespace_()},
                    {"gittarget_name", target.name()},
                    {"trigger", "cursor_resume"}})
      .Increment();
}

void SplicerMetrics::Streams(size_t streams) {
  registry_
      ->GetGauge("reverser_splicer_streams", "Splice streams (GitTarget × type × scope) running.")
      .Set(static_cast<double>(streams));
}

}  // namespace reverser::splicer
