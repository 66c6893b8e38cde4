#include "services/splicer/splice_stream.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "libs/core/proto_convert.h"
#include "libs/core/status.h"
#include "libs/redisstore/keys.h"
#include "libs/runtime/log.h"
#include "libs/sanitize/sanitize.h"
#include "services/splicer/splicer_metrics.h"

namespace reverser::splicer {
namespace {

// Events keep their stream order per Git document: by namespace/name, not uid, so a delete of
// one incarnation can never overtake the re-create of the next one.
std::string ObjectKey(const reverser::v1::ObjectBody& body) {
  return redisstore::ObjectIdentity(body.ref().namespace_(), body.ref().name());
}

reverser::v1::Author ToAuthor(const redisstore::AuthorResolution& resolution) {
  reverser::v1::Author author;
  const redisstore::AuthorFact& fact = *resolution.fact;
  author.set_username(fact.author);
  author.set_display_name(fact.display_name);
  author.set_email(fact.email);
  author.set_is_service_account(fact.is_service_account);
  author.set_resolution(std::string(redisstore::AuthorResolutionCodeName(resolution.code)));
  author.set_audit_id(fact.audit_id);
  return author;
}

// The watches gitops-reverser would run for this target on the type, whose resume cursors are
// written with ours: one cluster-wide watch when the target follows the type cluster-wide (or the
// type is cluster-scoped), else one per namespace.
std::vector<core::WatchScope> ReferenceWatchScopes(const TargetScope& scope,
                                                   const reverser::v1::TypeIdentity& type) {
  if (scope.namespaces.count("") || type.scope() == reverser::v1::RESOURCE_SCOPE_CLUSTER) {
    return {core::WatchScope::Cluster()};
  }
  std::vector<core::WatchScope> scopes;
  for (const auto& [ns, ops] : scope.namespaces) scopes.push_back(core::WatchScope::Namespace(ns));
  return scopes;
}

}  // namespace

SpliceStream::SpliceStream(SpliceStreamOptions options, DeliveryClient* delivery,
                           runtime::MetricsRegistry* metrics, MaterializationReader* reader)
    : options_(std::move(options)),
      key_(StreamKey(options_.target, options_.claim)),
      delivery_(delivery),
      metrics_(metrics),
      reader_(reader) {
  if (reader_ == nullptr) {
    MaterializationReaderOptions o;
    o.claim = options_.claim;
    o.redis = options_.redis;
    o.prefix = options_.prefix;
    o.body_cipher = options_.body_cipher;
    o.read_batch = options_.read_batch;
    o.attribution = options_.attribution;
    own_reader_ = std::make_unique<MaterializationReader>(std::move(o));
    reader_ = own_reader_.get();
  }
  const auto& gvr = options_.claim.type().gvr();
  labels_ = {{"gittarget_namespace", options_.target.namespace_()},
             {"gittarget_name", options_.target.name()},
             {"group", gvr.group()},
             {"version", gvr.version()},
             {"resource", gvr.resource()}};
}

SpliceStream::~SpliceStream() { Stop(); }

void SpliceStream::NoteTooDeep(const std::string& ns, const std::string& name,
                               const std::string& uid, core::StreamPosition position) {
  const std::string& kind = options_.claim.type().gvk().kind();
  const std::string message = absl::StrCat(
      "object nested deeper than ", sanitize::kMaxDepth,
      " levels (what can be sanitized and written as YAML): not delivered, its file is kept");
  runtime::Labels labels = labels_;
  labels.emplace_back("reason", "too_deep");
  metrics_
      ->GetCounter("reverser_splicer_objects_refused_total",
                   "Objects the splicer does not deliver, by reason (each time they are read).",
                   labels)
      .Increment();
  if (too_deep_logged_.insert(redisstore::ObjectIdentity(ns, name)).second) {
    runtime::LogWarning("object refused", {{"stream", key_},
                                           {"kind", kind},
                                           {"namespace", ns},
                                           {"name", name},
                                           {"reason", "too_deep"},
                                           {"message", message}});
  }
  if (options_.refusals != nullptr) {
    reverser::v1::Refusal refusal;
    *refusal.mutable_target() = options_.target;
    *refusal.mutable_claim() = options_.claim;
    *refusal.mutable_position() = core::ToProto(position);
    *refusal.mutable_object()->mutable_gvr() = options_.claim.type().gvr();
    refusal.mutable_object()->set_namespace_(ns);
    refusal.mutable_object()->set_name(name);
    refusal.mutable_object()->set_uid(uid);
    refusal.set_kind(kind);
    refusal.set_reason(reverser::v1::REFUSAL_REASON_LIMIT_EXCEEDED);
    refusal.set_message(message);
    options_.refusals->OnRefusal(refusal);
  }
}

void SpliceStream::NoteTooDeepInResync(const reverser::v1::ClusterSnapshot& snapshot,
                                       core::StreamPosition head) {
  std::set<std::string> still;
  for (const reverser::v1::ObjectBody& object : snapshot.refused()) {
    still.insert(redisstore::ObjectIdentity(object.ref().namespace_(), object.ref().name()));
  }
  // What the snapshot no longer refuses is deliverable (or gone): a new refusal logs again.
  for (auto it = too_deep_logged_.begin(); it != too_deep_logged_.end();) {
    it = still.count(*it) ? std::next(it) : too_deep_logged_.erase(it);
  }
  for (const reverser::v1::ObjectBody& object : snapshot.refused()) {
    NoteTooDeep(object.ref().namespace_(), object.ref().name(), object.ref().uid(), head);
  }
}

void SpliceStream::Start() {
  delivery_->Subscribe(key_, this);
  started_ = true;
  reader_->Add(this);
}

void SpliceStream::RequestStop() {
  stopping_ = true;
  if (started_) reader_->RequestRemove(this);
}

void SpliceStream::Stop() {
  stopping_ = true;
  if (!started_) return;
  reader_->Remove(this);
  started_ = false;
  delivery_->Unsubscribe(key_);
}

void SpliceStream::UpdateScope(const TargetScope& scope) {
  {
    std::lock_guard lock(mu_);
    // Another target's change (or a table republished unchanged) leaves this stream alone.
    if (options_.scope == scope) return;
    options_.scope = scope;
  }
  restart_ = true;
}

void SpliceStream::Resplice(const std::string& reason, const std::string& message) {
  {
    std::lock_guard lock(mu_);
    resplice_reason_ = reason;
    resplice_message_ = message;
  }
  // The request first: the session that sees restart_ must also see the request.
  resplice_requested_ = true;
  restart_ = true;
}

SpliceStreamStatus SpliceStream::Status() const {
  std::lock_guard lock(mu_);
  SpliceStreamStatus out = status_;
  if (materialization_block_) {
    out.state = reverser::v1::STREAM_STATE_BLOCKED;
    out.reason = materialization_block_->first;
    out.message = materialization_block_->second;
  }
  return out;
}

void SpliceStream::SetState(reverser::v1::StreamState state, const std::string& reason,
                            const std::string& message) {
  std::lock_guard lock(mu_);
  status_.message = message;
  if (status_.state == state && status_.reason == reason) return;
  status_.state = state;
  status_.reason = reason;
  runtime::LogInfo("stream state", {{"stream", key_},
                                    {"state", reverser::v1::StreamState_Name(state)},
                                    {"reason", reason},
                                    {"message", message}});
}

void SpliceStream::Fail(const absl::Status& status) {
  EndSession();
  if (Stopping()) return;
  SetState(reverser::v1::STREAM_STATE_BLOCKED, "WatchError",
           absl::StrCat("retrying: ", status.message()));
  runtime::LogWarning("splice session ended", {{"stream", key_}, {"error", status.ToString()}});
  retry_at_ = absl::Now() + backoff_;
  backoff_ = std::min(backoff_ * 2, absl::Seconds(5));
}

void SpliceStream::Attach(redisstore::RedisConnection* redis) {
  facts_ = std::make_unique<redisstore::AuthorFactStore>(redis, options_.prefix);
  cursors_ = std::make_unique<redisstore::DeliveryCursorStore>(redis, options_.prefix,
                                                               options_.cursor_ttl, options_.fence);
}

bool SpliceStream::sensitive() const {
  std::lock_guard lock(mu_);
  return options_.scope.sensitive;
}

std::optional<core::StreamPosition> SpliceStream::TailPosition() const {
  if (phase_ != Phase::kTailing || Stopping()) return std::nullopt;
  return position_;
}

bool SpliceStream::AwaitingFacts() const {
  return options_.attribution && std::any_of(pending_.begin(), pending_.end(),
                                             [](const Pending& p) { return !p.resolved; });
}

absl::Duration SpliceStream::NextWake(absl::Time now) const {
  if (retry_at_ > now) return retry_at_ - now;
  if (phase_ == Phase::kTailing) return NextLookupIn(now);
  if (phase_ == Phase::kIdle && !delivery_->connected()) return absl::Milliseconds(100);
  return absl::Milliseconds(500);
}

void SpliceStream::Round(redisstore::MaterializationStore& store) {
  if (Stopping() || !cursors_ || absl::Now() < retry_at_) return;
  if (absl::Status s = Step(store); !s.ok()) Fail(s);
}

absl::Status SpliceStream::Step(redisstore::MaterializationStore& store) {
  if (phase_ != Phase::kIdle &&
      (restart_ || delivery_->generation() != generation_ || !delivery_->connected())) {
    // Start over from the persisted cursor. A resplice whose resync was not sent yet is kept.
    if (phase_ != Phase::kTailing && session_resplice_) resplice_requested_ = true;
    EndSession();
  }
  if (phase_ == Phase::kIdle) {
    if (!delivery_->connected()) return absl::OkStatus();  // NextWake looks again soon
    RETURN_IF_ERROR(StartSession());
  }
  if (phase_ == Phase::kAwaiting) {
    ASSIGN_OR_RETURN(bool ready, AwaitStep(store));
    if (!ready) return absl::OkStatus();
  }
  if (phase_ == Phase::kResyncing) {
    auto sent = SendResync(store, &position_, resync_reason_);
    if (!sent.ok()) {
      if (resync_is_resplice_) resplice_requested_ = true;  // not sent: the next session does it
      return sent.status();
    }
    if (!*sent) return absl::OkStatus();  // waiting for a usable checkpoint
    resync_is_resplice_ = false;
    session_resplice_ = false;
    phase_ = Phase::kTailing;
    backoff_ = absl::Milliseconds(100);
  }
  if (phase_ == Phase::kTailing) {
    AdvanceCursor();
    if (absl::Status s = EmitReady(); !s.ok()) {
      if (absl::IsUnavailable(s)) {
        EndSession();
        return absl::OkStatus();
      }
      return s;
    }
  }
  return absl::OkStatus();
}

void SpliceStream::OnAck(const reverser::v1::DeliveryAck& ack) {
  core::StreamPosition position = core::FromProto(ack.position());
  std::lock_guard lock(mu_);
  if (ack.has_pushed_at()) {
    // A push is a push, whichever session sent what it carried.
    absl::Time pushed = absl::FromUnixSeconds(ack.pushed_at().seconds()) +
                        absl::Nanoseconds(ack.pushed_at().nanos());
    if (!status_.last_push || *status_.last_push < pushed) status_.last_push = pushed;
  }
  // Everything sent up to and including `position` (in send order) is pushed.
  bool found = false;
  for (const auto& p : sent_order_) {
    if (p == position) {
      found = true;
      break;
    }
  }
  if (!found) return;  // an ack from an earlier session
  while (!sent_order_.empty()) {
    core::StreamPosition front = sent_order_.front();
    sent_order_.pop_front();
    if (auto it = tracked_.find(front); it != tracked_.end()) it->second = true;
    if (front == position) break;
  }
  cursor_dirty_ = true;
  if (options_.refusals != nullptr) options_.refusals->OnAck(ack);
}

void SpliceStream::MarkDone(core::StreamPosition position) {
  std::lock_guard lock(mu_);
  if (auto it = tracked_.find(position); it != tracked_.end()) it->second = true;
  cursor_dirty_ = true;
}

void SpliceStream::AdvanceCursor() {
  const absl::Time now = absl::Now();
  core::StreamPosition target;
  std::vector<core::WatchScope> watch_scopes;
  {
    std::lock_guard lock(mu_);
    if (!cursor_dirty_ && now < next_cursor_refresh_) return;
    cursor_dirty_ = false;
    while (!tracked_.empty() && tracked_.begin()->second) {
      cursor_ = std::max(cursor_, tracked_.begin()->first);
      tracked_.erase(tracked_.begin());
    }
    target = cursor_;
    if (target.IsZero()) return;
    if (options_.reference_watch_cursors) {
      watch_scopes = ReferenceWatchScopes(options_.scope, options_.claim.type());
    }
  }
  const auto& claim = options_.claim;
  // Unmoved (a due refresh), the offer changes nothing but the TTLs.
  auto offered =
      cursors_->Offer(options_.target.uid(), core::FromProto(claim.type().gvr()),
                      core::FromProto(claim.scope()), target, session_incarnation_, watch_scopes);
  if (redisstore::IsFenced(offered.status())) {
    Fenced(offered.status());
    return;
  }
  if (!offered.ok()) {
    std::lock_guard lock(mu_);
    cursor_dirty_ = true;  // try again next round
    return;
  }
  next_cursor_refresh_ = now + options_.cursor_refresh;
  std::lock_guard lock(mu_);
  status_.cursor = offered->position.ToString();
  delivered_ = redisstore::DeliveryCursor{offered->position, offered->incarnation};
}

void SpliceStream::Fenced(const absl::Status& refusal) {
  // Another replica owns the GitTarget now and redelivers from the cursor: nothing more of this
  // stream may reach the gitworker or Redis. The reader skips a stopping stream.
  stopping_ = true;
  EndSession();
  pending_.clear();
  SplicerMetrics(metrics_).FencedWrite();
  runtime::LogWarning("cursor write fenced: another splicer replica took the GitTarget over",
                      {{"stream", key_}, {"error", std::string(refusal.message())}});
  if (options_.on_fenced) options_.on_fenced(options_.target);
}

void SpliceStream::CountLoss(redisstore::StateLoss loss) {
  runtime::Labels labels = labels_;
  labels.emplace_back("reason", std::string(redisstore::StateLossName(loss)));
  metrics_
      ->GetCounter("reverser_splicer_state_lost_total",
                   "Lost or rolled-back Redis state detected by a splice stream, by reason.",
                   labels)
      .Increment();
  std::lock_guard lock(mu_);
  ++status_.state_losses;
}

void SpliceStream::NoteLoss(redisstore::StateLoss loss) {
  const std::string message =
      absl::StrCat("Rebuilding after Redis state loss (", redisstore::StateLossText(loss),
                   "): waiting for the materializer to rebuild the materialization");
  if (waiting_ != loss) {
    waiting_ = loss;
    CountLoss(loss);
    runtime::LogWarning("Redis state lost; delivering nothing until the materializer rebuilt it",
                        {{"stream", key_},
                         {"reason", std::string(redisstore::StateLossName(loss))},
                         {"incarnation", lineage_.incarnation()},
                         {"head", lineage_.head().ToString()}});
  }
  SetState(reverser::v1::STREAM_STATE_REPLAYING, std::string(kRedisStateLostReason), message);
}

void SpliceStream::NoteUsableAgain() {
  if (!waiting_) return;
  runtime::LogInfo("materialization usable again after Redis state loss",
                   {{"stream", key_},
                    {"reason", std::string(redisstore::StateLossName(*waiting_))},
                    {"incarnation", lineage_.incarnation()},
                    {"head", lineage_.head().ToString()}});
  waiting_.reset();
}

bool SpliceStream::UsableOrWait(redisstore::MaterializationStore& store,
                                const redisstore::LineageTracker::Judgement& judged,
                                const std::string& reason) {
  using Verdict = redisstore::LineageTracker::Verdict;
  if (judged.verdict == Verdict::kSame || judged.verdict == Verdict::kRenewed) {
    NoteUsableAgain();
    return true;
  }
  if (judged.verdict == Verdict::kLost) {
    NoteLoss(*judged.loss);
  } else {
    // Fail closed: no checkpoint, no resync, no sweep.
    SetState(reverser::v1::STREAM_STATE_REPLAYING, reason,
             "waiting for the materializer's first checkpoint");
    FollowMaterializationState(store);  // a forbidden list/watch never brings one
  }
  retry_at_ = absl::Now() + absl::Milliseconds(200);
  return false;
}

bool SpliceStream::FollowMaterializationState(redisstore::MaterializationStore& store) {
  const absl::Time now = absl::Now();
  if (now < next_state_check_) {
    std::lock_guard lock(mu_);
    return materialization_block_.has_value();
  }
  next_state_check_ = now + options_.materialization_state_poll;
  auto state = store.ReadState();
  std::optional<std::pair<std::string, std::string>> block;
  if (!state.ok()) {
    std::lock_guard lock(mu_);
    return materialization_block_.has_value();  // Redis trouble shows elsewhere
  }
  if (state->has_value() && (*state)->phase == "Blocked") {
    std::string reason = (*state)->reason.empty() ? "WatchError" : (*state)->reason;
    std::string message = (*state)->message.empty()
                              ? absl::StrCat("the materialization is blocked: ", reason)
                              : (*state)->message;
    block.emplace(std::move(reason), std::move(message));
  }
  std::lock_guard lock(mu_);
  if (block != materialization_block_) {
    if (block) {
      runtime::LogWarning("materialization blocked; the stream is blocked with it",
                          {{"stream", key_}, {"reason", block->first}, {"message", block->second}});
    } else {
      runtime::LogInfo("materialization no longer blocked", {{"stream", key_}});
    }
    materialization_block_ = std::move(block);
  }
  return materialization_block_.has_value();
}

std::optional<core::StreamPosition> SpliceStream::UsableCursor(
    const std::optional<redisstore::DeliveryCursor>& persisted) {
  const std::string incarnation = lineage_.incarnation();
  std::optional<redisstore::DeliveryCursor> remembered;
  {
    std::lock_guard lock(mu_);
    remembered = delivered_;
  }
  const bool persisted_here = persisted && persisted->incarnation == incarnation;
  const bool remembered_here = remembered && remembered->incarnation == incarnation;
  if (!remembered_here) {
    // Nothing acked in this lineage by this process: the persisted cursor if it belongs to it;
    // one of another incarnation points into a stream that was rebuilt.
    if (persisted_here) return persisted->position;
    return std::nullopt;
  }
  if (persisted_here && persisted->position >= remembered->position) return persisted->position;
  // Redis lost the cursor, or holds an older one (an older snapshot): what this process acked
  // is in Git; put it back rather than deliver again what follows the older one.
  const redisstore::StateLoss loss = !persisted ? redisstore::StateLoss::kCursorVanished
                                                : redisstore::StateLoss::kCursorWentBackwards;
  CountLoss(loss);
  runtime::LogWarning("delivery cursor lost in Redis; restoring the one this process acked",
                      {{"stream", key_},
                       {"reason", std::string(redisstore::StateLossName(loss))},
                       {"persisted", persisted ? persisted->position.ToString() : std::string()},
                       {"restored", remembered->position.ToString()}});
  std::lock_guard lock(mu_);
  cursor_dirty_ = true;  // offered again at the next round
  return remembered->position;
}

absl::StatusOr<bool> SpliceStream::SendResync(redisstore::MaterializationStore& store,
                                              core::StreamPosition* head,
                                              const std::string& reason) {
  std::string detail = "splicing checkpoint and stream";
  if (resync_is_resplice_) {
    std::lock_guard lock(mu_);
    if (!resplice_message_.empty()) detail = absl::StrCat(resplice_message_, "; ", detail);
  }
  SetState(reverser::v1::STREAM_STATE_REPLAYING, reason, detail);
  {
    auto view = store.Load();
    if (!view.ok()) return view.status();
    // Only from a usable checkpoint at or past everything seen: a resync from a missing,
    // partial or older state would sweep the files of objects that still exist.
    // (No usable checkpoint in the view is never judged usable.)
    if (!UsableOrWait(store, lineage_.Observe(view->mark), reason)) return false;
    session_incarnation_ = view->mark.incarnation;
    TargetScope scope;
    {
      std::lock_guard lock(mu_);
      scope = options_.scope;
    }
    auto snapshot = BuildSnapshot(*view, scope, options_.target, options_.claim, &dedup_);
    if (!snapshot.ok()) return snapshot.status();
    if (options_.attribution && options_.admission_facts) {
      latest_versions_.clear();
      for (const auto& object : snapshot->desired()) {
        latest_versions_[object.ref().uid()] = object.resource_version();
      }
    }
    *head = view->CoverageHead();
    *view = redisstore::MaterializationView();  // the whole type: free it before sending
    reverser::v1::DeliveryMessage message;
    *message.mutable_resync() = std::move(*snapshot);
    {
      std::lock_guard lock(mu_);
      tracked_[*head] = false;
      sent_order_.push_back(*head);
    }
    if (options_.refusals != nullptr) {
      options_.refusals->OnResyncSent(options_.target, options_.claim, *head);
    }
    // After OnResyncSent: the resync's ack settles what came before it, not these.
    NoteTooDeepInResync(message.resync(), *head);
    size_t desired = message.resync().desired_size();
    if (absl::Status s = delivery_->Send(std::move(message)); !s.ok()) return s;
    // Events read before and still waiting (for their author) are older than the resync: sent
    // after it they would put older content back. The resync carries their effect.
    for (auto it = pending_.begin(); it != pending_.end();) {
      if (it->position > *head) {
        ++it;
        continue;
      }
      MarkDone(it->position);
      it = pending_.erase(it);
    }
    {
      std::lock_guard lock(mu_);
      ++status_.resyncs_sent;
    }
    metrics_->GetCounter("reverser_splicer_resyncs_total", "Type-scoped resyncs sent.", labels_)
        .Increment();
    runtime::LogInfo("resync sent", {{"stream", key_},
                                     {"desired", static_cast<long long>(desired)},
                                     {"coverage_head", head->ToString()},
                                     {"incarnation", session_incarnation_}});
    SetState(
        reverser::v1::STREAM_STATE_STREAMING, "AllStreamsReady",
        absl::StrCat("resync of ", desired, " object(s) sent at ", head->ToString(), "; tailing"));
    return true;
  }
}

void SpliceStream::Resolve(Pending& pending, bool final_attempt) {
  if (pending.resolved) return;
  if (!options_.attribution) {
    pending.resolved = true;
    return;
  }
  redisstore::AuthorQuery query;
  const auto& gvr = options_.claim.type().gvr();
  query.group_resource = redisstore::GroupResourceSegment(gvr.group(), gvr.resource());
  query.uid = pending.event.object.ref().uid();
  query.resource_version = pending.resource_version;
  query.exact_capable = !pending.event.removal;
  query.namespace_ = pending.event.object.ref().namespace_();
  query.created = pending.created;
  query.previous_resource_version = pending.previous_resource_version;
  query.use_audit = options_.audit_facts;
  query.use_admission = options_.admission_facts;
  auto resolution = facts_->Lookup(query);
  bool found = resolution.ok() && resolution->code != redisstore::AuthorResolutionCode::kAbsent &&
               resolution->fact.has_value() && !resolution->fact->author.empty();
  // A removal found only through `:last` may still see the object's previous writer (the delete's
  // own fact has not arrived yet): within the grace, wait for a fact that records a removal.
  if (found && pending.event.removal && !final_attempt &&
      resolution->code == redisstore::AuthorResolutionCode::kWeak &&
      resolution->fact->verb != "delete" && resolution->fact->verb != "deletecollection") {
    found = false;
  }
  // The audit fact is the exact one: while it may still come, an admission fact waits.
  const bool audit_may_come = options_.audit_facts && !final_attempt;
  if (found && audit_may_come && resolution->code == redisstore::AuthorResolutionCode::kAdmission) {
    found = false;
  }
  // Two users asked for this change: no one is named (unless an audit fact still comes).
  const bool ambiguous =
      resolution.ok() && resolution->code == redisstore::AuthorResolutionCode::kAmbiguous;
  if (ambiguous && audit_may_come) return;
  // A namespace controller's removal: the namespace's deleter may still be recorded.
  if (!found && !final_attempt && resolution.ok() && resolution->awaiting_namespace_deletion) {
    return;
  }
  if (found) {
    pending.author = ToAuthor(*resolution);
    SplicerMetrics(metrics_).FactMatched();
  }
  if (found || ambiguous || final_attempt) {
    pending.resolved = true;
    runtime::Labels labels = {
        {"result", found || ambiguous
                       ? std::string(redisstore::AuthorResolutionCodeName(resolution->code))
                       : std::string("absent")},
        {"group", gvr.group()},
        {"version", gvr.version()},
        {"resource", gvr.resource()}};
    metrics_
        ->GetCounter("gitopsreverser_attribution_resolutions_total",
                     "Author resolutions by result.", labels)
        .Increment();
    metrics_
        ->GetHistogram("gitopsreverser_attribution_resolution_wait_seconds",
                       "Time spent waiting for an author fact.", {},
                       {0.001, 0.005, 0.01, 0.05, 0.1, 0.15, 0.3, 0.5, 1, 2, 3, 5, 10})
        .Observe(absl::ToDoubleSeconds(absl::Now() - pending.arrived));
  }
}

absl::Duration SpliceStream::NextLookupIn(absl::Time now) const {
  absl::Duration block = absl::Milliseconds(500);  // nothing waiting: just tail the stream
  for (const Pending& pending : pending_) {
    if (pending.resolved) continue;
    absl::Time due = std::min(pending.next_lookup, pending.arrived + options_.attribution_grace);
    block = std::min(block, due - now);
  }
  return std::clamp(block, absl::Milliseconds(1), absl::Milliseconds(500));
}

void SpliceStream::ResolveDue(absl::Time now) {
  std::set<std::string> blocked;
  for (Pending& pending : pending_) {
    if (pending.resolved) continue;
    std::string object = ObjectKey(pending.event.object);
    if (blocked.count(object)) continue;  // waits behind an earlier event of its object anyway
    bool due = now >= pending.arrived + options_.attribution_grace;
    if (due || now >= pending.next_lookup) {
      Resolve(pending, due);
      if (!pending.resolved) {
        pending.next_lookup = now + pending.lookup_interval;
        pending.lookup_interval = std::min(pending.lookup_interval * 2, options_.attribution_poll);
      }
    }
    if (!pending.resolved) blocked.insert(object);
  }
}

absl::Status SpliceStream::EmitReady() {
  // All lookups first, then all sends: alternating a Redis round trip with a gRPC write per
  // event costs a thread hand-off each way and made the tail ~30% slower (bench/splicer).
  ResolveDue(absl::Now());
  std::set<std::string> blocked;
  for (auto it = pending_.begin(); it != pending_.end();) {
    std::string object = ObjectKey(it->event.object);
    if (blocked.count(object)) {
      ++it;
      continue;
    }
    if (!it->resolved) {
      blocked.insert(object);  // later events of this object wait; others go on
      ++it;
      continue;
    }
    reverser::v1::DeliveryMessage message;
    auto* event = message.mutable_event();
    *event->mutable_target() = options_.target;
    *event->mutable_claim() = options_.claim;
    event->set_operation(it->event.operation);
    *event->mutable_object() = std::move(it->event.object);  // the pending entry goes below
    if (it->author) *event->mutable_author() = std::move(*it->author);
    *event->mutable_position() = core::ToProto(it->position);
    event->mutable_observed_at()->set_seconds(absl::ToUnixSeconds(it->observed));
    event->mutable_observed_at()->set_nanos(static_cast<int32_t>(absl::ToInt64Nanoseconds(
        it->observed - absl::FromUnixSeconds(absl::ToUnixSeconds(it->observed)))));
    {
      std::lock_guard lock(mu_);
      sent_order_.push_back(it->position);
    }
    if (options_.refusals != nullptr) {
      options_.refusals->OnEventSent(options_.target, options_.claim, it->position,
                                     event->object());
    }
    if (absl::Status s = delivery_->Send(std::move(message)); !s.ok()) return s;
    {
      std::lock_guard lock(mu_);
      ++status_.events_sent;
    }
    metrics_->GetCounter("reverser_splicer_events_sent_total", "Live events sent.", labels_)
        .Increment();
    it = pending_.erase(it);
  }
  return absl::OkStatus();
}

absl::Status SpliceStream::StartSession() {
  generation_ = delivery_->generation();
  restart_ = false;
  session_resplice_ = resplice_requested_.exchange(false);
  resync_is_resplice_ = false;
  pending_.clear();
  dedup_.clear();
  latest_versions_.clear();
  if (options_.refusals != nullptr) options_.refusals->ResetStream(options_.target, options_.claim);
  {
    std::lock_guard lock(mu_);
    tracked_.clear();
    sent_order_.clear();
    cursor_ = core::StreamPosition();
    cursor_dirty_ = false;
  }
  const auto gvr = core::FromProto(options_.claim.type().gvr());
  const auto scope = core::FromProto(options_.claim.scope());
  auto cursor = cursors_->ReadCursor(options_.target.uid(), gvr, scope);
  if (!cursor.ok()) {
    if (session_resplice_) resplice_requested_ = true;
    return cursor.status();
  }
  session_cursor_ = std::move(*cursor);
  phase_ = Phase::kAwaiting;
  return absl::OkStatus();
}

absl::StatusOr<bool> SpliceStream::AwaitStep(redisstore::MaterializationStore& store) {
  std::string reason = session_cursor_.has_value() ? "ResumeReplay" : "InitialReplay";
  if (session_resplice_) {
    std::lock_guard lock(mu_);
    if (!resplice_reason_.empty()) reason = resplice_reason_;  // e.g. HistoryRewritten
  }
  // The materialization first: nothing is delivered from one that is missing or was lost.
  auto mark = store.ReadMark();
  if (!mark.ok()) {
    if (session_resplice_) resplice_requested_ = true;
    return mark.status();
  }
  if (!UsableOrWait(store, lineage_.Observe(*mark), reason)) return false;
  session_incarnation_ = lineage_.incarnation();
  // A cursor of this lineage (persisted, or what this process acked); none after a rebuild.
  std::optional<core::StreamPosition> resume = UsableCursor(session_cursor_);
  position_ = core::StreamPosition();
  if (resume) {
    // Also before a resplice: the resync's ack then only moves the cursor forward (max).
    position_ = *resume;
    std::lock_guard lock(mu_);
    cursor_ = position_;
    status_.cursor = position_.ToString();
  }
  if (!resume || session_resplice_) {
    if (session_resplice_) runtime::LogInfo("resplice requested", {{"stream", key_}});
    if (!resume && session_cursor_.has_value()) {
      runtime::LogInfo("the delivery cursor belongs to another incarnation; splicing again",
                       {{"stream", key_},
                        {"cursor", session_cursor_->position.ToString()},
                        {"cursor_incarnation", session_cursor_->incarnation},
                        {"incarnation", session_incarnation_}});
    }
    resync_reason_ = reason;
    resync_is_resplice_ = session_resplice_;
    phase_ = Phase::kResyncing;
  } else {
    SetState(reverser::v1::STREAM_STATE_STREAMING, "ResumedFromCursor",
             absl::StrCat("tailing after the delivery cursor ", position_.ToString()));
    SplicerMetrics(metrics_).CursorResumed(options_.target);
    phase_ = Phase::kTailing;
    backoff_ = absl::Milliseconds(100);
  }
  return true;
}

void SpliceStream::OnBatch(redisstore::MaterializationStore& store,
                           const redisstore::StreamBatch& batch, bool facts_fired) {
  if (Stopping() || phase_ != Phase::kTailing) return;
  if (absl::Status s = HandleBatch(store, batch, facts_fired); !s.ok()) Fail(s);
}

absl::Status SpliceStream::HandleBatch(redisstore::MaterializationStore& store,
                                       const redisstore::StreamBatch& batch, bool facts_fired) {
  if (restart_ || delivery_->generation() != generation_ || !delivery_->connected()) {
    EndSession();  // start over from the persisted cursor
    return absl::OkStatus();
  }
  // What still arrives is delivered; the stream is not live while its materialization is not.
  FollowMaterializationState(store);
  if (facts_fired) {
    absl::Time now = absl::Now();
    for (Pending& pending : pending_) pending.next_lookup = now;  // look again right away
  }
  // Judged on every read: what the entries come from must still be the lineage tailed.
  redisstore::LineageTracker::Judgement judged = lineage_.Observe(batch.mark);
  if (judged.verdict == redisstore::LineageTracker::Verdict::kLost) {
    NoteLoss(*judged.loss);
    EndSession();  // the next session waits for the rebuild
    return absl::OkStatus();
  }
  if (judged.verdict == redisstore::LineageTracker::Verdict::kRenewed) {
    runtime::LogInfo("materialization rebuilt (a new incarnation); splicing again",
                     {{"stream", key_}, {"incarnation", lineage_.incarnation()}});
    EndSession();  // the next session splices: the cursor is of the old one
    return absl::OkStatus();
  }
  if (batch.behind_checkpoint) {
    // The stream was trimmed past what we delivered: splice again.
    runtime::LogInfo("stream trimmed past the cursor; splicing again", {{"stream", key_}});
    SetState(reverser::v1::STREAM_STATE_REPLAYING, "ExpiredResourceVersion",
             absl::StrCat("stream trimmed past ", position_.ToString()));
    resync_reason_ = "ResumeReplay";
    resync_is_resplice_ = false;
    phase_ = Phase::kResyncing;
    return Step(store);
  }
  TargetScope target_scope;
  {
    std::lock_guard lock(mu_);
    target_scope = options_.scope;
  }
  absl::Time now = absl::Now();
  for (const auto& entry : batch.entries) {
    // The read serves every follower from its own position: only what lies after this one's.
    if (entry.position <= position_) continue;
    {
      std::lock_guard lock(mu_);
      tracked_[entry.position] = false;
    }
    Derivation derived = DeriveEvent(entry, target_scope, options_.claim.type().gvr(), dedup_,
                                     options_.claim.type().gvk().kind());
    std::string previous_version;
    if (options_.attribution && options_.admission_facts &&
        derived.skipped != SkipReason::kOutOfScope && !entry.uid.empty()) {
      // Every entry in scope moves the version, also one that needs no event (a status change).
      if (entry.op == redisstore::ChangeOp::kDeleted) {
        if (auto node = latest_versions_.extract(entry.uid)) previous_version = node.mapped();
      } else {
        std::string& latest = latest_versions_[entry.uid];
        previous_version = std::exchange(latest, entry.resource_version);
      }
    }
    if (derived.skipped == SkipReason::kTooDeep) {
      NoteTooDeep(entry.namespace_, entry.name, entry.uid, entry.position);
    } else if (derived.event) {
      too_deep_logged_.erase(entry.Identity());  // deliverable again: a new refusal logs
    }
    if (!derived.event) {
      metrics_
          ->GetCounter("reverser_splicer_entries_skipped_total",
                       "Stream entries that needed no event.",
                       [&] {
                         runtime::Labels l = labels_;
                         l.emplace_back("reason", SkipReasonName(derived.skipped));
                         return l;
                       }())
          .Increment();
      MarkDone(entry.position);
      continue;
    }
    Pending pending{entry.position,
                    std::move(*derived.event),
                    entry.resource_version,
                    std::move(previous_version),
                    entry.op == redisstore::ChangeOp::kAdded,
                    now,
                    now,
                    std::nullopt,
                    false,
                    now,
                    options_.attribution_first_poll};
    // Authors are looked up in EmitReady, all due ones together (with no grace: all of them,
    // each once), not between the derivations here.
    pending_.push_back(std::move(pending));
  }
  if (batch.entries.empty() && pending_.empty()) {
    std::lock_guard lock(mu_);
    if (tracked_.empty() && cursor_ < batch.last_scanned) {
      cursor_ = batch.last_scanned;  // only malformed entries were skipped
      cursor_dirty_ = true;
    }
  }
  position_ = std::max(position_, batch.last_scanned);
  if (absl::Status s = EmitReady(); !s.ok()) {
    if (absl::IsUnavailable(s)) {
      EndSession();
      return absl::OkStatus();
    }
    return s;
  }
  return absl::OkStatus();
}

}  // namespace reverser::splicer
