#include "services/materializer/type_materializer.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "libs/core/status.h"
#include "libs/runtime/log.h"
#include "services/materializer/stream_entries.h"

namespace reverser::materializer {
namespace {

using redisstore::ChangeSource;

// identity -> what `materialized` holds for it (nullopt: nothing), for every identity whose
// body differs between `materialized` and `listed`.
std::map<std::string, std::optional<std::string>> Differences(
    const redisstore::ObjectMap& materialized, const redisstore::ObjectMap& listed) {
  std::map<std::string, std::optional<std::string>> out;
  auto i = materialized.begin();
  auto j = listed.begin();
  while (i != materialized.end() || j != listed.end()) {
    if (j == listed.end() || (i != materialized.end() && i->first < j->first)) {
      out[i->first] = i->second;
      ++i;
    } else if (i == materialized.end() || j->first < i->first) {
      out[j->first] = std::nullopt;
      ++j;
    } else {
      if (i->second != j->second) out[i->first] = i->second;
      ++i, ++j;
    }
  }
  return out;
}

}  // namespace

absl::StatusOr<Intake> ParseIntake(absl::string_view name) {
  if (name == "watch") return Intake::kWatch;
  if (name == "audit") return Intake::kAudit;
  return absl::InvalidArgumentError(
      absl::StrCat("--intake=\"", name, "\": expected watch or audit"));
}

TypeMaterializer::TypeMaterializer(std::shared_ptr<kube::RestClient> client,
                                   TypeMaterializerOptions options,
                                   runtime::MetricsRegistry* metrics)
    : client_(std::move(client)), options_(std::move(options)), metrics_(metrics) {
  labels_ = {{"group", options_.gvr.group},
             {"version", options_.gvr.version},
             {"resource", options_.gvr.resource},
             {"scope", options_.scope.KeySegment()}};
  status_.phase = "Replaying";
  status_.reason = "InitialReplay";
}

TypeMaterializer::~TypeMaterializer() { Stop(); }

std::string TypeMaterializer::Name() const {
  return absl::StrCat(options_.gvr.ToString(), " ", options_.scope.KeySegment());
}

void TypeMaterializer::Start() {
  thread_ = std::thread([this] { Run(); });
}

void TypeMaterializer::Stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    if (reflector_) reflector_->Stop();
  }
  stop_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

absl::Status TypeMaterializer::StopAndRelease() {
  Stop();
  auto redis = redisstore::RedisConnection::Connect(options_.redis);
  if (!redis.ok()) return redis.status();
  return StoreOn(redis->get()).Release();
}

TypeMaterializerStatus TypeMaterializer::Status() const {
  std::lock_guard lock(mu_);
  return status_;
}

void TypeMaterializer::SetPhase(const std::string& phase, const std::string& requested_reason,
                                const std::string& detail) {
  std::string reason = requested_reason;
  std::string message = detail.empty() ? reason : detail;
  {
    std::lock_guard lock(mu_);
    if (rebuilding_ && phase == "Replaying") {
      reason = std::string(kRedisStateLostReason);
      message = absl::StrCat("Rebuilding after Redis state loss (",
                             redisstore::StateLossText(*rebuilding_), ")");
    }
    if (status_.phase == phase && status_.reason == reason && !state_record_stale_) return;
    state_record_stale_ = false;
    status_.phase = phase;
    status_.reason = reason;
    if (phase == "Streaming") streaming_reason_ = reason;
  }
  runtime::LogInfo("materialization phase",
                   {{"type", Name()}, {"phase", phase}, {"reason", reason}});
  if (store_) {
    redisstore::MaterializationState state;
    state.phase = phase;
    state.gvr = options_.gvr;
    state.scope = options_.scope;
    state.updated_at = absl::Now();
    state.message = message;
    state.reason = reason;
    {
      std::lock_guard lock(mu_);
      state.checkpoint = status_.checkpoint;
    }
    (void)store_->WriteState(state);  // informational; the next phase change rewrites it
  }
}

std::optional<redisstore::StateLoss> TypeMaterializer::CheckState(
    redisstore::MaterializationStore& store) {
  const uint64_t epoch = lineage_.epoch();
  auto mark = store.ReadMark();
  if (!mark.ok()) return std::nullopt;  // Redis down: the next check (or append) tells
  auto judged = lineage_.ObserveIfCurrent(*mark, epoch);
  if (!judged || judged->verdict != redisstore::LineageTracker::Verdict::kLost) {
    return std::nullopt;
  }
  return judged->loss;
}

