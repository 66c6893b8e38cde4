#include "services/materializer/watch_intake.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "libs/runtime/log.h"
#include "services/materializer/stream_entries.h"

namespace reverser::materializer {

using redisstore::ChangeSource;

WatchIntake::WatchIntake(std::shared_ptr<kube::RestClient> client, MaterializationCore* core)
    : client_(std::move(client)), core_(*core) {
  core_.SetStateLostListener(this);
}

WatchIntake::~WatchIntake() { core_.SetStateLostListener(nullptr); }

void WatchIntake::Run(const MaterializationCore::Opened& opened) {
  bool has_checkpoint = opened.has_checkpoint;
  while (!core_.stopping()) {
    rebuild_requested_ = false;
    RunWatch(has_checkpoint, opened.resume_rv);
    if (core_.stopping() || !rebuild_requested_) return;
    has_checkpoint = false;  // lost state: a full sync rebuilds the checkpoint
  }
}

void WatchIntake::Interrupt() {
  std::lock_guard lock(reflector_mu_);
  if (reflector_) reflector_->Stop();
}

void WatchIntake::OnStateLost() {
  rebuild_requested_ = true;
  {
    std::lock_guard lock(reflector_mu_);
    if (reflector_) reflector_->Stop();
  }
  {
    std::lock_guard lock(append_mu_);
    append_queue_.clear();  // the full sync covers every change queued before it
  }
  append_cv_.notify_all();
}

void WatchIntake::RunWatch(bool has_checkpoint, uint64_t resume_rv) {
  const TypeMaterializerOptions& options = core_.options();
  kube::ReflectorOptions reflector_options;
  reflector_options.gvr = options.gvr;
  reflector_options.namespace_ = options.scope.IsCluster() ? "" : options.scope.namespace_;
  reflector_options.use_watch_list = options.use_watch_list;
  // Objects are stored, not read: keep them as text for StoreObjectJson's fast path.
  reflector_options.raw_objects = true;
  // Resume: a checkpoint exists, so only the changes after the stream top are needed.
  if (has_checkpoint) {
    reflector_options.resume_resource_version = std::to_string(resume_rv);
    core_.SetPhase("Streaming", "ResumedFromCursor");
    runtime::LogInfo("materialization resumed",
                     {{"type", core_.Name()}, {"resource_version", resume_rv}});
  } else {
    core_.SetPhase("Replaying", "InitialReplay");
  }
  kube::Reflector* reflector;
  {
    // Interrupt takes this lock after the stop flag is set: either it sees this reflector or
    // this sees the flag.
    std::lock_guard lock(reflector_mu_);
    if (core_.stopping()) return;
    reflector_ = std::make_unique<kube::Reflector>(*client_, reflector_options,
                                                   static_cast<kube::WatchHandler&>(*this));
    reflector = reflector_.get();
  }
  StartAppendWriter();
  absl::Status run = reflector->Run();
  StopAppendWriter();
  if (!run.ok()) {
    runtime::LogError("materialization stopped",
                      {{"type", core_.Name()}, {"error", run.ToString()}});
    core_.SetPhase("Blocked", "WatchError");
  }
}

void WatchIntake::OnEvent(const kube::ReflectorEvent& event) {
  using Type = kube::ReflectorEventType;
  // Lost state: this watch is being stopped; the next one's full sync covers everything.
  if (rebuild_requested_) return;
  if (event.type != Type::kSyncStarted && !collecting_) {
    // A resumed watch got past a 403 (a sync in progress sets its own phase).
    if (core_.InPhase("Blocked")) core_.SetPhase("Streaming", core_.streaming_reason());
  }
  switch (event.type) {
    case Type::kSyncStarted:
      FlushAppends();  // the live changes before the relist land before its checkpoint
      collecting_ = true;
      pending_checkpoint_.clear();
      refused_in_sync_.clear();
      core_.SetPhase("Replaying", event.reason == kube::SyncReason::kExpired
                                      ? "ExpiredResourceVersion"
                                  : event.reason == kube::SyncReason::kRetry ? "ResumeReplay"
                                                                             : "InitialReplay");
      return;
    case Type::kInitialEventsEnd:
      if (!collecting_) return;
      collecting_ = false;
      FlushAppends();
      ReplaceCheckpoint(event.resource_version);
      return;
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
    core_.metrics()
        ->GetCounter("reverser_materializer_undecodable_objects_total",
                     "Watch objects that are not valid JSON (skipped).", core_.labels())
        .Increment();
    runtime::LogError("watch object is not valid JSON",
                      {{"type", core_.Name()},
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

void WatchIntake::ReplaceCheckpoint(const std::string& resource_version) {
  auto rv = core::ParseResourceVersion(resource_version);
  if (!rv.ok()) {
    core_.SetPhase("Blocked", "WatchError");
    return;
  }
  redisstore::MaterializationStore& store = core_.store();
  if (!refused_in_sync_.empty()) {
    // The listing left out objects it refused; they keep their last stored bodies rather than
    // vanish from the materialization (and from Git) while they still exist.
    auto view = core_.WithRetry("load materialization", [&] { return store.Load(); });
    if (!view.ok()) return;  // stopping
    MaterializationCore::KeepLastStored(view->Fold(), refused_in_sync_, pending_checkpoint_);
    refused_in_sync_.clear();
  }
  auto swap = core_.WithRetry("replace checkpoint", [&] {
    return store.ReplaceCheckpoint(pending_checkpoint_, core::StreamPosition::EndOf(*rv));
  });
  if (!swap.ok()) return;
  core_.OnRebuilt(*swap);
  core_.metrics()
      ->GetCounter("reverser_materializer_replays_total", "Checkpoints rebuilt from a full replay.",
                   core_.labels())
      .Increment();
  core_.metrics()
      ->GetGauge("reverser_materializer_checkpoint_items", "Objects in the checkpoint.",
                 core_.labels())
      .Set(static_cast<double>(pending_checkpoint_.size()));
  core_.UpdateStatus([&](TypeMaterializerStatus& status) {
    status.checkpoint = swap->position.ToString();
    ++status.replays;
  });
  runtime::LogInfo("checkpoint replaced",
                   {{"type", core_.Name()},
                    {"items", static_cast<long long>(pending_checkpoint_.size())},
                    {"position", swap->position.ToString()},
                    {"trimmed", static_cast<long long>(swap->trimmed)}});
  pending_checkpoint_.clear();
  core_.SetPhase("Streaming", "AllStreamsReady");
}

void WatchIntake::StartAppendWriter() {
  {
    std::lock_guard lock(append_mu_);
    append_writer_exit_ = false;
  }
  append_writer_ = std::thread([this] { WriteAppends(); });
}

void WatchIntake::StopAppendWriter() {
  {
    std::lock_guard lock(append_mu_);
    append_writer_exit_ = true;
  }
  append_cv_.notify_all();
  if (append_writer_.joinable()) append_writer_.join();
}

void WatchIntake::QueueAppend(redisstore::StreamEntry entry) {
  {
    std::unique_lock lock(append_mu_);
    append_cv_.wait(
        lock, [this] { return append_queue_.size() < kMaxQueuedAppends || rebuild_requested_; });
    if (rebuild_requested_) return;  // the rebuild's full sync covers it
    append_queue_.push_back(std::move(entry));
  }
  append_cv_.notify_all();
}

void WatchIntake::FlushAppends() {
  std::unique_lock lock(append_mu_);
  append_cv_.wait(lock, [this] { return append_queue_.empty() && !append_writing_; });
}

void WatchIntake::CheckStateWhileIdle() {
  if (core_.rebuilding()) return;  // the rebuild is under way
  if (!check_redis_) {
    auto redis = redisstore::RedisConnection::Connect(core_.options().redis);
    if (!redis.ok()) return;  // Redis down: looked at again next time
    check_redis_ = std::move(*redis);
  }
  redisstore::MaterializationStore store = core_.StoreOn(check_redis_.get());
  if (auto loss = core_.CheckState(store)) core_.OnStateLost(*loss);
}

void WatchIntake::WriteAppends() {
  const absl::Duration check_interval = core_.options().state_check_interval;
  std::unique_lock lock(append_mu_);
  absl::Time next_check = absl::Now() + check_interval;
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
      next_check = absl::Now() + check_interval;
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
    auto results = core_.WithRetry("append", [&] { return core_.store().AppendAll(batch); });
    if (results.ok()) {
      core_.metrics()
          ->GetCounter("reverser_materializer_append_batches_total",
                       "Watch intake: AppendAll round trips (stream appends plus diversions "
                       "over this is the mean batch).",
                       core_.labels())
          .Increment();
      for (const redisstore::AppendResult& result : *results) CountAppend(result);
      MaybeCompact(batch.size());
      next_check = absl::Now() + check_interval;  // the append just looked
    } else if (auto loss = redisstore::StateLossOf(results.status())) {
      core_.OnStateLost(*loss);  // this batch and the queue are dropped: the rebuild covers them
    }
    lock.lock();
    append_writing_ = false;
    append_cv_.notify_all();  // flushers
  }
}

void WatchIntake::CountAppend(const redisstore::AppendResult& result) {
  if (result.appended) {
    core_.metrics()
        ->GetCounter("reverser_materializer_stream_appends_total", "Stream entries appended.",
                     core_.labels())
        .Increment();
    core_.UpdateStatus([](TypeMaterializerStatus& status) { ++status.appended; });
  } else {
    runtime::Labels labels = core_.labels();
    labels.emplace_back("reason", std::string(redisstore::DivertReasonName(
                                      result.diverted.value_or(redisstore::DivertReason{}))));
    core_.metrics()
        ->GetCounter("reverser_materializer_stream_diversions_total",
                     "Stream entries diverted (not above the stream top).", labels)
        .Increment();
    core_.UpdateStatus([](TypeMaterializerStatus& status) { ++status.diverted; });
  }
}

void WatchIntake::MaybeCompact(size_t appended) {
  // Checking the length on every append would double the Redis round trips.
  appends_since_compaction_check_ += appended;
  if (appends_since_compaction_check_ < core_.options().compact_after_entries / 10 + 1) return;
  appends_since_compaction_check_ = 0;
  core_.CompactIfLong();
}

void WatchIntake::OnRefused(kube::ReflectorEventType type, const kube::RefusedObject& object,
                            bool initial) {
  const std::string identity = core_.RecordRefusal(object, kube::ReflectorEventTypeName(type));
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

void WatchIntake::OnError(const absl::Status& status) {
  const bool forbidden = absl::IsPermissionDenied(status);
  std::string reason = forbidden ? "WatchNotPermitted" : "WatchError";
  core_.UpdateStatus([&](TypeMaterializerStatus& s) { s.last_error = status.ToString(); });
  // RBAC forbids the list/watch: blocked until a retry is allowed (the reflector keeps
  // retrying with backoff). Splice streams of this materialization show it as their state.
  if (forbidden) {
    core_.SetPhase("Blocked", reason,
                   absl::StrCat("list/watch of ", core_.Name(), " forbidden: ", status.message()));
  }
  runtime::Labels labels = core_.labels();
  labels.emplace_back("reason", reason);
  core_.metrics()
      ->GetCounter("reverser_materializer_watch_restarts_total", "Watch restarts by reason.",
                   labels)
      .Increment();
  runtime::LogWarning("watch error", {{"type", core_.Name()}, {"error", status.ToString()}});
}

}  // namespace reverser::materializer
