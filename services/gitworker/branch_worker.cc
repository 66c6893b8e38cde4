#include "services/gitworker/branch_worker.h"

#include <exception>
#include <functional>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "google/protobuf/util/time_util.h"
#include "libs/core/proto_convert.h"
#include "libs/core/status.h"
#include "libs/runtime/log.h"
#include "services/gitworker/gitworker_metrics.h"

namespace reverser::gitworker {
namespace {

// Bounds of the "reported once" memories (cleared when full: a refusal is then reported again).
constexpr size_t kMaxRemembered = 10000;

void Remember(std::set<std::string>& memory, const std::string& key) {
  if (memory.size() >= kMaxRemembered) memory.clear();
  memory.insert(key);
}

git::Identity IdentityAt(const commitmeta::Signature& signature, absl::Time when) {
  return {signature.name, signature.email, when, 0};
}

}  // namespace

BranchKey BranchKey::Of(const TargetSettings& settings) {
  return {settings.destination.provider_namespace(), settings.destination.provider_name(),
          settings.destination.branch()};
}

std::string BranchKey::ToString() const {
  return absl::StrCat(provider_namespace, "/", provider_name, "@", branch);
}

absl::string_view FinalizeReasonName(FinalizeReason reason) {
  switch (reason) {
    case FinalizeReason::kTimer:
      return "timer";
    case FinalizeReason::kAuthorOrTargetChange:
      return "author-or-target-change";
    case FinalizeReason::kBufferLimit:
      return "buffer-limit";
    case FinalizeReason::kCommitWindowZero:
      return "commit-window-zero";
    case FinalizeReason::kFinalizeSignal:
      return "finalize-signal";
    case FinalizeReason::kResyncBeforeApply:
      return "resync-before-apply";
    case FinalizeReason::kShutdown:
      return "shutdown";
  }
  return "unknown";
}

BranchWorker::BranchWorker(BranchWorkerOptions options) : options_(std::move(options)) {}

runtime::Labels BranchWorker::BranchLabels() const {
  return {{"provider_namespace", options_.key.provider_namespace},
          {"provider_name", options_.key.provider_name},
          {"branch", options_.key.branch}};
}

void BranchWorker::Add(WorkItem item) {
  // Whatever an item holds, it must not take the branch down: anything thrown while planning
  // it (a parser, an allocation) refuses that item only.
  std::vector<Coverage> covers = item.covers;
  for (const Coverage& cover : covers) {
    if (!cover.sink) continue;
    KnownTarget& known =
        targets_[absl::StrCat(cover.target.namespace_(), "/", cover.target.name())];
    known.ref = cover.target;
    if (known.undelivered.has_value()) {
      // A later item on the stream the request went to: that stream was up, so it carried it.
      // Another stream: the request's may have ended with it, so this one is asked too (a
      // second resync costs work, never correctness).
      if (cover.sink != known.sink.lock()) cover.sink->ResyncRequested(*known.undelivered);
      known.undelivered.reset();
    }
    known.sink = cover.sink;
  }
  RefusedSubject subject;  // the event's object (its identity only), or the resync as a whole
  const bool resync = item.kind == WorkItem::Kind::kResync;
  const reverser::v1::GitTargetRef target =
      item.settings ? item.settings->target : reverser::v1::GitTargetRef();
  if (item.kind == WorkItem::Kind::kEvent) {
    subject.object = item.event.object().ref();
    subject.kind = item.event.object().gvk().kind();
  }
  try {
    if (item.kind == WorkItem::Kind::kResync) {
      AddResync(std::move(item));
    } else {
      AddEvent(std::move(item));
    }
    return;
  } catch (const std::exception& e) {
    Refuse(covers, subject, reverser::v1::REFUSAL_REASON_RENDER_FAILED,
           absl::StrCat("internal error: ", e.what()), options_.metrics);
  } catch (...) {
    Refuse(covers, subject, reverser::v1::REFUSAL_REASON_RENDER_FAILED,
           "internal error: unknown exception", options_.metrics);
  }
  if (resync) GitWorkerMetrics(options_.metrics).ResyncFailed(target);
  AttachCovers(std::move(covers));
  UpdateQueueGauge();
}

void BranchWorker::AddResync(WorkItem item) {
  Finalize(FinalizeReason::kResyncBeforeApply);
  Unit unit;
  unit.id = next_unit_id_++;
  unit.kind = Kind::kResync;
  unit.settings = item.settings;
  unit.author = item.settings->committer;
  unit.author_kind = "committer";
  if (item.resync.revision() != 0) unit.revision = std::to_string(item.resync.revision());
  // The rendered files are all that is needed from here on: the snapshot is consumed as it
  // is rendered (a first mirror's snapshot is as large as its files).
  unit.resync = PrepareResync(*item.settings, std::move(item.resync), options_.limits);
  for (const PreparedResync::Refused& refused : unit.resync.refused) {
    Refuse(item.covers, refused.subject, refused.reason, refused.message, options_.metrics);
  }
  unit.covers = std::move(item.covers);
  units_.push_back(std::move(unit));
  CommitPending();
  Complete();
  UpdateQueueGauge();
}

void BranchWorker::AddEvent(WorkItem item) {
  auto planned = PlanEvent(*item.settings, item.event, options_.limits);
  if (!planned.ok()) {
    Refuse(item.covers, RefusedSubject::Object(item.event.object()),
           RefusalReasonOf(planned.status()), planned.status().message(), options_.metrics);
    AttachCovers(std::move(item.covers));
    return;
  }
  const auto& author_proto = item.event.author();
  std::string username = author_proto.username();
  std::string window_key = WindowKey(username, item.settings->TargetKey());
  if (window_.has_value() && window_->window_key != window_key) {
    Finalize(FinalizeReason::kAuthorOrTargetChange);
  }
  if (!window_.has_value()) {
    Unit unit;
    unit.id = next_unit_id_++;
    unit.kind = Kind::kWindow;
    unit.settings = item.settings;
    unit.window_key = window_key;
    unit.username = username;
    std::optional<commitmeta::Actor> actor;
    if (!username.empty()) {
      actor = commitmeta::Actor{username, author_proto.display_name(), author_proto.email()};
    }
    unit.author = commitmeta::AuthorFor(actor, item.settings->committer);
    unit.author_kind = username.empty()                    ? "committer"
                       : author_proto.is_service_account() ? "serviceaccount"
                                                           : "user";
    window_ = std::move(unit);
    BindCommitRequest();
  }
  ++window_generation_;
  Unit& window = *window_;
  window.settings = item.settings;  // the newest config of this target wins
  const size_t size = planned->content ? planned->content->size() : 0;
  if (auto it = window.index.find(planned->key); it != window.index.end()) {
    PlannedWrite& previous = window.writes[it->second];
    window.bytes -= previous.content ? previous.content->size() : 0;
    previous = std::move(*planned);
  } else {
    window.index[planned->key] = window.writes.size();
    window.writes.push_back(std::move(*planned));
  }
  window.bytes += size;
  ++window.events;
  for (Coverage& cover : item.covers) window.covers.push_back(std::move(cover));
  if (item.settings->commit_window <= absl::ZeroDuration()) {
    Finalize(FinalizeReason::kCommitWindowZero);
  } else if (window.bytes >= options_.buffer_limit_bytes) {
    Finalize(FinalizeReason::kBufferLimit);
  }
  UpdateQueueGauge();
}

void BranchWorker::AttachCovers(std::vector<Coverage> covers) {
  // A rejected item is acked in order: with the open window if there is one, else on its own.
  if (window_.has_value()) {
    for (Coverage& cover : covers) window_->covers.push_back(std::move(cover));
    return;
  }
  Unit unit;
  unit.id = next_unit_id_++;
  unit.kind = Kind::kEmpty;
  unit.state = State::kNoop;
  unit.covers = std::move(covers);
  units_.push_back(std::move(unit));
  Complete();
}

void BranchWorker::Finalize(FinalizeReason reason) {
  if (!window_.has_value()) return;
  runtime::LogDebug("window finalized", {{"branch", options_.key.ToString()},
                                         {"reason", std::string(FinalizeReasonName(reason))},
                                         {"writes", window_->writes.size()}});
  options_.metrics
      ->GetCounter("reverser_gitworker_windows_finalized_total",
                   "Commit windows closed, by reason.",
                   {{"reason", std::string(FinalizeReasonName(reason))}})
      .Increment();
  units_.push_back(std::move(*window_));
  window_.reset();
  CommitPending();
  Complete();
  UpdateQueueGauge();
}

void BranchWorker::OnWindowTimer(uint64_t generation) {
  if (window_.has_value() && generation == window_generation_) Finalize(FinalizeReason::kTimer);
}

std::optional<std::pair<uint64_t, absl::Duration>> BranchWorker::WindowTimer() const {
  if (!window_.has_value()) return std::nullopt;
  return std::make_pair(window_generation_, window_->settings->commit_window);
}

absl::Status BranchWorker::EnsureRepo() {
  if (repo_) return absl::OkStatus();
  auto count = [&](const char* operation) {
    GitWorkerMetrics(options_.metrics).GitOperation(operation);
  };
  git::RepositoryOptions repo_options;
  repo_options.local_path =
      git::LocalClonePath(options_.work_dir, options_.key.provider_namespace,
                          options_.key.provider_name, options_.key.branch, options_.remote_url);
  repo_options.remote_url = options_.remote_url;
  repo_options.credentials = options_.credentials;
  repo_options.pack_threshold = options_.pack_threshold;
  repo_options.stale_lock_cutoff = options_.stale_lock_cutoff;
  // A branch this replica never held gets a new clone seeded from one of its other clones of
  // the remote: its first fetch then sends only what that one lacks.
  repo_options.seed_from_siblings = true;
  // One commit per change: objects and the ref move in memory until the push (file creation,
  // not hashing or compression, is what bounds a loose-object commit).
  repo_options.stage_small_commits = true;
  const absl::Time open_started = absl::Now();
  ASSIGN_OR_RETURN(std::unique_ptr<git::Repository> repo, git::Repository::Open(repo_options));
  const absl::Time fetch_started = absl::Now();
  if (repo->stale_locks_removed() > 0) {
    runtime::LogWarning("removed lock files a killed process left in the branch clone",
                        {{"branch", options_.key.ToString()},
                         {"locks", static_cast<long long>(repo->stale_locks_removed())}});
  }
  count("fetch");
  // This clone writes one branch: only it and the default branch (a new branch's base) are
  // fetched (Repository::Fetch).
  RETURN_IF_ERROR(repo->Fetch(options_.key.branch));
  const absl::Duration fetch_took = absl::Now() - fetch_started;
  ASSIGN_OR_RETURN(git::BranchBase base, repo->ResolveBranchBase(options_.key.branch));
  RETURN_IF_ERROR(repo->ResetBranch(options_.key.branch, base.commit));
  ASSIGN_OR_RETURN(expected_remote_, repo->FetchedTip(options_.key.branch));
  if (base.from_default_branch) {
    runtime::LogInfo("branch starts from the default branch",
                     {{"branch", options_.key.ToString()}, {"from", base.from_branch}});
  }
  // The folder is a digest: this line says whose it is (never the URL, which may carry a token).
  runtime::LogInfo(
      "branch clone ready",
      {{"branch", options_.key.ToString()},
       {"clone", repo_options.local_path},
       {"seeded_refs", static_cast<long long>(repo->seeded_refs())},
       {"fetched_objects", static_cast<long long>(repo->last_fetch_received_objects())},
       {"open_ms", absl::ToInt64Milliseconds(fetch_started - open_started)},
       {"fetch_ms", absl::ToInt64Milliseconds(fetch_took)}});
  repo_ = std::move(repo);
  for (Unit& unit : units_) {
    if (unit.state != State::kPushed && unit.kind != Kind::kEmpty) unit.state = State::kUncommitted;
  }
  return absl::OkStatus();
}

absl::StatusOr<BranchWorker::CachedIndex*> BranchWorker::IndexFor(
    const Unit& unit, const std::optional<std::string>& tip) {
  const std::string& path = unit.settings->path;
  auto it = indexes_.find(path);
  if (it == indexes_.end() || it->second.at != tip) {
    const IndexLimits limits{options_.limits.max_file_bytes, options_.limits.yaml};
    std::optional<gitignore::IgnoreRules> ignore;
    std::string ignore_error;
    if (tip.has_value()) {
      // Read before anything else under the path: what it names is never read.
      const std::string file = path.empty() ? ".gittargetignore" : path + "/.gittargetignore";
      const gitignore::IgnoreLimits ignore_limits;
      auto blob = repo_->FileBlobId(*tip, file);
      if (!blob.ok()) {
        ignore_error = std::string(blob.status().message());
      } else if (blob->has_value()) {
        ASSIGN_OR_RETURN(uint64_t size, repo_->BlobSize(**blob));
        if (size > ignore_limits.max_bytes) {
          ignore_error =
              absl::StrCat(size, " bytes, more than the limit of ", ignore_limits.max_bytes);
        } else {
          ASSIGN_OR_RETURN(std::string text, repo_->ReadBlob(**blob));
          auto parsed = gitignore::IgnoreRules::Parse(text, ignore_limits);
          if (parsed.ok()) {
            ignore = *std::move(parsed);
          } else {
            ignore_error = std::string(parsed.status().message());
          }
        }
      }
    }
    // Files whose blobs the previous index of this path read are taken from it, not read.
    ASSIGN_OR_RETURN(IdentityIndex index,
                     IdentityIndex::Build(*repo_, tip, path, limits, &refused_blobs_,
                                          it == indexes_.end() ? nullptr : &it->second.index,
                                          ignore.has_value() ? &*ignore : nullptr));
    const IdentityIndex::BuildStats& stats = index.stats();
    runtime::LogInfo("target path indexed", {{"branch", options_.key.ToString()},
                                             {"target", unit.settings->TargetKey()},
                                             {"files_read", stats.files_read},
                                             {"files_reused", stats.files_reused},
                                             {"files_unreadable", stats.unreadable},
                                             {"files_refused", stats.refused},
                                             {"documents", stats.documents}});
    GitWorkerMetrics metrics(options_.metrics);
    metrics.IndexedFiles("read", stats.files_read);
    metrics.IndexedFiles("reused", stats.files_reused);
    metrics.IndexedFiles("unreadable", stats.unreadable);
    metrics.IndexedFiles("refused", stats.refused);
    Coverage target;  // names the target in the log; the files travel in ReportRefusedFiles
    target.target = unit.settings->target;
    for (const auto& [file, refused] : index.refused_files()) {
      if (refused.blob_id.empty()) continue;
      if (refused_blobs_.size() >= kMaxRemembered) refused_blobs_.clear();
      refused_blobs_.emplace(refused.blob_id, refused);
      // Once per target, path and content, however often the branch moves.
      const std::string key =
          absl::StrCat(unit.settings->TargetKey(), "\n", file, "\n", refused.blob_id);
      if (reported_files_.count(key)) continue;
      Remember(reported_files_, key);
      Refuse({target}, RefusedSubject::File(file), refused.reason, refused.message,
             options_.metrics);
    }
    it = indexes_
             .insert_or_assign(
                 path,
                 CachedIndex{tip, std::move(index), {}, std::move(ignore), std::move(ignore_error)})
             .first;
  }
  return &it->second;
}

void BranchWorker::ReportRefusedFiles(const Unit& unit, CachedIndex& cached) {
  std::optional<reverser::v1::RefusedFiles> files;
  for (const Coverage& cover : unit.covers) {
    if (!cover.sink || !cached.told.insert(cover.sink).second) continue;
    if (!files.has_value()) {
      files.emplace();
      *files->mutable_target() = unit.settings->target;
      for (const auto& [file, refused] : cached.index.refused_files()) {
        auto* refusal = files->add_refusals();
        *refusal->mutable_target() = unit.settings->target;
        refusal->set_file(file);
        refusal->set_reason(refused.reason);
        refusal->set_message(refused.message);
      }
    }
    cover.sink->RefusedFiles(*files);
  }
}

void BranchWorker::ReportPathGate(const Unit& unit, const std::vector<GateIssue>& issues) {
  const std::string key = unit.settings->TargetKey();
  auto it = path_gates_.find(key);
  if (issues.empty()) {
    if (it == path_gates_.end()) return;
    // Accepted again: every stream told of the refusal (and this unit's) hears it ended.
    reverser::v1::PathRefusal accepted;
    *accepted.mutable_target() = unit.settings->target;
    accepted.set_path(unit.settings->path);
    auto told = std::move(it->second.told);
    for (const Coverage& cover : unit.covers) {
      if (cover.sink) told.insert(cover.sink);
    }
    for (const auto& weak : told) {
      if (auto sink = weak.lock()) sink->PathRefused(accepted);
    }
    runtime::LogInfo(
        "git path accepted",
        {{"branch", options_.key.ToString()}, {"target", key}, {"path", unit.settings->path}});
    path_gates_.erase(it);
    return;
  }
  if (it == path_gates_.end() || it->second.issues != issues) {
    PathGate gate;
    gate.issues = issues;
    reverser::v1::PathRefusal& refusal = gate.refusal;
    *refusal.mutable_target() = unit.settings->target;
    refusal.set_path(unit.settings->path);
    refusal.set_reason(GitPathReason(issues));
    refusal.set_message(GitPathMessage(unit.settings->path, issues));
    refusal.set_issue_count(static_cast<uint32_t>(issues.size()));
    constexpr size_t kSentIssues = 10;  // the rest are counted (a path may hold thousands)
    GitWorkerMetrics metrics(options_.metrics);
    for (size_t i = 0; i < issues.size(); ++i) {
      metrics.PathRefused(IssueKindName(issues[i].kind));
      if (i >= kSentIssues) continue;
      auto* issue = refusal.add_issues();
      issue->set_kind(std::string(IssueKindName(issues[i].kind)));
      issue->set_text(issues[i].text);
    }
    runtime::LogWarning("git path refused; its writes wait", {{"branch", options_.key.ToString()},
                                                              {"target", key},
                                                              {"path", unit.settings->path},
                                                              {"reason", refusal.reason()},
                                                              {"issues", issues.size()},
                                                              {"message", refusal.message()}});
    it = path_gates_.insert_or_assign(key, std::move(gate)).first;
  }
  TellPathGate(unit);
}

void BranchWorker::TellPathGate(const Unit& unit) {
  auto it = path_gates_.find(unit.settings->TargetKey());
  if (it == path_gates_.end()) return;
  for (const Coverage& cover : unit.covers) {
    if (cover.sink && it->second.told.insert(cover.sink).second) {
      cover.sink->PathRefused(it->second.refusal);
    }
  }
}

bool BranchWorker::OnlyHeldUnpushed() const {
  bool held = false;
  for (const Unit& unit : units_) {
    if (unit.state != State::kUncommitted && unit.state != State::kCommitted) continue;
    if (!unit.held) return false;
    held = true;
  }
  return held;
}

void BranchWorker::CommitPending() {
  // While the remote is unreachable, reconnect at the push cadence, not on every event.
  if (!repo_ && options_.clock->Now() < next_push_allowed_) return;
  if (auto s = EnsureRepo(); !s.ok()) {
    next_push_allowed_ =
        options_.clock->Now() + std::max(options_.push_cooldown, options_.retry_backoff);
    last_error_ = std::string(s.message());
    runtime::LogWarning("branch clone not ready",
                        {{"branch", options_.key.ToString()}, {"error", last_error_}});
    CountPendingResyncFailures();
    return;
  }
  std::set<std::string> held;  // targets whose path the gate refused in this pass
  for (Unit& unit : units_) {
    if (unit.state != State::kUncommitted) continue;
    // Behind a held write of its target: never written before it (the order of a target).
    if (unit.settings && held.count(unit.settings->TargetKey())) {
      unit.held = true;
      TellPathGate(unit);
      continue;
    }
    unit.held = false;
    auto signer = SignerFor(unit);
    if (!signer.ok()) {
      // Never unsigned on a signing target: this write and every later one wait for the key.
      last_error_ = std::string(signer.status().message());
      next_push_allowed_ =
          options_.clock->Now() + std::max(options_.push_cooldown, options_.retry_backoff);
      options_.metrics
          ->GetCounter("reverser_gitworker_signing_key_unavailable_total",
                       "Commit attempts held back because the signing key could not be read.",
                       BranchLabels())
          .Increment();
      if (signing_error_ != last_error_) {
        signing_error_ = last_error_;
        runtime::LogWarning("signing key unavailable; commits wait",
                            {{"branch", options_.key.ToString()},
                             {"secret", unit.settings->signing_secret},
                             {"error", last_error_}});
      }
      break;
    }
    if (!signing_error_.empty() && *signer) {
      runtime::LogInfo("signing key available", {{"branch", options_.key.ToString()},
                                                 {"secret", unit.settings->signing_secret}});
      signing_error_.clear();
    }
    absl::StatusOr<std::optional<std::string>> sha = std::nullopt;
    try {
      sha = CommitUnit(unit, signer->get());
    } catch (const std::exception& e) {
      sha = absl::InternalError(absl::StrCat("internal error: ", e.what()));
    } catch (...) {
      sha = absl::InternalError("internal error: unknown exception");
    }
    if (!sha.ok()) {
      if (repo_->staging_lost()) return DropClone(std::string(sha.status().message()));
      RejectUnit(unit, sha.status());
      continue;
    }
    if (unit.held) {
      held.insert(unit.settings->TargetKey());
      continue;
    }
    unit.state = sha->has_value() ? State::kCommitted : State::kNoop;
    unit.sha = sha->value_or("");
  }
  // Held writes look at the remote again at the retry cadence (a person fixes the path with a
  // push; the push cycle sees the branch moved and replays them on it).
  if (!held.empty()) {
    held_recheck_at_ =
        options_.clock->Now() + std::max(options_.push_cooldown, options_.retry_backoff);
  }
}

void BranchWorker::DropClone(const std::string& error) {
  last_error_ = error;
  runtime::LogWarning("staged commits lost; the clone is opened again",
                      {{"branch", options_.key.ToString()}, {"error", error}});
  repo_.reset();
  next_push_allowed_ =
      options_.clock->Now() + std::max(options_.push_cooldown, options_.retry_backoff);
}

void BranchWorker::RejectUnit(Unit& unit, const absl::Status& status) {
  // A write the tree refuses (a path through a symlink, a file/directory clash, a template
  // that cannot render) fails the same way on every replay: drop it, report it, ack past it.
  // Each object of a window is refused on its own covers; a resync as a whole.
  const std::string message = absl::StrCat("commit refused: ", status.message());
  const auto reason = RefusalReasonOf(status, reverser::v1::REFUSAL_REASON_COMMIT_REFUSED);
  std::map<std::string, std::vector<Coverage>> by_object;
  for (const Coverage& cover : unit.covers) {
    by_object[absl::StrCat(cover.object.gvr().group(), "/", cover.object.gvr().resource(), "|",
                           cover.object.namespace_(), "/", cover.object.name())]
        .push_back(cover);
  }
  for (const auto& [key, covers] : by_object) {
    Refuse(covers, RefusedSubject::OfCover(covers.front()), reason, message, options_.metrics);
  }
  unit.state = State::kNoop;
  unit.rejected = true;
  if (unit.kind == Kind::kResync && !unit.failure_counted) {
    unit.failure_counted = true;
    GitWorkerMetrics(options_.metrics).ResyncFailed(unit.settings->target);
  }
}

void BranchWorker::CountPendingResyncFailures() {
  for (Unit& unit : units_) {
    if (unit.kind != Kind::kResync || unit.state == State::kPushed || unit.failure_counted) {
      continue;
    }
    unit.failure_counted = true;
    GitWorkerMetrics(options_.metrics).ResyncFailed(unit.settings->target);
  }
}

std::string BranchWorker::MessageFor(const Unit& unit,
                                     const std::vector<commitmeta::ChangedResource>& changes,
                                     int64_t changed_documents) {
  const TargetSettings& settings = *unit.settings;
  if (unit.message_override.has_value()) return *unit.message_override;
  absl::StatusOr<std::string> message;
  std::string kind, text;
  commitmeta::ReconcileMessageData data;
  if (unit.kind == Kind::kWindow) {
    kind = commitmeta::WindowTemplateKind(changes);
    text = kind == "event" ? settings.templates.event : settings.templates.group;
    const std::string author = unit.username.empty() ? settings.committer.name : unit.username;
    message = commitmeta::RenderWindowMessage(settings.templates, author, settings.target.name(),
                                              changes, options_.limits.templates);
    if (message.ok()) return *message;
    const absl::Status failed = message.status();
    message = commitmeta::RenderWindowMessage({}, author, settings.target.name(), changes);
    message.status().IgnoreError();
    ReportTemplate(unit, kind, text, failed);
  } else {
    data.count = changed_documents;
    data.git_target = settings.target.name();
    data.scope = unit.resync.gvr;
    data.revision = unit.revision;
    text = settings.templates.reconcile;
    message = commitmeta::RenderReconcileMessage(text, data, options_.limits.templates);
    if (message.ok()) return *message;
    const absl::Status failed = message.status();
    message = commitmeta::RenderReconcileMessage(commitmeta::kDefaultReconcileTemplate, data);
    ReportTemplate(unit, "reconcile", text, failed);
  }
  // The defaults cannot fail on our own data; should they, a commit still needs a message.
  return message.ok() ? *message : std::string("reverser: commit");
}

void BranchWorker::ReportTemplate(const Unit& unit, const std::string& kind,
                                  const std::string& text, const absl::Status& status) {
  const std::string key =
      absl::StrCat(unit.settings->TargetKey(), "\n", kind, "\n", std::hash<std::string>()(text));
  if (reported_templates_.count(key)) return;
  Remember(reported_templates_, key);
  options_.metrics
      ->GetCounter("reverser_gitworker_template_fallbacks_total",
                   "Commit templates that failed and were replaced by the default template "
                   "(once per target and template).",
                   {{"template", kind}})
      .Increment();
  // About the target, not each delivery: told to the unit's first stream position only.
  std::vector<Coverage> covers;
  if (!unit.covers.empty()) covers.push_back(unit.covers.front());
  if (covers.empty()) covers.emplace_back().target = unit.settings->target;
  Refuse(covers, RefusedSubject::Message(),
         RefusalReasonOf(status, reverser::v1::REFUSAL_REASON_RENDER_FAILED),
         absl::StrCat(kind, " commit template failed, the default template's message is used: ",
                      status.message()),
         options_.metrics);
}

absl::StatusOr<std::shared_ptr<const git::SshSigningKey>> BranchWorker::SignerFor(
    const Unit& unit) {
  if (unit.kind == Kind::kEmpty || !unit.settings || unit.settings->signing_secret.empty()) {
    return nullptr;
  }
  const std::string& secret = unit.settings->signing_secret;
  if (!options_.signing_keys) {
    return absl::FailedPreconditionError(absl::StrCat(
        "GitProvider signs commits with Secret ", secret,
        " but no Secret source is configured (--credentials_dir or --secrets_source=api)"));
  }
  auto key = options_.signing_keys(secret);
  if (!key.ok()) {
    return core::Annotate(key.status(), absl::StrCat("signing key from Secret ", secret, ": "));
  }
  if (*key == nullptr) return absl::InternalError("the signing key resolver returned no key");
  return key;
}

absl::StatusOr<std::optional<std::string>> BranchWorker::CommitUnit(
    Unit& unit, const git::SshSigningKey* signer) {
  if (unit.kind == Kind::kEmpty) return std::optional<std::string>();
  const TargetSettings& settings = *unit.settings;
  const std::string& branch = options_.key.branch;
  ASSIGN_OR_RETURN(std::optional<std::string> tip, repo_->LocalTip(branch));
  ASSIGN_OR_RETURN(CachedIndex * cached, IndexFor(unit, tip));
  ReportRefusedFiles(unit, *cached);
  const IdentityIndex* index = &cached->index;
  const BlobReader read = [this](const std::string& blob_id) { return repo_->ReadBlob(blob_id); };
  const IndexLimits limits{options_.limits.max_file_bytes, options_.limits.yaml};
  git::ChangeSet changes;
  std::map<std::string, FileDocuments> documents;  // of the files written
  int64_t effective = 0;                           // documents created, updated or deleted
  size_t objects_written = 0;
  std::vector<commitmeta::ChangedResource> resources;  // of a window
  std::vector<std::pair<DocumentKey, std::string>> swept;
  // A write the documents in Git refuse (its file is refused or unreadable, the edited file
  // would exceed the limits): that object is refused, the rest of the unit goes on.
  auto refuse_write = [&](const DocumentKey& key, const absl::Status& status,
                          const std::vector<Coverage>& covers,
                          const core::GroupVersionResource& gvr) {
    RefusedSubject subject;
    *subject.object.mutable_gvr() = core::ToProto(gvr);
    subject.object.set_namespace_(key.namespace_);
    subject.object.set_name(key.name);
    subject.kind = key.kind;
    if (!covers.empty() && !covers.front().object.name().empty()) {
      subject = RefusedSubject::OfCover(covers.front());
    }
    Refuse(covers, subject, RefusalReasonOf(status, reverser::v1::REFUSAL_REASON_COMMIT_REFUSED),
           status.message(), options_.metrics);
  };
  // The plan first, then the acceptance gate over it and the path: a refused path gets nothing
  // (no object refusals either: the whole write waits).
  std::optional<WindowChanges> planned_window;
  std::optional<ResyncChanges> planned_resync;
  GateInput gate;
  auto& followed = followed_[settings.TargetKey()];
  if (unit.kind == Kind::kWindow) {
    // Match-first: an existing document is edited (or deleted) in the file it lives in.
    planned_window = PlanWindowChanges(*index, unit.writes, read, limits);
    for (const PlannedWrite& write : unit.writes) {
      followed.insert({write.key.group, write.key.kind});
      gate.writes.push_back({write.key, write.path, !write.content.has_value(), write.sensitive});
    }
    for (const auto& [path, content] : planned_window->changes) gate.changed_files.push_back(path);
  } else {
    planned_resync = PlanResyncChanges(*index, unit.resync, read, limits);
    if (!unit.resync.kind.empty()) followed.insert({unit.resync.gvr.group, unit.resync.kind});
    for (const PreparedResync::Upsert& upsert : unit.resync.upserts) {
      gate.writes.push_back({upsert.key, upsert.path, false, upsert.sensitive});
    }
    for (const auto& [path, content] : planned_resync->changes) gate.changed_files.push_back(path);
  }
  gate.index = index;
  gate.followed = &followed;
  gate.ignore.rules = cached->ignore.has_value() ? &*cached->ignore : nullptr;
  gate.ignore.error = cached->ignore_error;
  // Kustomizations are read within the limits every file read from Git has.
  gate.read_blob = [this](const std::string& blob_id) -> absl::StatusOr<std::string> {
    ASSIGN_OR_RETURN(uint64_t size, repo_->BlobSize(blob_id));
    if (size > options_.limits.max_file_bytes) {
      return absl::ResourceExhaustedError(
          absl::StrCat(size, " bytes, more than the limit of ", options_.limits.max_file_bytes));
    }
    return repo_->ReadBlob(blob_id);
  };
  gate.yaml_limits = options_.limits.yaml;
  const std::vector<GateIssue> issues = CheckPath(gate);
  ReportPathGate(unit, issues);
  if (!issues.empty()) {
    unit.held = true;
    return std::optional<std::string>();
  }

  if (unit.kind == Kind::kWindow) {
    WindowChanges& window = *planned_window;
    for (size_t i = 0; i < unit.writes.size(); ++i) {
      const PlannedWrite& write = unit.writes[i];
      if (auto refused = window.refused.find(i); refused != window.refused.end()) {
        std::vector<Coverage> covers;
        for (const Coverage& cover : unit.covers) {
          if (cover.object.gvr().group() == write.key.group &&
              cover.object.namespace_() == write.key.namespace_ &&
              cover.object.name() == write.key.name) {
            covers.push_back(cover);
          }
        }
        refuse_write(write.key, refused->second, covers, write.change.gvr);
        continue;
      }
      resources.push_back(write.change);
    }
    if (resources.empty() && !unit.writes.empty()) return std::optional<std::string>();
    changes = std::move(window.changes);
    documents = std::move(window.documents);
    effective = window.changed_documents;
    objects_written = resources.size();
  } else {
    ResyncChanges& resync = *planned_resync;
    for (const RefusedChange& refused : resync.refused) {
      refuse_write(refused.key, refused.status, unit.covers, unit.resync.gvr);
    }
    changes = std::move(resync.changes);
    documents = std::move(resync.documents);
    swept = std::move(resync.swept);
    effective = resync.changed_documents;
    objects_written = resync.written + swept.size();
  }

  // The documents this commit really creates, updates or deletes: a resync's subject counts
  // them (unchanged desired objects are not), and only a commit that has some carries the
  // bootstrap files, so re-delivering unchanged content still commits nothing.
  const std::string message = MessageFor(unit, resources, effective);
  // Each bootstrap file missing under the target path is (re-)added by every such commit — also
  // a `.sops.yaml` once age recipients are configured later. Existing files are never replaced;
  // a path that cannot be probed (say, a directory of that name) is left alone.
  if (effective > 0) {
    for (const auto& [path, content] : BootstrapFiles(settings)) {
      if (changes.count(path)) continue;
      // Never written where the path's .gittargetignore says reverser must not.
      if (cached->ignore.has_value() &&
          cached->ignore->Ignored(absl::string_view(path).substr(
              settings.path.empty() ? 0 : settings.path.size() + 1))) {
        continue;
      }
      absl::StatusOr<std::optional<std::string>> existing = std::optional<std::string>();
      if (tip.has_value()) existing = repo_->FileBlobId(*tip, path);
      if (existing.ok() && !existing->has_value()) changes[path] = content;
    }
  }

  const absl::Time now = options_.clock->Now();
  git::CommitSpec spec{IdentityAt(unit.author, now), IdentityAt(settings.committer, now), message,
                       signer};
  ASSIGN_OR_RETURN(std::optional<std::string> sha, repo_->CommitOnBranch(branch, changes, spec));
  if (sha.has_value()) {
    // Every index that described the old tip now describes the new one (taking `documents`
    // over).
    for (auto& [path, cached] : indexes_) {
      if (cached.at != tip) continue;
      cached.index.Apply(changes, &documents);
      cached.at = *sha;
    }
  }
  if (sha.has_value() && !unit.counted) {
    unit.counted = true;
    runtime::Labels labels = BranchLabels();
    labels.push_back({"author_kind", unit.author_kind});
    options_.metrics
        ->GetCounter("gitopsreverser_commits_total", "Commits created, by branch and author kind.",
                     labels)
        .Increment();
    GitWorkerMetrics metrics(options_.metrics);
    metrics.GitOperation("commit");
    if (unit.kind == Kind::kWindow) metrics.EventsCommitted(unit.events);
    options_.metrics
        ->GetCounter("gitopsreverser_objects_written_total",
                     "Object files written or deleted by commits.")
        .Increment(static_cast<double>(objects_written));
    if (!swept.empty()) {
      options_.metrics
          ->GetCounter("gitopsreverser_resync_sweep_deletes_total",
                       "Documents deleted by resync mark-and-sweep.",
                       {{"group", unit.resync.gvr.group},
                        {"version", unit.resync.gvr.version},
                        {"resource", unit.resync.gvr.resource}})
          .Increment(static_cast<double>(swept.size()));
    }
  }
  return sha;
}

bool BranchWorker::HasUnpushed() const {
  for (const Unit& unit : units_) {
    if (unit.state == State::kUncommitted || unit.state == State::kCommitted) return true;
  }
  return false;
}

std::optional<absl::Time> BranchWorker::NextPushAt() const {
  if (!HasUnpushed()) return std::nullopt;
  if (OnlyHeldUnpushed()) return std::max(next_push_allowed_, held_recheck_at_);
  return next_push_allowed_;
}

void BranchWorker::PushIfDue(bool force) {
  if (!HasUnpushed()) return;
  const absl::Time now = options_.clock->Now();
  if (!force && now < next_push_allowed_) return;
  // The grant (owned, Lease held, not being revoked) is held until the cycle and its "pushed"
  // line are done; without one, may_push alone decides.
  std::shared_ptr<void> grant;
  const bool refused = options_.begin_push ? (grant = options_.begin_push()) == nullptr
                                           : options_.may_push && !options_.may_push();
  if (refused) {
    // Not the owner (or the membership Lease is not held): nothing is pushed; the branch actor
    // is abandoned once the ownership change is published.
    last_error_ = "not the owner of this branch (or its membership Lease is not held)";
    next_push_allowed_ = now + std::max(options_.push_cooldown, options_.retry_backoff);
    return;
  }
  auto fail = [&](const std::string& error) {
    // Staged commits that could not be written are gone: the clone is opened (and fetched and
    // reset) again, and every unpushed write is committed again.
    if (repo_ && repo_->staging_lost()) repo_.reset();
    last_error_ = error;
    next_push_allowed_ =
        options_.clock->Now() + std::max(options_.push_cooldown, options_.retry_backoff);
    runtime::LogWarning("push cycle failed; local commits kept",
                        {{"branch", options_.key.ToString()}, {"error", error}});
    GitWorkerMetrics(options_.metrics).PushCycleFailed(BranchLabels());
    CountPendingResyncFailures();
  };
  auto count = [&](const char* operation) {
    GitWorkerMetrics(options_.metrics).GitOperation(operation);
  };
  if (auto s = EnsureRepo(); !s.ok()) return fail(std::string(s.message()));
  CommitPending();
  const std::string& branch = options_.key.branch;
  for (int attempt = 1; attempt <= options_.max_push_attempts; ++attempt) {
    auto tip = repo_->LocalTip(branch);
    if (!tip.ok()) return fail(std::string(tip.status().message()));
    if (!tip->has_value()) {
      // Nothing was ever committed on an empty remote: every pending write was a no-op.
      for (Unit& unit : units_) {
        if (unit.state == State::kCommitted) unit.state = State::kNoop;
      }
      Complete();
      return;
    }
    count("push");
    auto result = repo_->Push(branch, **tip, expected_remote_);
    if (!result.ok()) return fail(std::string(result.status().message()));
    if (result->outcome == git::PushOutcome::kPushed ||
        result->outcome == git::PushOutcome::kUpToDate) {
      expected_remote_ = **tip;
      const absl::Time now = options_.clock->Now();
      // "Up to date" moved nothing (e.g. only writes held by the gate wait): the branch's last
      // push stays the last one that did.
      if (result->outcome == git::PushOutcome::kPushed) {
        last_push_ = now;
        // Which replica published which tip: with replicas, the audit trail of ownership.
        runtime::LogInfo("pushed", {{"branch", options_.key.ToString()}, {"commit", **tip}});
      }
      next_push_allowed_ = now + options_.push_cooldown;
      last_error_.clear();
      for (Unit& unit : units_) {
        if (unit.state == State::kCommitted) unit.state = State::kPushed;
      }
      Complete();
      UpdateQueueGauge();
      return;
    }
    // The remote moved (or vanished): rebuild every retained write on its new tip.
    runtime::LogInfo("push conflict; fetching and replaying",
                     {{"branch", options_.key.ToString()},
                      {"outcome", std::string(git::PushOutcomeName(result->outcome))},
                      {"attempt", attempt}});
    options_.metrics
        ->GetCounter("reverser_gitworker_push_conflicts_total", "Pushes refused by the CAS.",
                     BranchLabels())
        .Increment();
    count("fetch");
    if (auto s = repo_->Fetch(branch); !s.ok()) return fail(std::string(s.message()));
    const std::optional<std::string> ours = expected_remote_;
    auto base = repo_->ResolveBranchBase(branch);
    if (!base.ok()) return fail(std::string(base.status().message()));
    if (auto s = repo_->ResetBranch(branch, base->commit); !s.ok()) {
      return fail(std::string(s.message()));
    }
    auto remote = repo_->FetchedTip(branch);
    if (!remote.ok()) return fail(std::string(remote.status().message()));
    if (ours.has_value()) NoteRewrittenHistory(*ours, *remote);
    expected_remote_ = *remote;
    for (Unit& unit : units_) {
      if (unit.kind != Kind::kEmpty && unit.state != State::kPushed) {
        unit.state = State::kUncommitted;
      }
    }
    CommitPending();
  }
  fail(absl::StrCat("push failed after ", options_.max_push_attempts, " attempts"));
}

void BranchWorker::NoteRewrittenHistory(const std::string& ours,
                                        const std::optional<std::string>& remote) {
  if (remote.has_value()) {
    auto kept = repo_->IsAncestor(ours, *remote);
    // Unknown counts as kept: a resync of every target is no answer to a failed lookup.
    if (!kept.ok() || *kept) return;
  }
  const std::string message =
      remote.has_value()
          ? absl::StrCat("the remote branch was rewritten: ", ours.substr(0, 12),
                         " is no longer an ancestor of its tip ", remote->substr(0, 12))
          : absl::StrCat("the remote branch was deleted (its tip was ", ours.substr(0, 12), ")");
  runtime::LogWarning("history rewritten under the branch; resyncing its targets",
                      {{"branch", options_.key.ToString()},
                       {"targets", static_cast<long long>(targets_.size())},
                       {"detail", message}});
  GitWorkerMetrics(options_.metrics).HistoryRewritten(BranchLabels());
  // Files only the lost commits held are gone from the new tip, and objects the new history
  // added stay: replaying the pending writes cannot fix either, a resync of every type can.
  for (auto& [key, known] : targets_) {
    reverser::v1::ResyncRequest request;
    *request.mutable_target() = known.ref;
    request.set_reason("HistoryRewritten");
    request.set_message(message);
    // A sink whose stream has ended drops feedback silently: the request is also kept until
    // the target's next item shows which stream is live.
    if (std::shared_ptr<FeedbackSink> sink = known.sink.lock()) sink->ResyncRequested(request);
    known.undelivered = std::move(request);
  }
}

void BranchWorker::Complete() {
  const absl::Time now = options_.clock->Now();
  // Held writes (a refused path) and what follows them for their target stay; everything else
  // completes in order past them, so one refused path never stalls the branch's other targets.
  std::set<std::string> waiting;
  auto targets_of = [](const Unit& unit) {
    std::set<std::string> targets;
    if (unit.settings) targets.insert(unit.settings->TargetKey());
    for (const Coverage& cover : unit.covers) {
      targets.insert(absl::StrCat(cover.target.namespace_(), "/", cover.target.name()));
    }
    return targets;
  };
  for (auto next = units_.begin(); next != units_.end();) {
    Unit& unit = *next;
    if (unit.held || !waiting.empty()) {
      const std::set<std::string> targets = targets_of(unit);
      bool behind = unit.held;
      for (const std::string& target : targets) behind = behind || waiting.count(target);
      if (behind) {
        waiting.insert(targets.begin(), targets.end());
        ++next;
        continue;
      }
    }
    if (unit.state != State::kPushed && unit.state != State::kNoop) break;
    const bool pushed = unit.state == State::kPushed;
    const std::string remote_sha = expected_remote_.value_or("");
    if (unit.kind == Kind::kResync && !unit.rejected) {
      GitWorkerMetrics(options_.metrics).ResyncApplied(unit.settings->target);
    }
    for (const Coverage& cover : unit.covers) {
      if (pushed && cover.observed_at.has_value()) {
        options_.metrics
            ->GetHistogram("reverser_gitworker_event_to_push_seconds",
                           "From a change entering the stream to its commit being pushed.")
            .Observe(absl::ToDoubleSeconds(now - *cover.observed_at));
      }
      if (!cover.sink) continue;
      reverser::v1::DeliveryAck ack;
      *ack.mutable_target() = cover.target;
      *ack.mutable_claim() = cover.claim;
      *ack.mutable_position() = core::ToProto(cover.position);
      ack.set_commit_sha(remote_sha);
      if (pushed) {
        *ack.mutable_pushed_at() =
            google::protobuf::util::TimeUtil::NanosecondsToTimestamp(absl::ToUnixNanos(now));
      }
      cover.sink->Ack(ack);
    }
    commit_requests_.WriteFinished(unit.id,
                                   unit.rejected ? CommitRequestBook::WriteEnd::kFailed
                                   : pushed      ? CommitRequestBook::WriteEnd::kPushed
                                                 : CommitRequestBook::WriteEnd::kEmpty,
                                   unit.sha, now);
    next = units_.erase(next);
  }
}

void BranchWorker::Shutdown() {
  Finalize(FinalizeReason::kShutdown);
  PushIfDue(/*force=*/true);
}

size_t BranchWorker::QueueDepth() const {
  size_t depth = window_.has_value() ? window_->covers.size() : 0;
  for (const Unit& unit : units_) depth += unit.covers.size();
  return depth;
}

void BranchWorker::UpdateQueueGauge() {
  options_.metrics
      ->GetGauge("gitopsreverser_branch_worker_queue_depth",
                 "Items held by a branch worker (open window and unpushed writes).", BranchLabels())
      .Set(static_cast<double>(QueueDepth()));
}

reverser::v1::BranchStatus BranchWorker::Status() const {
  reverser::v1::BranchStatus status;
  status.mutable_destination()->set_provider_namespace(options_.key.provider_namespace);
  status.mutable_destination()->set_provider_name(options_.key.provider_name);
  status.mutable_destination()->set_branch(options_.key.branch);
  if (repo_) {
    auto tip = repo_->LocalTip(options_.key.branch);
    if (tip.ok() && tip->has_value()) status.set_head_sha(**tip);
  }
  uint32_t pending = 0;
  for (const Unit& unit : units_) pending += unit.kind == Kind::kEmpty ? 0 : 1;
  status.set_pending_writes(pending);
  status.set_window_open(window_.has_value());
  if (last_push_.has_value()) {
    *status.mutable_last_push() =
        google::protobuf::util::TimeUtil::NanosecondsToTimestamp(absl::ToUnixNanos(*last_push_));
  }
  // A push of earlier writes clears last_error_; writes waiting for their signing key say so.
  std::string error = last_error_.empty() ? signing_error_ : last_error_;
  for (const auto& [target, gate] : path_gates_) {
    if (error.empty()) error = gate.refusal.message();
  }
  status.set_last_error(error);
  return status;
}

std::string BranchWorker::WindowKey(const std::string& username, const std::string& target_key) {
  return absl::StrCat(username, "\n", target_key);
}

CommitRequestView BranchWorker::RegisterCommitRequest(const CommitRequestSpec& spec) {
  commit_requests_.Register(spec, options_.clock->Now());
  BindCommitRequest();
  OnCommitRequestTimer();
  return commit_requests_.View(spec.id);
}

CommitRequestView BranchWorker::CommitRequest(const std::string& id) const {
  return commit_requests_.View(id);
}

void BranchWorker::BindCommitRequest() {
  if (!window_.has_value()) return;
  auto message = commit_requests_.BindWaiting(window_->window_key, window_->id);
  // The window's message becomes the request's; any later finalize of it carries that message.
  if (message.has_value() && !message->empty()) window_->message_override = *message;
}

void BranchWorker::OnCommitRequestTimer() {
  for (uint64_t write_id : commit_requests_.TakeDue(options_.clock->Now())) {
    if (window_.has_value() && window_->id == write_id) Finalize(FinalizeReason::kFinalizeSignal);
  }
}

std::optional<absl::Time> BranchWorker::CommitRequestDeadline() const {
  return commit_requests_.NextDeadline();
}

}  // namespace reverser::gitworker