void TypeMaterializer::OnStateLost(redisstore::StateLoss loss) {
  {
    std::lock_guard lock(mu_);
    if (rebuilding_) return;  // counted once per rebuild
    rebuilding_ = loss;
    ++status_.state_losses;
    status_.phase = "Replaying";
    status_.reason = std::string(kRedisStateLostReason);
    status_.checkpoint.clear();  // gone from Redis: never reported from memory
    status_.last_error = absl::StrCat("Redis state lost: ", redisstore::StateLossText(loss));
    state_record_stale_ = true;
    if (options_.intake == Intake::kWatch) {
      rebuild_requested_ = true;
      if (reflector_) reflector_->Stop();
    }
  }
  runtime::Labels labels = labels_;
  labels.emplace_back("reason", std::string(redisstore::StateLossName(loss)));
  metrics_
      ->GetCounter("reverser_materializer_state_lost_total",
                   "Lost or rolled-back Redis state detected (each rebuilt from a fresh LIST), "
                   "by reason.",
                   labels)
      .Increment();
  runtime::LogWarning("Redis state lost; rebuilding the materialization from a fresh LIST",
                      {{"type", Name()},
                       {"reason", std::string(redisstore::StateLossName(loss))},
                       {"incarnation", lineage_.incarnation()},
                       {"head", lineage_.head().ToString()}});
  if (options_.intake == Intake::kWatch) {
    {
      std::lock_guard lock(append_mu_);
      append_queue_.clear();  // the full sync covers every change queued before it
    }
    append_cv_.notify_all();
  }
}

void TypeMaterializer::OnRebuilt(const redisstore::CheckpointSwap& swap) {
  std::optional<redisstore::StateLoss> loss;
  {
    std::lock_guard lock(mu_);
    loss.swap(rebuilding_);
    state_record_stale_ = true;
  }
  if (!loss) return;
  runtime::LogInfo("materialization rebuilt after Redis state loss",
                   {{"type", Name()},
                    {"reason", std::string(redisstore::StateLossName(*loss))},
                    {"position", swap.position.ToString()},
                    {"incarnation", swap.incarnation}});
}

template <typename Fn>
auto TypeMaterializer::WithRetry(const char* what, Fn op) -> decltype(op()) {
  absl::Duration backoff = absl::Milliseconds(100);
  while (true) {
    auto result = op();
    // Lost state is not retried: what to write has to be rebuilt first.
    if (result.ok() || stopping_ || redisstore::StateLossOf(result.status())) return result;
    {
      std::lock_guard lock(mu_);
      status_.last_error = result.status().ToString();
    }
    runtime::LogWarning("redis write failed; retrying",
                        {{"type", Name()}, {"op", what}, {"error", result.status().ToString()}});
    metrics_
        ->GetCounter("reverser_materializer_redis_retries_total",
                     "Redis writes retried by materializers.", labels_)
        .Increment();
    if (WaitForStop(backoff)) return result;  // a stop does not wait out the backoff
    backoff = std::min(backoff * 2, absl::Seconds(5));
  }
}

void TypeMaterializer::Run() {
  auto redis =
      WithRetry("connect", [&] { return redisstore::RedisConnection::Connect(options_.redis); });
  if (!redis.ok()) return;  // stopping
  redis_ = std::move(*redis);
  store_ = std::make_unique<redisstore::MaterializationStore>(StoreOn(redis_.get()));
  store_->GuardAppends(&lineage_);
  auto mark = WithRetry("read checkpoint", [&] { return store_->ReadMark(); });
  if (!mark.ok()) return;
  const redisstore::LineageTracker::Judgement judged = lineage_.Observe(*mark);
  // A damaged checkpoint is rebuilt by the first LIST, like a missing one.
  if (judged.loss) OnStateLost(*judged.loss);
  const bool has_checkpoint = judged.verdict == redisstore::LineageTracker::Verdict::kSame;
  uint64_t resume = 0;
  if (has_checkpoint) {
    // Only the changes after the stream top are needed.
    resume = mark->Head().rv();
    std::lock_guard lock(mu_);
    status_.checkpoint = mark->checkpoint->ToString();
  }
  if (options_.intake == Intake::kAudit) {
    if (has_checkpoint) SetPhase("Streaming", "ResumedFromCursor");
    RunAuditIntake();
  } else {
    RunWatchIntake(has_checkpoint, resume);
  }
}

