#include "services/materializer/materialization_core.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "libs/core/status.h"

namespace reverser::materializer {

absl::StatusOr<Intake> ParseIntake(absl::string_view name) {
  if (name == "watch") return Intake::kWatch;
  if (name == "audit") return Intake::kAudit;
  return absl::InvalidArgumentError(
      absl::StrCat("--intake=\"", name, "\": expected watch or audit"));
}

MaterializationCore::MaterializationCore(TypeMaterializerOptions options,
                                         runtime::MetricsRegistry* metrics)
    : options_(std::move(options)), metrics_(metrics) {
  labels_ = {{"group", options_.gvr.group},
             {"version", options_.gvr.version},
             {"resource", options_.gvr.resource},
             {"scope", options_.scope.KeySegment()}};
  status_.phase = "Replaying";
  status_.reason = "InitialReplay";
}

std::string MaterializationCore::Name() const {
  return absl::StrCat(options_.gvr.ToString(), " ", options_.scope.KeySegment());
}

std::optional<MaterializationCore::Opened> MaterializationCore::Open() {
  auto redis =
      WithRetry("connect", [&] { return redisstore::RedisConnection::Connect(options_.redis); });
  if (!redis.ok()) return std::nullopt;  // stopping
  redis_ = std::move(*redis);
  store_ = std::make_unique<redisstore::MaterializationStore>(StoreOn(redis_.get()));
  store_->GuardAppends(&lineage_);
  auto mark = WithRetry("read checkpoint", [&] { return store_->ReadMark(); });
  if (!mark.ok()) return std::nullopt;
  const redisstore::LineageTracker::Judgement judged = lineage_.Observe(*mark);
  // A damaged checkpoint is rebuilt by the first LIST, like a missing one.
  if (judged.loss) OnStateLost(*judged.loss);
  Opened opened;
  opened.has_checkpoint = judged.verdict == redisstore::LineageTracker::Verdict::kSame;
  if (opened.has_checkpoint) {
    // Only the changes after the stream top are needed.
    opened.resume_rv = mark->Head().rv();
    std::lock_guard lock(mu_);
    status_.checkpoint = mark->checkpoint->ToString();
  }
  return opened;
}

redisstore::MaterializationStore MaterializationCore::StoreOn(
    redisstore::RedisConnection* redis) const {
  redisstore::MaterializationStore store(redis, options_.prefix, options_.gvr, options_.scope);
  store.UseBodyCipher(options_.body_cipher, options_.sensitive);
  if (options_.fence) {
    store.FenceWrites(redisstore::WriteFence{
        *options_.fence, [this]() -> absl::Status {
          if (fenced_) {
            std::lock_guard lock(mu_);
            return fenced_status_;
          }
          if (options_.may_write && !options_.may_write()) {
            return absl::UnavailableError(
                "this replica's membership Lease is not held: no writes until it is renewed");
          }
          return absl::OkStatus();
        }});
  }
  return store;
}

void MaterializationCore::RequestStop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  stop_cv_.notify_all();
}

bool MaterializationCore::WaitForStop(absl::Duration timeout) {
  std::unique_lock lock(mu_);
  return stop_cv_.wait_for(lock, absl::ToChronoNanoseconds(timeout),
                           [this] { return stopping_.load(); });
}

void MaterializationCore::CountRetry(const char* what, const absl::Status& status) {
  {
    std::lock_guard lock(mu_);
    status_.last_error = status.ToString();
  }
  runtime::LogWarning("redis write failed; retrying",
                      {{"type", Name()}, {"op", what}, {"error", status.ToString()}});
  metrics_
      ->GetCounter("reverser_materializer_redis_retries_total",
                   "Redis writes retried by materializers.", labels_)
      .Increment();
}

TypeMaterializerStatus MaterializationCore::Status() const {
  std::lock_guard lock(mu_);
  return status_;
}

bool MaterializationCore::InPhase(absl::string_view phase) const {
  std::lock_guard lock(mu_);
  return status_.phase == phase;
}

std::string MaterializationCore::streaming_reason() const {
  std::lock_guard lock(mu_);
  return streaming_reason_;
}

bool MaterializationCore::rebuilding() const {
  std::lock_guard lock(mu_);
  return rebuilding_.has_value();
}

