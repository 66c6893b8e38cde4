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

void SplicerMetrics::FencedWrite() {
  registry_
      ->GetCounter("reverser_splicer_fenced_writes_total",
                   "Cursor writes refused because another splicer replica took the GitTarget over "
                   "(each stops the target on this replica).")
      .Increment();
}

void SplicerMetrics::Rerouted(const std::string& reason) {
  registry_
      ->GetCounter("reverser_splicer_reroutes_total",
                   "GitTargets moved to another gitworker replica, by reason: membership (the "
                   "gitworker members changed its branch's owner), not_owner (a replica said it "
                   "does not own the branch).",
                   {{"reason", reason}})
      .Increment();
}

void SplicerMetrics::OwnedTargets(size_t targets) {
  registry_
      ->GetGauge("reverser_splicer_owned_targets",
                 "GitTargets this splicer replica splices (every one without --membership).")
      .Set(static_cast<double>(targets));
}

}  // namespace reverser::splicer