void TypeMaterializer::RunWatchIntake(bool has_checkpoint, uint64_t resume_rv) {
  while (!stopping_) {
    rebuild_requested_ = false;
    RunWatch(has_checkpoint, resume_rv);
    if (stopping_ || !rebuild_requested_) return;
    has_checkpoint = false;  // lost state: a full sync rebuilds the checkpoint
  }
}

void TypeMaterializer::RunWatch(bool has_checkpoint, uint64_t resume_rv) {
  kube::ReflectorOptions reflector_options;
  reflector_options.gvr = options_.gvr;
  reflector_options.namespace_ = options_.scope.IsCluster() ? "" : options_.scope.namespace_;
  reflector_options.use_watch_list = options_.use_watch_list;
  // Objects are stored, not read: keep them as text for StoreObjectJson's fast path.
  reflector_options.raw_objects = true;
  // Resume: a checkpoint exists, so only the changes after the stream top are needed.
  if (has_checkpoint) {
    reflector_options.resume_resource_version = std::to_string(resume_rv);
    SetPhase("Streaming", "ResumedFromCursor");
    runtime::LogInfo("materialization resumed",
                     {{"type", Name()}, {"resource_version", resume_rv}});
  } else {
    SetPhase("Replaying", "InitialReplay");
  }
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;
    reflector_ = std::make_unique<kube::Reflector>(*client_, reflector_options,
                                                   static_cast<kube::WatchHandler&>(*this));
  }
  StartAppendWriter();
  absl::Status run = reflector_->Run();
  StopAppendWriter();
  if (!run.ok()) {
    runtime::LogError("materialization stopped", {{"type", Name()}, {"error", run.ToString()}});
    SetPhase("Blocked", "WatchError");
  }
}

bool TypeMaterializer::WaitForStop(absl::Duration timeout) {
  std::unique_lock lock(mu_);
  return stop_cv_.wait_for(lock, absl::ToChronoNanoseconds(timeout),
                           [this] { return stopping_.load(); });
}

void TypeMaterializer::RunAuditIntake() {
  absl::Duration backoff = absl::Milliseconds(800);
  bool rebuild = false;  // lost state: the next LIST replaces the checkpoint outright
  while (!stopping_) {
    absl::Status listed = Relist(rebuild);
    if (stopping_) return;
    if (!listed.ok()) {
      {
        std::lock_guard lock(mu_);
        status_.last_error = listed.ToString();
      }
      runtime::Labels labels = labels_;
      labels.emplace_back("outcome", "error");
      metrics_
          ->GetCounter("reverser_materializer_relists_total",
                       "Audit intake: periodic LISTs by outcome (initial, unchanged, "
                       "deferred, healed, superseded, rebuilt, error).",
                       labels)
          .Increment();
      runtime::LogWarning("list failed", {{"type", Name()}, {"error", listed.ToString()}});
      SetPhase(Status().checkpoint.empty() ? "Replaying" : "Blocked", "ListError");
      if (WaitForStop(backoff)) return;
      backoff = std::min(backoff * 2, absl::Seconds(30));
      continue;
    }
    backoff = absl::Milliseconds(800);
    rebuild = false;
    // Until the next LIST, keep the stream within its bound (the audit webhook appends to it),
    // watch for early-LIST requests and look for lost state.
    const absl::Time listed_at = absl::Now();
    absl::Time next_compaction_check = listed_at + options_.compaction_check_interval;
    absl::Time next_state_check = listed_at + options_.state_check_interval;
    const ClaimKey self{options_.gvr, options_.scope};
    absl::Time next_list = listed_at + options_.relist_interval;
    // Differences waiting to settle are looked at again as soon as the oldest could count.
    for (const auto& [identity, difference] : unhealed_) {
      next_list = std::min(next_list, std::max(difference.first_seen + options_.heal_settle,
                                               listed_at + options_.relist_request_min_gap));
    }
    while (absl::Now() < next_list) {
      absl::Duration tick =
          std::min({next_list, next_compaction_check, next_state_check}) - absl::Now();
      if (options_.relist_requests) tick = std::min(tick, options_.relist_request_poll);
      if (WaitForStop(std::max(tick, absl::ZeroDuration()))) return;
      if (absl::Now() >= next_state_check) {
        next_state_check = absl::Now() + options_.state_check_interval;
        if (auto loss = CheckState(*store_)) {
          OnStateLost(*loss);
          rebuild = true;
          break;
        }
      }
      if (absl::Now() >= next_compaction_check) {
        CompactIfLong();
        next_compaction_check = absl::Now() + options_.compaction_check_interval;
      }
      if (options_.relist_requests && absl::Now() >= listed_at + options_.relist_request_min_gap &&
          options_.relist_requests->TakeRelistRequest(self)) {
        runtime::LogInfo("early LIST: the audit log missed a change", {{"type", Name()}});
        break;
      }
    }
  }
}

