#pragma once

// The splicer's attribution and stream metrics, with gitops-reverser v0.36.0's names and labels
// where it has them (docs/behaviour.md, Metrics), each declared once here. A thin view over a
// registry: cheap to construct where it is used.

#include <cstddef>
#include <string>

#include "libs/runtime/metrics.h"
#include "proto/reverser/v1/catalog.pb.h"

namespace reverser::splicer {

class SplicerMetrics {
 public:
  explicit SplicerMetrics(runtime::MetricsRegistry* registry) : registry_(registry) {}

  // An author fact found for an event and used as its author:
  // gitopsreverser_attribution_fact_events_total{op="matched"}.
  void FactMatched();
  // A stream resumed tailing from its delivery cursor, without a resync:
  // gitopsreverser_target_reconcile_completed_total{trigger="cursor_resume"}.
  void CursorResumed(const reverser::v1::GitTargetRef& target);
  // reverser_splicer_streams: splice streams (GitTarget × type × scope) running.
  void Streams(size_t streams);
  // reverser_splicer_fenced_writes_total: cursor writes refused because another splicer replica
  // took the GitTarget over (its fence is stale); each stops the target here.
  void FencedWrite();
  // reverser_splicer_reroutes_total{reason}: a target moved to another gitworker replica, because
  // the gitworker membership moved its branch (`membership`) or a replica answered NotOwner.
  void Rerouted(const std::string& reason);
  // reverser_splicer_owned_targets: GitTargets this replica splices (all of them without
  // --membership).
  void OwnedTargets(size_t targets);

 private:
  runtime::MetricsRegistry* registry_;
};

}  // namespace reverser::splicer
