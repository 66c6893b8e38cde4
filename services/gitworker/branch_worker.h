#pragma once

// The single writer of one branch (provider namespace, provider, branch): commit windows keyed
// by (author, GitTarget), pending writes retained until pushed, compare-and-swap pushes with a
// cooldown, fetch + hard reset + replay on conflict, and acks for what a push covered.
//
// Not thread-safe and blocking (Git I/O): the branch actor (branch_actor.h) owns one on its own
// thread and drives its timers. Time comes from an injectable clock.

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "libs/core/clock.h"
#include "libs/git/credentials.h"
#include "libs/git/repository.h"
#include "libs/git/ssh_signing.h"
#include "libs/gitignore/ignore_rules.h"
#include "libs/runtime/metrics.h"
#include "proto/reverser/v1/gitworker.pb.h"
#include "services/gitworker/acceptance_gate.h"
#include "services/gitworker/commit_requests.h"
#include "services/gitworker/refusal.h"
#include "services/gitworker/target_writer.h"
#include "services/gitworker/work_item.h"

namespace reverser::gitworker {

struct BranchKey {
  std::string provider_namespace;
  std::string provider_name;
  std::string branch;

  static BranchKey Of(const TargetSettings& settings);
  std::string ToString() const;  // "ns/provider@branch"
  auto operator<=>(const BranchKey&) const = default;
};

// Why an open commit window was closed (docs/behaviour.md, Window key and finalize reasons).
enum class FinalizeReason {
  kTimer,
  kAuthorOrTargetChange,
  kBufferLimit,
  kCommitWindowZero,
  kFinalizeSignal,
  kResyncBeforeApply,
  kShutdown,
};
absl::string_view FinalizeReasonName(FinalizeReason reason);

// Resolves a signing Secret ("namespace/name") to its key. Called before each commit of a
// signing target, so implementations cache; must be thread-safe (branch actors share one).
using SigningKeyResolver = std::function<absl::StatusOr<std::shared_ptr<const git::SshSigningKey>>(
    const std::string& secret)>;

struct BranchWorkerOptions {
  BranchKey key;
  std::string remote_url;
  git::GitCredentials credentials;
  std::string work_dir;                             // clones live under it (LocalClonePath)
  absl::Duration push_cooldown = absl::Seconds(5);  // between successful pushes
  absl::Duration retry_backoff = absl::Seconds(1);  // least wait after a failed push cycle
  size_t buffer_limit_bytes = 8 << 20;              // a window this large is finalized
  int max_push_attempts = 3;                        // per push cycle
  // Commits changing this many files or more (first mirror, big resyncs) write one pack.
  size_t pack_threshold = git::kDefaultPackThreshold;
  // Lock files in the clone older than this are a dead process's (work_dir.h WorkDirLock).
  absl::Time stale_lock_cutoff = absl::InfinitePast();
  // What is read from Git and rendered (file sizes, YAML per file, templates).
  WriterLimits limits;
  // Keys for targets whose GitProvider signs (TargetSettings::signing_secret). Every commit of
  // such a target is signed; without a key its writes wait (retried at the push cadence).
  SigningKeyResolver signing_keys;
  // Whether this replica may push the branch now (it owns it and holds its membership Lease,
  // branch_ownership.h); null: always. Looked at before every push cycle.
  std::function<bool()> may_push;
  // When set, decides instead of may_push: a grant held for the whole push cycle
  // (BranchOwnership::BeginWrite), null when the branch may not be pushed now; a loss of the
  // branch waits until it is released.
  std::function<std::shared_ptr<void>()> begin_push;
  const core::Clock* clock = &core::Clock::Real();
  runtime::MetricsRegistry* metrics = &runtime::MetricsRegistry::Global();
};

class BranchWorker {
 public:
  explicit BranchWorker(BranchWorkerOptions options);