absl::Status TypeMaterializer::Relist(bool rebuild) {
  const std::string ns = options_.scope.IsCluster() ? "" : options_.scope.namespace_;
  redisstore::ObjectMap items;
  kube::ListOptions list_options;
  list_options.limit = options_.list_page_size;
  std::string list_rv;
  std::vector<std::string> refused;  // identities of the items the client refused
  // Pages of one LIST share its snapshot; an expired continue token restarts it (Expired error).
  do {
    ASSIGN_OR_RETURN(kube::ListPage page, client_->List(options_.gvr, ns, list_options));
    if (list_rv.empty()) list_rv = page.resource_version;
    for (const kube::RefusedObject& object : page.refused) {
      std::string identity = RecordRefusal(object, "LIST");
      if (!identity.empty()) refused.push_back(std::move(identity));
    }
    for (nlohmann::json& item : page.items) {
      SetTypeFromList(item, page.kind, page.api_version);
      items[redisstore::ObjectIdentity(ObjectMetadata(item, "namespace"),
                                       ObjectMetadata(item, "name"))] = StoredObjectJson(item);
    }
    list_options.continue_token = page.continue_token;
  } while (!list_options.continue_token.empty() && !stopping_);
  if (stopping_) return absl::OkStatus();
  ASSIGN_OR_RETURN(uint64_t rv, core::ParseResourceVersion(list_rv));
  const core::StreamPosition covered = core::StreamPosition::EndOf(rv);

  auto view = WithRetry("load materialization", [&] { return store_->Load(); });
  if (!view.ok()) return absl::OkStatus();  // stopping
  if (auto judged = lineage_.Observe(view->mark); judged.loss) {
    OnStateLost(*judged.loss);
    rebuild = true;
  }
  std::string outcome;
  size_t lasting = 0;
  if (rebuild) {
    // The LIST replaces whatever is there: no settling, no fold onto a state that was lost.
    unhealed_.clear();
  } else if (view->checkpoint && *view->checkpoint > covered) {
    outcome = "superseded";  // a newer checkpoint (a compaction past R) is in place
  } else if (view->checkpoint) {
    const redisstore::ObjectMap folded = view->Fold(covered);
    KeepLastStored(folded, refused, items);
    // Differences healed only once the stream has not moved for that object for heal_settle.
    const absl::Time now = absl::Now();
    std::map<std::string, UnhealedDifference> still;
    for (auto& [identity, materialized] : Differences(folded, items)) {
      auto seen = unhealed_.find(identity);
      if (seen != unhealed_.end() && seen->second.materialized == materialized) {
        if (now - seen->second.first_seen >= options_.heal_settle) ++lasting;
        still.emplace(identity, seen->second);
      } else {
        still.emplace(identity, UnhealedDifference{std::move(materialized), now});
      }
    }
    unhealed_ = std::move(still);
    if (lasting == 0) {
      // Fold what is there instead of replacing the checkpoint, so a reader already past those
      // entries keeps its place.
      outcome = unhealed_.empty() ? "unchanged" : "deferred";
      auto compacted =
          WithRetry("fold confirmed entries", [&] { return store_->CompactView(*view, covered); });
      if (!compacted.ok()) return absl::OkStatus();
      CountCompaction(*compacted);
    }
  }
  if (outcome.empty()) {
    auto swap =
        WithRetry("replace checkpoint", [&] { return store_->ReplaceCheckpoint(items, covered); });
    if (!swap.ok()) return absl::OkStatus();
    outcome = rebuild             ? "rebuilt"
              : !view->checkpoint ? "initial"
              : swap->swapped     ? "healed"
                                  : "superseded";
    OnRebuilt(*swap);
    if (swap->swapped) {
      unhealed_.clear();
      std::lock_guard lock(mu_);
      status_.checkpoint = swap->position.ToString();
      ++status_.replays;
    }
    if (outcome == "healed") {
      runtime::LogWarning("LIST found changes the audit log did not deliver; checkpoint replaced",
                          {{"type", Name()},
                           {"objects", static_cast<long long>(lasting)},
                           {"position", swap->position.ToString()}});
    }
  }
  runtime::Labels labels = labels_;
  labels.emplace_back("outcome", outcome);
  metrics_
      ->GetCounter("reverser_materializer_relists_total",
                   "Audit intake: periodic LISTs by outcome (initial, unchanged, deferred, "
                   "healed, superseded, rebuilt, error).",
                   labels)
      .Increment();
  if (outcome == "healed") {
    metrics_
        ->GetCounter("reverser_materializer_relist_healed_objects_total",
                     "Audit intake: objects a LIST healed (still different after the settle time).",
                     labels_)
        .Increment(static_cast<double>(lasting));
  }
  if (outcome != "deferred" && outcome != "superseded") {  // the checkpoint now holds `items`
    metrics_
        ->GetGauge("reverser_materializer_checkpoint_items", "Objects in the checkpoint.", labels_)
        .Set(static_cast<double>(items.size()));
  }
  {
    std::lock_guard lock(mu_);
    ++status_.relists;
  }
  SetPhase("Streaming", "AuditIntake");
  return absl::OkStatus();
}

