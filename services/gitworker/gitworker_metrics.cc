#include "services/gitworker/gitworker_metrics.h"

#include <string>

namespace reverser::gitworker {
namespace {

runtime::Labels TargetLabels(const reverser::v1::GitTargetRef& target) {
  return {{"gittarget_namespace", target.namespace_()}, {"gittarget_name", target.name()}};
}

}  // namespace

void GitWorkerMetrics::Count(absl::string_view name, absl::string_view help,
                             const runtime::Labels& labels, double by) {
  registry_->GetCounter(name, help, labels).Increment(by);
}

void GitWorkerMetrics::ResyncApplied(const reverser::v1::GitTargetRef& target) {
  runtime::Labels labels = TargetLabels(target);
  labels.emplace_back("trigger", "type_reconcile");
  Count("gitopsreverser_target_reconcile_completed_total",
        "Completed recovery passes per GitTarget and type, by trigger: type_reconcile (a resync "
        "applied, gitworker), cursor_resume (a stream resumed from its cursor, splicer).",
        labels);
}

void GitWorkerMetrics::ResyncFailed(const reverser::v1::GitTargetRef& target) {
  Count("gitopsreverser_resync_background_failures_total",
        "Resyncs whose apply failed after they were taken (commit refused, or a commit or push "
        "cycle failed while they were pending; once per resync).",
        TargetLabels(target));
}

void GitWorkerMetrics::EventsCommitted(size_t events) {
  Count("gitopsreverser_git_operations_total", "Live events that produced Git work in a commit.",
        {}, static_cast<double>(events));
}

void GitWorkerMetrics::PathRefused(absl::string_view kind) {
  Count("reverser_gitworker_path_refusals_total",
        "Issues the acceptance gate refused a target path for (counted when the path's issues "
        "change), by issue kind.",
        {{"kind", std::string(kind)}});
}

void GitWorkerMetrics::IndexedFiles(absl::string_view outcome, size_t files) {
  if (files == 0) return;
  Count("reverser_gitworker_index_files_total",
        "YAML files under target paths taken into an identity index, by outcome: read, reused "
        "(unchanged blob, not read again), unreadable (no YAML documents), refused (over a "
        "limit).",
        {{"outcome", std::string(outcome)}}, static_cast<double>(files));
}

void GitWorkerMetrics::GitOperation(absl::string_view operation) {
  Count("reverser_gitworker_git_operations_total", "Git operations, by kind: fetch, push, commit.",
        {{"operation", std::string(operation)}});
}

void GitWorkerMetrics::HistoryRewritten(const runtime::Labels& branch) {
  Count("reverser_gitworker_history_rewritten_total",
        "Times a branch's remote history was rewritten under the gitworker (force-push, reset, "
        "deleted branch); its targets are resynced.",
        branch);
}

void GitWorkerMetrics::PushCycleFailed(const runtime::Labels& branch) {
  Count("reverser_gitworker_push_failures_total",
        "Commit-and-push cycles of a branch that failed (fetch, commit or push; local commits "
        "are kept and the cycle is retried after the backoff).",
        branch);
}

void GitWorkerMetrics::EncryptionAttempted() {
  Count("gitopsreverser_secret_encryption_attempts_total",
        "Sensitive objects SOPS-encrypted (no cached file could be reused).");
}

void GitWorkerMetrics::EncryptionSucceeded() {
  Count("gitopsreverser_secret_encryption_success_total", "Encryptions that succeeded.");
}

void GitWorkerMetrics::EncryptionFailed() {
  Count("gitopsreverser_secret_encryption_failures_total",
        "Encryptions that failed (the object is refused, never written in plaintext).");
}

void GitWorkerMetrics::EncryptionReused() {
  Count("gitopsreverser_secret_encryption_cache_hits_total",
        "Encrypted files reused from the cache for an unchanged sensitive object.");
  Count("gitopsreverser_secret_encryption_marker_skips_total",
        "Encryptions skipped because the object was unchanged (equals the cache hits).");
}

}  // namespace reverser::gitworker