void MaterializationCore::SetPhase(const std::string& phase, const std::string& requested_reason,
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
    // Informational; the next phase change rewrites it.
    if (absl::Status s = store_->WriteState(state); redisstore::IsFenced(s)) OnFenced(s);
  }
}

std::optional<redisstore::StateLoss> MaterializationCore::CheckState(
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

void MaterializationCore::OnFenced(const absl::Status& status) {
  {
    std::lock_guard lock(mu_);
    if (fenced_) return;  // the first refusal stops the worker; later ones are refused locally
    fenced_status_ = status;
    fenced_ = true;
  }
  metrics_
      ->GetCounter("reverser_materializer_fenced_writes_total",
                   "Writes refused because another replica took the unit over (each stops the "
                   "unit's worker).",
                   labels_)
      .Increment();
  runtime::LogWarning(
      "write refused: another replica took the unit over; stopping",
      {{"type", Name()},
       {"unit", options_.fence ? options_.fence->unit : ""},
       {"epoch", static_cast<long long>(options_.fence ? options_.fence->epoch : 0)},
       {"error", status.ToString()}});
  {
    std::lock_guard lock(mu_);
    status_.last_error = status.ToString();
    status_.reason = "Fenced";
  }
  RequestStop();
  if (interrupt_) interrupt_();
  if (options_.on_fenced) options_.on_fenced();
}

void MaterializationCore::OnStateLost(redisstore::StateLoss loss) {
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
  }
  if (listener_) listener_->OnStateLost();
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
}

void MaterializationCore::OnRebuilt(const redisstore::CheckpointSwap& swap) {
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

std::string MaterializationCore::RecordRefusal(const kube::RefusedObject& object,
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

void MaterializationCore::KeepLastStored(const redisstore::ObjectMap& materialized,
                                         const std::vector<std::string>& refused,
                                         redisstore::ObjectMap& items) {
  for (const std::string& identity : refused) {
    auto last = materialized.find(identity);
    if (last != materialized.end()) items[identity] = last->second;
  }
}

void MaterializationCore::CompactIfLong() {
  auto length = redis_->Command({"XLEN", store_->keys().stream});
  if (!length.ok() || !length->AsInteger().ok()) return;
  if (static_cast<size_t>(*length->AsInteger()) <= options_.compact_after_entries) return;
  auto compacted = store_->Compact();
  if (compacted.ok()) CountCompaction(*compacted);
  if (redisstore::IsFenced(compacted.status())) OnFenced(compacted.status());
}

void MaterializationCore::CountCompaction(const redisstore::CompactionResult& result) {
  if (!result.compacted) return;
  metrics_
      ->GetCounter("reverser_materializer_compactions_total",
                   "Streams folded into a new checkpoint.", labels_)
      .Increment();
  std::lock_guard lock(mu_);
  status_.checkpoint = result.position.ToString();
}

absl::StatusOr<redisstore::MaterializationStore> MaterializationCore::AdminStore() {
  if (!admin_redis_) {
    ASSIGN_OR_RETURN(admin_redis_, redisstore::RedisConnection::Connect(options_.redis));
  }
  return StoreOn(admin_redis_.get());
}

absl::StatusOr<redisstore::CompactionResult> MaterializationCore::CompactNow() {
  std::lock_guard admin(admin_mu_);
  ASSIGN_OR_RETURN(redisstore::MaterializationStore store, AdminStore());
  absl::StatusOr<redisstore::CompactionResult> compacted = store.Compact();
  if (redisstore::IsFenced(compacted.status())) OnFenced(compacted.status());
  ASSIGN_OR_RETURN(redisstore::CompactionResult result, std::move(compacted));
  CountCompaction(result);
  runtime::LogInfo("compaction requested", {{"type", Name()},
                                            {"compacted", result.compacted},
                                            {"folded", static_cast<long long>(result.folded)},
                                            {"position", result.position.ToString()}});
  return result;
}

absl::StatusOr<StoredFacts> MaterializationCore::ReadStoredFacts() {
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

absl::Status MaterializationCore::Release() {
  auto redis = redisstore::RedisConnection::Connect(options_.redis);
  if (!redis.ok()) return redis.status();
  absl::Status released = StoreOn(redis->get()).Release();
  if (redisstore::IsFenced(released)) OnFenced(released);
  return released;
}

}  // namespace reverser::materializer