void TypeMaterializer::OnEvent(const kube::ReflectorEvent& event) {
  using Type = kube::ReflectorEventType;
  // Lost state: this watch is being stopped; the next one's full sync covers everything.
  if (rebuild_requested_) return;
  if (event.type != Type::kSyncStarted && !collecting_) {
    // A resumed watch got past a 403 (a sync in progress sets its own phase).
    bool blocked;
    {
      std::lock_guard lock(mu_);
      blocked = status_.phase == "Blocked";
    }
    if (blocked) SetPhase("Streaming", streaming_reason_);
  }
  switch (event.type) {
    case Type::kSyncStarted:
      FlushAppends();  // the live changes before the relist land before its checkpoint
      collecting_ = true;
      pending_checkpoint_.clear();
      refused_in_sync_.clear();
      SetPhase("Replaying", event.reason == kube::SyncReason::kExpired ? "ExpiredResourceVersion"
                            : event.reason == kube::SyncReason::kRetry ? "ResumeReplay"
                                                                       : "InitialReplay");
      return;
    case Type::kInitialEventsEnd: {
      if (!collecting_) return;
      collecting_ = false;
      FlushAppends();
      auto rv = core::ParseResourceVersion(event.resource_version);
      if (!rv.ok()) {
        SetPhase("Blocked", "WatchError");
        return;
      }
      if (!refused_in_sync_.empty()) {
        // The listing left out objects it refused; they keep their last stored bodies rather
        // than vanish from the materialization (and from Git) while they still exist.
        auto view = WithRetry("load materialization", [&] { return store_->Load(); });
        if (!view.ok()) return;  // stopping
        KeepLastStored(view->Fold(), refused_in_sync_, pending_checkpoint_);
        refused_in_sync_.clear();
      }
      auto swap = WithRetry("replace checkpoint", [&] {
        return store_->ReplaceCheckpoint(pending_checkpoint_, core::StreamPosition::EndOf(*rv));
      });
      if (!swap.ok()) return;
      OnRebuilt(*swap);
      metrics_
          ->GetCounter("reverser_materializer_replays_total",
                       "Checkpoints rebuilt from a full replay.", labels_)
          .Increment();
      metrics_
          ->GetGauge("reverser_materializer_checkpoint_items", "Objects in the checkpoint.",
                     labels_)
          .Set(static_cast<double>(pending_checkpoint_.size()));
      {
        std::lock_guard lock(mu_);
        status_.checkpoint = swap->position.ToString();
        ++status_.replays;
      }
      runtime::LogInfo("checkpoint replaced",
                       {{"type", Name()},
                        {"items", static_cast<long long>(pending_checkpoint_.size())},
                        {"position", swap->position.ToString()},
                        {"trimmed", static_cast<long long>(swap->trimmed)}});
      pending_checkpoint_.clear();
      SetPhase("Streaming", "AllStreamsReady");
      return;
    }
    case Type::kBookmark:
      return;  // the reflector keeps its own cursor; the stream top covers restarts
    case Type::kAdded:
    case Type::kModified:
    case Type::kDeleted:
      break;
  }
  absl::StatusOr<StoredObject> object = StoreObjectJson(event.object_json);
  if (!object.ok()) {
    // The watch frame was well-formed but its object is not JSON: no API server sends this.
    // Nothing can be stored for it; say so and count it rather than stall the type.
    metrics_
        ->GetCounter("reverser_materializer_undecodable_objects_total",
                     "Watch objects that are not valid JSON (skipped).", labels_)
        .Increment();
    runtime::LogError("watch object is not valid JSON",
                      {{"type", Name()},
                       {"error", object.status().ToString()},
                       {"resource_version", event.resource_version}});
    return;
  }
  if (event.initial && collecting_) {
    pending_checkpoint_[redisstore::ObjectIdentity(object->namespace_, object->name)] =
        std::move(object->json);
    return;
  }
  redisstore::ChangeOp op = event.type == Type::kAdded      ? redisstore::ChangeOp::kAdded
                            : event.type == Type::kModified ? redisstore::ChangeOp::kModified
                                                            : redisstore::ChangeOp::kDeleted;
  QueueAppend(MakeStreamEntry(op, *std::move(object), ChangeSource::kWatch));
}