  // Takes one item. An event joins the open window of its (author, GitTarget) — finalizing a
  // window of another author or target first — and finalizes it at once for window 0 or at the
  // buffer limit. A resync finalizes the open window, then becomes one reconcile write. Items
  // that can never be written are refused (refusal.h) and acked in order: whatever an item
  // holds (anything thrown while planning it refuses that item), it never stops the branch.
  void Add(WorkItem item);
  // Closes the open window (if any) into a pending write and commits it locally.
  void Finalize(FinalizeReason reason);
  // The silence timer armed for window generation `generation` fired.
  void OnWindowTimer(uint64_t generation);
  // Runs a push cycle when local writes wait and the cooldown allows (or `force`).
  void PushIfDue(bool force = false);
  // Finalize (shutdown) and push now.
  void Shutdown();

  // The open window's silence timer to arm after an Add: its generation and delay.
  std::optional<std::pair<uint64_t, absl::Duration>> WindowTimer() const;
  // When the next push cycle should run (nullopt: nothing waits for a push).
  std::optional<absl::Time> NextPushAt() const;
  // Items held (open window + pending writes not yet acked).
  size_t QueueDepth() const;
  // Sets gitopsreverser_branch_worker_queue_depth to QueueDepth() (after every change).
  void UpdateQueueGauge();
  reverser::v1::BranchStatus Status() const;

  // A CommitRequest registered (idempotent) on this branch: it binds to the open window of its
  // window key (now or when one opens), and its close delay finalizes that window
  // (commit_requests.h). Returns where it stands.
  CommitRequestView RegisterCommitRequest(const CommitRequestSpec& spec);
  // Where a registered CommitRequest stands (unknown: never registered or forgotten).
  CommitRequestView CommitRequest(const std::string& id) const;
  // Finalizes the windows of CommitRequests whose close delay passed, resolves the ones that
  // found no window, and forgets old outcomes. The actor calls it at CommitRequestDeadline().
  void OnCommitRequestTimer();
  std::optional<absl::Time> CommitRequestDeadline() const;
  // The username + "\n" + target key a window of that author and target is keyed by.
  static std::string WindowKey(const std::string& username, const std::string& target_key);

 private:
  enum class State { kUncommitted, kCommitted, kNoop, kPushed };
  enum class Kind { kWindow, kResync, kEmpty };
  struct Unit {
    uint64_t id = 0;
    Kind kind = Kind::kEmpty;
    State state = State::kUncommitted;
    std::shared_ptr<const TargetSettings> settings;
    std::string window_key;  // username + target key
    std::string username;
    commitmeta::Signature author;
    std::string author_kind;              // committer | user | serviceaccount
    std::vector<PlannedWrite> writes;     // first-seen order, last write per object wins
    std::map<DocumentKey, size_t> index;  // object → position in writes (objects share bundles)
    size_t bytes = 0;
    PreparedResync resync;
    std::string revision;
    std::optional<std::string> message_override;
    std::vector<Coverage> covers;
    bool counted = false;
    std::string sha;
    size_t events = 0;             // live events planned into this window
    bool rejected = false;         // its commit was refused (a resync: not applied)
    bool failure_counted = false;  // a resync counted in resync_background_failures_total
    // The acceptance gate refused its target's path: kept uncommitted (and unacked) until a
    // fetch shows the path clean; later units of the target wait behind it.
    bool held = false;
  };

  struct CachedIndex {
    std::optional<std::string> at;  // the commit the index describes
    IdentityIndex index;
    // The delivery streams told this index's refused files (each is told once per index).
    std::set<std::weak_ptr<FeedbackSink>, std::owner_less<std::weak_ptr<FeedbackSink>>> told;
    // The path's .gittargetignore at `at` (none: absent, or refused for `ignore_error`).
    std::optional<gitignore::IgnoreRules> ignore;
    std::string ignore_error;
  };
  // A target whose path the acceptance gate refuses (kept until it is accepted again and the
  // streams told of the refusal are told so).
  struct PathGate {
    std::vector<GateIssue> issues;
    reverser::v1::PathRefusal refusal;
    std::set<std::weak_ptr<FeedbackSink>, std::owner_less<std::weak_ptr<FeedbackSink>>> told;
  };

