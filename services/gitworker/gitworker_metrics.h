#pragma once

// The gitworker's resync, Git operation and Secret encryption metrics, with gitops-reverser
// v0.36.0's names and labels where it has them (docs/behaviour.md, Metrics), each declared once
// here. A thin view over a registry: cheap to construct where it is used.

#include <cstddef>

#include "absl/strings/string_view.h"
#include "libs/runtime/metrics.h"
#include "proto/reverser/v1/catalog.pb.h"

namespace reverser::gitworker {

class GitWorkerMetrics {
 public:
  explicit GitWorkerMetrics(runtime::MetricsRegistry* registry) : registry_(registry) {}

  // A resync applied for `target` (its commit pushed, or nothing to change):
  // gitopsreverser_target_reconcile_completed_total{trigger="type_reconcile"}.
  void ResyncApplied(const reverser::v1::GitTargetRef& target);
  // A resync whose apply failed after it was taken (commit refused, or a commit/push cycle failed
  // while it was pending): gitopsreverser_resync_background_failures_total.
  void ResyncFailed(const reverser::v1::GitTargetRef& target);
  // Live events that produced Git work in one commit: gitopsreverser_git_operations_total.
  void EventsCommitted(size_t events);
  // One libgit2 operation (fetch, push, commit): reverser_gitworker_git_operations_total.
  void GitOperation(absl::string_view operation);
  // A commit-and-push cycle of a branch that failed (local commits kept, retried after the
  // backoff): reverser_gitworker_push_failures_total{provider_namespace,provider_name,branch}.
  void PushCycleFailed(const runtime::Labels& branch);
  // The branch's history was rewritten under the worker (our last pushed commit is no longer
  // an ancestor of the remote tip): reverser_gitworker_history_rewritten_total{branch labels}.
  void HistoryRewritten(const runtime::Labels& branch);

  // Files under a target path its identity index took in when it was built, by outcome (read,
  // reused: taken by blob id from the previous index, unreadable, refused):
  // reverser_gitworker_index_files_total{outcome}.
  void IndexedFiles(absl::string_view outcome, size_t files);
  // The acceptance gate refused a target path (counted per issue, by issue kind, whenever the
  // path's issues change): reverser_gitworker_path_refusals_total{kind}.
  void PathRefused(absl::string_view kind);

  // gitopsreverser_secret_encryption_*_total: an encryption attempted (the cache had no file for
  // the object) and how it ended; a file reused from the cache counts as a cache hit and, as in
  // the reference, a marker skip (both always move together).
  void EncryptionAttempted();
  void EncryptionSucceeded();
  void EncryptionFailed();
  void EncryptionReused();

 private:
  void Count(absl::string_view name, absl::string_view help, const runtime::Labels& labels = {},
             double by = 1);

  runtime::MetricsRegistry* registry_;
};

}  // namespace reverser::gitworker