void TypeMaterializer::StartAppendWriter() {
  {
    std::lock_guard lock(append_mu_);
    append_writer_exit_ = false;
  }
  append_writer_ = std::thread([this] { WriteAppends(); });
}

void TypeMaterializer::StopAppendWriter() {
  {
    std::lock_guard lock(append_mu_);
    append_writer_exit_ = true;
  }
  append_cv_.notify_all();
  if (append_writer_.joinable()) append_writer_.join();
}

void TypeMaterializer::QueueAppend(redisstore::StreamEntry entry) {
  {
    std::unique_lock lock(append_mu_);
    append_cv_.wait(
        lock, [this] { return append_queue_.size() < kMaxQueuedAppends || rebuild_requested_; });
    if (rebuild_requested_) return;  // the rebuild's full sync covers it
    append_queue_.push_back(std::move(entry));
  }
  append_cv_.notify_all();
}

void TypeMaterializer::FlushAppends() {
  std::unique_lock lock(append_mu_);
  append_cv_.wait(lock, [this] { return append_queue_.empty() && !append_writing_; });
}

void TypeMaterializer::CheckStateWhileIdle() {
  {
    std::lock_guard lock(mu_);
    if (rebuilding_) return;  // the rebuild is under way
  }
  if (!check_redis_) {
    auto redis = redisstore::RedisConnection::Connect(options_.redis);
    if (!redis.ok()) return;  // Redis down: looked at again next time
    check_redis_ = std::move(*redis);
  }
  redisstore::MaterializationStore store = StoreOn(check_redis_.get());
  if (auto loss = CheckState(store)) OnStateLost(*loss);
}

void TypeMaterializer::WriteAppends() {
  std::unique_lock lock(append_mu_);
  absl::Time next_check = absl::Now() + options_.state_check_interval;
  while (true) {
    const bool woken = append_cv_.wait_for(
        lock, absl::ToChronoNanoseconds(std::max(next_check - absl::Now(), absl::ZeroDuration())),
        [this] { return !append_queue_.empty() || append_writer_exit_; });
    if (!woken) {
      // Nothing to append for a while: look at the keys anyway, so lost state is noticed
      // without waiting for the next change.
      lock.unlock();
      CheckStateWhileIdle();
      lock.lock();
      next_check = absl::Now() + options_.state_check_interval;
      continue;
    }
    if (append_queue_.empty()) return;  // asked to exit and nothing is left
    // Whatever queued up while the previous batch was written goes in one round trip.
    std::vector<redisstore::StreamEntry> batch;
    batch.reserve(std::min(append_queue_.size(), kMaxAppendBatch));
    while (!append_queue_.empty() && batch.size() < kMaxAppendBatch) {
      batch.push_back(std::move(append_queue_.front()));
      append_queue_.pop_front();
    }
    append_writing_ = true;
    lock.unlock();
    append_cv_.notify_all();  // room in the queue
    // Resending a whole batch after an error is safe: every watch change has an RV, so what
    // already landed is diverted, never applied twice. When the worker stops mid-retry the
    // batch is dropped; the next start resumes from the stream top and reads it again.
    auto results = WithRetry("append", [&] { return store_->AppendAll(batch); });
    if (results.ok()) {
      metrics_
          ->GetCounter("reverser_materializer_append_batches_total",
                       "Watch intake: AppendAll round trips (stream appends plus diversions "
                       "over this is the mean batch).",
                       labels_)
          .Increment();
      for (const redisstore::AppendResult& result : *results) CountAppend(result);
      MaybeCompact(batch.size());
      next_check = absl::Now() + options_.state_check_interval;  // the append just looked
    } else if (auto loss = redisstore::StateLossOf(results.status())) {
      OnStateLost(*loss);  // this batch and the queue are dropped: the rebuild covers them
    }
    lock.lock();
    append_writing_ = false;
    append_cv_.notify_all();  // flushers
  }
}

