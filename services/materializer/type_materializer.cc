#include "services/materializer/type_materializer.h"

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "libs/runtime/log.h"
#include "libs/sanitize/sanitize.h"

namespace reverser::materializer {
namespace {

std::string Metadata(const nlohmann::json& object, const char* key) {
  if (!object.is_object()) return "";
  auto meta = object.find("metadata");
  if (meta == object.end() || !meta->is_object()) return "";
  auto it = meta->find(key);
  return it != meta->end() && it->is_string() ? it->get<std::string>() : "";
}

redisstore::StreamEntry EntryFor(redisstore::ChangeOp op, const nlohmann::json& object) {
  redisstore::StreamEntry entry;
  entry.op = op;
  entry.uid = Metadata(object, "uid");
  entry.namespace_ = Metadata(object, "namespace");
  entry.name = Metadata(object, "name");
  entry.resource_version = Metadata(object, "resourceVersion");
  entry.object_json = sanitize::RemoveManagedFields(object).dump(
      -1, ' ', false, nlohmann::json::error_handler_t::replace);
  entry.source = redisstore::ChangeSource::kWatch;
  return entry;
}

}  // namespace

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
  stopping_ = true;
  {
    std::lock_guard lock(mu_);
    if (reflector_) reflector_->Stop();
  }
  if (thread_.joinable()) thread_.join();
}

absl::Status TypeMaterializer::StopAndRelease() {
  Stop();
  auto redis = redisstore::RedisConnection::Connect(options_.redis);
  if (!redis.ok()) return redis.status();
  redisstore::MaterializationStore store(redis->get(), options_.prefix, options_.gvr,
                                         options_.scope);
  return store.Release();
}

TypeMaterializerStatus TypeMaterializer::Status() const {
  std::lock_guard lock(mu_);
  return status_;
}

void TypeMaterializer::SetPhase(const std::string& phase, const std::string& reason) {
  {
    std::lock_guard lock(mu_);
    if (status_.phase == phase && status_.reason == reason) return;
    status_.phase = phase;
    status_.reason = reason;
  }
  runtime::LogInfo("materialization phase",
                   {{"type", Name()}, {"phase", phase}, {"reason", reason}});
  if (store_) {
    redisstore::MaterializationState state;
    state.phase = phase;
    state.gvr = options_.gvr;
    state.scope = options_.scope;
    state.updated_at = absl::Now();
    state.message = reason;
    {
      std::lock_guard lock(mu_);
      state.checkpoint = status_.checkpoint;
    }
    (void)store_->WriteState(state);  // informational; the next phase change rewrites it
  }
}

template <typename Fn>
auto TypeMaterializer::WithRetry(const char* what, Fn op) -> decltype(op()) {
  absl::Duration backoff = absl::Milliseconds(100);
  while (true) {
    auto result = op();
    if (result.ok() || stopping_) return result;
    {
      std::lock_guard lock(mu_);
      status_.last_error = result.status().ToString();
    }
    runtime::LogWarning("redis write failed; retrying",
                        {{"type", Name()}, {"op", what}, {"error", result.status().ToString()}});
    metrics_->GetCounter("reverser_materializer_redis_retries_total",
                         "Redis writes retried by materializers.", labels_)
        .Increment();
    absl::SleepFor(backoff);
    backoff = std::min(backoff * 2, absl::Seconds(5));
  }
}

void TypeMaterializer::Run() {
  auto redis = WithRetry("connect", [&] { return redisstore::RedisConnection::Connect(options_.redis); });
  if (!redis.ok()) return;  // stopping
  redis_ = std::move(*redis);
  store_ = std::make_unique<redisstore::MaterializationStore>(redis_.get(), options_.prefix,
                                                              options_.gvr, options_.scope);
  // Resume: a checkpoint exists, so only the changes after the stream top are needed.
  kube::ReflectorOptions reflector_options;
  reflector_options.gvr = options_.gvr;
  reflector_options.namespace_ = options_.scope.IsCluster() ? "" : options_.scope.namespace_;
  reflector_options.use_watch_list = options_.use_watch_list;
  auto checkpoint = WithRetry("read checkpoint", [&] { return store_->CheckpointPosition(); });
  if (!checkpoint.ok()) return;
  if (checkpoint->has_value()) {
    auto top = WithRetry("read stream top", [&] { return store_->StreamTop(); });
    if (!top.ok()) return;
    uint64_t resume = (*checkpoint)->rv();
    if (top->has_value()) resume = std::max(resume, (*top)->rv());
    reflector_options.resume_resource_version = std::to_string(resume);
    {
      std::lock_guard lock(mu_);
      status_.checkpoint = (*checkpoint)->ToString();
    }
    SetPhase("Streaming", "ResumedFromCursor");
    runtime::LogInfo("materialization resumed", {{"type", Name()}, {"resource_version", resume}});
  } else {
    SetPhase("Replaying", "InitialReplay");
  }
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;
    reflector_ = std::make_unique<kube::Reflector>(*client_, reflector_options,
                                                 static_cast<kube::WatchHandler&>(*this));
  }
  absl::Status run = reflector_->Run();
  if (!run.ok()) {
    runtime::LogError("materialization stopped", {{"type", Name()}, {"error", run.ToString()}});
    SetPhase("Blocked", "WatchError");
  }
}