  void AddEvent(WorkItem item);
  void AddResync(WorkItem item);
  absl::Status EnsureRepo();
  // The document index of a unit's target path at `tip`, rebuilt when the branch moved under
  // it (newly refused files are refused then, once).
  absl::StatusOr<CachedIndex*> IndexFor(const Unit& unit, const std::optional<std::string>& tip);
  // Sends the index's refused files (complete, maybe none) to the unit's delivery streams that
  // were not told yet.
  void ReportRefusedFiles(const Unit& unit, CachedIndex& cached);
  // The gate's verdict on a unit's target path: a change of state is logged and counted once;
  // the unit's streams not yet told are told (a refusal, or its end to those told of it).
  void ReportPathGate(const Unit& unit, const std::vector<GateIssue>& issues);
  // Tells the unit's streams the standing refusal of its target's path (if not yet told).
  void TellPathGate(const Unit& unit);
  // Whether every unit waiting for a push is held by the gate (nothing to push but a recheck).
  bool OnlyHeldUnpushed() const;
  void CommitPending();
  absl::StatusOr<std::optional<std::string>> CommitUnit(Unit& unit,
                                                        const git::SshSigningKey* signer);
  // The commit message of a unit: a window's from its `changes`, a resync's reconcile message
  // counting `changed_documents`. A template that fails (its limits, an error on real data)
  // falls back to the default template's message, refused once per target and template.
  std::string MessageFor(const Unit& unit, const std::vector<commitmeta::ChangedResource>& changes,
                         int64_t changed_documents);
  void ReportTemplate(const Unit& unit, const std::string& kind, const std::string& text,
                      const absl::Status& status);
  // The key a unit's commit is signed with (null: its target does not sign).
  absl::StatusOr<std::shared_ptr<const git::SshSigningKey>> SignerFor(const Unit& unit);
  // Forgets the clone after its staged commits were lost (git::Repository::staging_lost): the
  // next cycle opens it again and commits every unpushed write again.
  void DropClone(const std::string& error);
  void RejectUnit(Unit& unit, const absl::Status& status);
  // Counts each pending resync, once, as a background failure (a commit or push cycle failed).
  void CountPendingResyncFailures();
  void Complete();
  void AttachCovers(std::vector<Coverage> covers);
  // Binds the oldest waiting CommitRequest of the open window's key to it.
  void BindCommitRequest();
  bool HasUnpushed() const;
  runtime::Labels BranchLabels() const;
  // After a fetch that found the remote tip `remote` where `ours` was expected: when `ours` is
  // not an ancestor of it (force-push, reset, deleted branch), says so and asks every target
  // of the branch to resync on top of the new tip.
  void NoteRewrittenHistory(const std::string& ours, const std::optional<std::string>& remote);

  BranchWorkerOptions options_;
  std::unique_ptr<git::Repository> repo_;
  std::optional<std::string> expected_remote_;  // CAS old value: the remote tip we build on
  // Every target this branch wrote for, with the stream its feedback last went to (targets
  // sharing the branch lose files to a rewritten history too, pending writes or not).
  struct KnownTarget {
    reverser::v1::GitTargetRef ref;
    std::weak_ptr<FeedbackSink> sink;
    // The last resync request, until the target's next item arrives: then it is sent again if
    // that item came on another stream (the first may have ended without carrying it).
    std::optional<reverser::v1::ResyncRequest> undelivered;
  };
  std::map<std::string, KnownTarget> targets_;
  std::map<std::string, CachedIndex> indexes_;  // target path → its documents
  // Refused blobs (blob id → refusal), so a branch that moves again does not read them again.
  std::map<std::string, IdentityIndex::RefusedFile> refused_blobs_;
  std::set<std::string> reported_files_;        // target, path and blob already refused
  std::set<std::string> reported_templates_;    // target, template kind and text already refused
  std::map<std::string, PathGate> path_gates_;  // by target key
  // (group, kind) each target delivered: its followed types, as far as this worker knows them.
  std::map<std::string, std::set<std::pair<std::string, std::string>>> followed_;
  absl::Time held_recheck_at_ = absl::InfinitePast();  // when held writes look at the remote again
  std::optional<Unit> window_;
  uint64_t window_generation_ = 0;
  std::deque<Unit> units_;
  uint64_t next_unit_id_ = 1;
  CommitRequestBook commit_requests_;
  absl::Time next_push_allowed_ = absl::InfinitePast();
  std::optional<absl::Time> last_push_;
  std::string last_error_;
  std::string signing_error_;  // the last signing key failure, logged once until it changes
};

}  // namespace reverser::gitworker