void TypeMaterializer::CountAppend(const redisstore::AppendResult& result) {
  if (result.appended) {
    metrics_
        ->GetCounter("reverser_materializer_stream_appends_total", "Stream entries appended.",
                     labels_)
        .Increment();
    std::lock_guard lock(mu_);
    ++status_.appended;
  } else {
    runtime::Labels labels = labels_;
    labels.emplace_back("reason", std::string(redisstore::DivertReasonName(
                                      result.diverted.value_or(redisstore::DivertReason{}))));
    metrics_
        ->GetCounter("reverser_materializer_stream_diversions_total",
                     "Stream entries diverted (not above the stream top).", labels)
        .Increment();
    std::lock_guard lock(mu_);
    ++status_.diverted;
  }
}

void TypeMaterializer::MaybeCompact(size_t appended) {
  // Checking the length on every append would double the Redis round trips.
  appends_since_compaction_check_ += appended;
  if (appends_since_compaction_check_ < options_.compact_after_entries / 10 + 1) return;
  appends_since_compaction_check_ = 0;
  CompactIfLong();
}

void TypeMaterializer::CompactIfLong() {
  auto length = redis_->Command({"XLEN", store_->keys().stream});
  if (!length.ok() || !length->AsInteger().ok()) return;
  if (static_cast<size_t>(*length->AsInteger()) <= options_.compact_after_entries) return;
  auto compacted = store_->Compact();
  if (compacted.ok()) CountCompaction(*compacted);
}

void TypeMaterializer::CountCompaction(const redisstore::CompactionResult& result) {
  if (!result.compacted) return;
  metrics_
      ->GetCounter("reverser_materializer_compactions_total",
                   "Streams folded into a new checkpoint.", labels_)
      .Increment();
  std::lock_guard lock(mu_);
  status_.checkpoint = result.position.ToString();
}

absl::StatusOr<redisstore::MaterializationStore> TypeMaterializer::AdminStore() {
  if (!admin_redis_) {
    ASSIGN_OR_RETURN(admin_redis_, redisstore::RedisConnection::Connect(options_.redis));
  }
  return StoreOn(admin_redis_.get());
}

redisstore::MaterializationStore TypeMaterializer::StoreOn(redisstore::RedisConnection* redis) const {
  redisstore::MaterializationStore store(redis, options_.prefix, options_.gvr, options_.scope);
  store.UseBodyCipher(options_.body_cipher, options_.sensitive);
  return store;
}

absl::StatusOr<redisstore::CompactionResult> TypeMaterializer::CompactNow() {
  std::lock_guard admin(admin_mu_);
  ASSIGN_OR_RETURN(redisstore::MaterializationStore store, AdminStore());
  ASSIGN_OR_RETURN(redisstore::CompactionResult result, store.Compact());
  CountCompaction(result);
  runtime::LogInfo("compaction requested", {{"type", Name()},
                                            {"compacted", result.compacted},
                                            {"folded", static_cast<long long>(result.folded)},
                                            {"position", result.position.ToString()}});
  return result;
}