void TypeMaterializer::OnEvent(const kube::ReflectorEvent& event) {
  using Type = kube::ReflectorEventType;
  switch (event.type) {
    case Type::kSyncStarted:
      collecting_ = true;
      pending_checkpoint_.clear();
      SetPhase("Replaying", event.reason == kube::SyncReason::kExpired ? "ExpiredResourceVersion"
                            : event.reason == kube::SyncReason::kRetry  ? "ResumeReplay"
                                                                        : "InitialReplay");
      return;
    case Type::kInitialEventsEnd: {
      if (!collecting_) return;
      collecting_ = false;
      auto rv = core::ParseResourceVersion(event.resource_version);
      if (!rv.ok()) {
        SetPhase("Blocked", "WatchError");
        return;
      }
      auto swap = WithRetry("replace checkpoint", [&] {
        return store_->ReplaceCheckpoint(pending_checkpoint_, core::StreamPosition::EndOf(*rv));
      });
      if (!swap.ok()) return;
      metrics_->GetCounter("reverser_materializer_replays_total",
                           "Checkpoints rebuilt from a full replay.", labels_)
          .Increment();
      metrics_->GetGauge("reverser_materializer_checkpoint_items", "Objects in the checkpoint.",
                         labels_)
          .Set(static_cast<double>(pending_checkpoint_.size()));
      {
        std::lock_guard lock(mu_);
        status_.checkpoint = swap->position.ToString();
        ++status_.replays;
      }
      runtime::LogInfo("checkpoint replaced", {{"type", Name()},
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
  if (event.initial && collecting_) {
    std::string ns = Metadata(event.object, "namespace");
    std::string name = Metadata(event.object, "name");
    pending_checkpoint_[redisstore::ObjectIdentity(ns, name)] =
        sanitize::RemoveManagedFields(event.object)
            .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    return;
  }
  redisstore::ChangeOp op = event.type == Type::kAdded      ? redisstore::ChangeOp::kAdded
                            : event.type == Type::kModified ? redisstore::ChangeOp::kModified
                                                            : redisstore::ChangeOp::kDeleted;
  redisstore::StreamEntry entry = EntryFor(op, event.object);
  auto appended = WithRetry("append", [&] { return store_->Append(entry); });
  if (!appended.ok()) return;
  if (appended->appended) {
    metrics_->GetCounter("reverser_materializer_stream_appends_total",
                         "Stream entries appended.", labels_)
        .Increment();
    std::lock_guard lock(mu_);
    ++status_.appended;
  } else {
    runtime::Labels labels = labels_;
    labels.emplace_back("reason", std::string(redisstore::DivertReasonName(*appended->diverted)));
    metrics_->GetCounter("reverser_materializer_stream_diversions_total",
                         "Stream entries diverted (not above the stream top).", labels)
        .Increment();
    std::lock_guard lock(mu_);
    ++status_.diverted;
  }
  MaybeCompact();
}

void TypeMaterializer::MaybeCompact() {
  // Checking the length on every append would double the Redis round trips.
  if (++appends_since_compaction_check_ < options_.compact_after_entries / 10 + 1) return;
  appends_since_compaction_check_ = 0;
  auto length = redis_->Command({"XLEN", store_->keys().stream});
  if (!length.ok() || !length->AsInteger().ok()) return;
  if (static_cast<size_t>(*length->AsInteger()) <= options_.compact_after_entries) return;
  auto compacted = store_->Compact();
  if (compacted.ok() && compacted->compacted) {
    metrics_->GetCounter("reverser_materializer_compactions_total",
                         "Streams folded into a new checkpoint.", labels_)
        .Increment();
    std::lock_guard lock(mu_);
    status_.checkpoint = compacted->position.ToString();
  }
}

void TypeMaterializer::OnError(const absl::Status& status) {
  std::string reason = absl::IsPermissionDenied(status) ? "WatchNotPermitted" : "WatchError";
  {
    std::lock_guard lock(mu_);
    status_.last_error = status.ToString();
  }
  metrics_->GetCounter("reverser_materializer_watch_restarts_total", "Watch restarts by reason.",
                       [&] {
                         runtime::Labels l = labels_;
                         l.emplace_back("reason", reason);
                         return l;
                       }())
      .Increment();
  runtime::LogWarning("watch error", {{"type", Name()}, {"error", status.ToString()}});
}

}  // namespace reverser::materializer