absl::StatusOr<TypeMaterializer::StoredFacts> TypeMaterializer::ReadStoredFacts() {
  std::lock_guard admin(admin_mu_);
  ASSIGN_OR_RETURN(redisstore::MaterializationStore store, AdminStore());
  ASSIGN_OR_RETURN(redisstore::RedisReply length,
                   admin_redis_->Command({"XLEN", store.keys().stream}));
  ASSIGN_OR_RETURN(redisstore::MaterializationCounts counts, store.ReadCounts());
  StoredFacts facts;
  ASSIGN_OR_RETURN(facts.stream_length, length.AsInteger());
  for (const auto& [reason, n] : counts.diverted) facts.diverted += n;
  return facts;
}

std::string TypeMaterializer::RecordRefusal(const kube::RefusedObject& object,
                                            absl::string_view event_type) {
  runtime::Labels labels = labels_;
  labels.emplace_back("reason", object.reason);
  metrics_
      ->GetCounter("reverser_materializer_refused_objects_total",
                   "Objects the API server holds that could not be stored (nested deeper than "
                   "--json_max_depth), by reason.",
                   labels)
      .Increment();
  const std::string where =
      object.namespace_.empty() ? object.name : absl::StrCat(object.namespace_, "/", object.name);
  {
    std::lock_guard lock(mu_);
    ++status_.refused_objects;
    status_.last_refused = absl::StrCat(object.kind.empty() ? "object" : object.kind, " ",
                                        where.empty() ? "(unnamed)" : where, " rv ",
                                        object.resource_version, ": ", object.message);
  }
  const std::string identity =
      object.name.empty() ? "" : redisstore::ObjectIdentity(object.namespace_, object.name);
  // Once per object version: a relist meets the same object again.
  const std::string logged = absl::StrCat(identity, "@", object.resource_version);
  if (logged_refusals_.size() >= 4096) logged_refusals_.clear();
  if (logged_refusals_.insert(logged).second) {
    runtime::LogError("object refused: not stored (it keeps its last stored body, if any)",
                      {{"type", Name()},
                       {"event", event_type},
                       {"reason", object.reason},
                       {"error", object.message},
                       {"kind", object.kind},
                       {"namespace", object.namespace_},
                       {"name", object.name},
                       {"uid", object.uid},
                       {"resource_version", object.resource_version}});
  }
  return identity;
}

void TypeMaterializer::KeepLastStored(const redisstore::ObjectMap& materialized,
                                      const std::vector<std::string>& refused,
                                      redisstore::ObjectMap& items) {
  for (const std::string& identity : refused) {
    auto last = materialized.find(identity);
    if (last != materialized.end()) items[identity] = last->second;
  }
}

void TypeMaterializer::OnRefused(kube::ReflectorEventType type, const kube::RefusedObject& object,
                                 bool initial) {
  const std::string identity = RecordRefusal(object, kube::ReflectorEventTypeName(type));
  if (identity.empty()) return;
  if (initial && collecting_) {
    refused_in_sync_.push_back(identity);
    return;
  }
  if (type != kube::ReflectorEventType::kDeleted) return;  // the last stored body stays
  // A deletion needs only the identity: it is recorded, so the object does not outlive itself.
  nlohmann::json stub = {{"apiVersion", object.api_version},
                         {"kind", object.kind},
                         {"metadata",
                          {{"name", object.name},
                           {"namespace", object.namespace_},
                           {"uid", object.uid},
                           {"resourceVersion", object.resource_version}}}};
  if (object.namespace_.empty()) stub["metadata"].erase("namespace");
  QueueAppend(MakeStreamEntry(redisstore::ChangeOp::kDeleted, stub, ChangeSource::kWatch));
}

void TypeMaterializer::OnError(const absl::Status& status) {
  const bool forbidden = absl::IsPermissionDenied(status);
  std::string reason = forbidden ? "WatchNotPermitted" : "WatchError";
  {
    std::lock_guard lock(mu_);
    status_.last_error = status.ToString();
  }
  // RBAC forbids the list/watch: blocked until a retry is allowed (the reflector keeps
  // retrying with backoff). Splice streams of this materialization show it as their state.
  if (forbidden) {
    SetPhase("Blocked", reason,
             absl::StrCat("list/watch of ", Name(), " forbidden: ", status.message()));
  }
  metrics_
      ->GetCounter("reverser_materializer_watch_restarts_total", "Watch restarts by reason.",
                   [&] {
                     runtime::Labels l = labels_;
                     l.emplace_back("reason", reason);
                     return l;
                   }())
      .Increment();
  runtime::LogWarning("watch error", {{"type", Name()}, {"error", status.ToString()}});
}

}  // namespace reverser::materializer
