#include "services/splicer/target_manager.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/util/time_util.h"
#include "libs/rules/claims.h"
#include "libs/rules/proto_convert.h"
#include "libs/rules/stream_readiness.h"
#include "libs/runtime/log.h"
#include "services/splicer/splicer_metrics.h"

namespace reverser::splicer {
namespace {

std::string GvrKey(const reverser::v1::GroupVersionResource& gvr) {
  return absl::StrCat(gvr.group(), "/", gvr.version(), "/", gvr.resource());
}

// "group/version/resource" plus " ns" for a namespace stream, for messages.
std::string ClaimText(const reverser::v1::Claim& claim) {
  const auto& gvr = claim.type().gvr();
  std::string out =
      gvr.group().empty() ? absl::StrCat(gvr.version(), "/", gvr.resource()) : GvrKey(gvr);
  if (claim.scope().has_namespace_()) absl::StrAppend(&out, " ", claim.scope().namespace_());
  return out;
}

std::string TargetText(const reverser::v1::GitTargetRef& target) {
  return absl::StrCat(target.namespace_(), "/", target.name());
}

bool SameTarget(const reverser::v1::GitTargetRef& want, const reverser::v1::GitTargetRef& have) {
  if (!want.uid().empty()) return want.uid() == have.uid();
  return want.namespace_() == have.namespace_() && want.name() == have.name();
}

// A requested claim matches a stream by group/version/resource, and by scope when one is set.
bool ClaimMatches(const reverser::v1::Claim& want, const reverser::v1::Claim& have) {
  const auto& w = want.type().gvr();
  const auto& h = have.type().gvr();
  if (w.group() != h.group() || w.version() != h.version() || w.resource() != h.resource()) {
    return false;
  }
  switch (want.scope().scope_case()) {
    case reverser::v1::WatchScope::kCluster:
      return have.scope().has_cluster();
    case reverser::v1::WatchScope::kNamespace:
      return have.scope().has_namespace_() &&
             have.scope().namespace_() == want.scope().namespace_();
    default:
      return true;
  }
}

}  // namespace

TargetManager::TargetManager(TargetManagerOptions options, DeliveryClient* delivery,
                             runtime::MetricsRegistry* metrics)
    : options_(std::move(options)),
      refusals_(options_.refusals),
      delivery_(delivery),
      metrics_(metrics) {}

TargetManager::~TargetManager() { StopAll(); }

void TargetManager::Apply(const reverser::v1::TableUpdate& update) {
  std::vector<reverser::v1::GitTargetConfig> changed_configs;
  {
    std::lock_guard lock(mu_);
    std::map<std::string, reverser::v1::GitTargetRef> before;
    for (const auto& [uid, table] : tables_) before.emplace(uid, table.target());
    if (update.full()) {
      for (const auto& [uid, table] : tables_) {
        bool kept = false;
        for (const auto& upserted : update.upserted()) kept |= upserted.target().uid() == uid;
        if (!kept) refusals_.ForgetTarget(uid);
      }
      tables_.clear();
    }
    for (const auto& removed : update.removed()) {
      tables_.erase(removed.uid());
      refusals_.ForgetTarget(removed.uid());
    }
    for (const auto& table : update.upserted()) {
      auto& slot = tables_[table.target().uid()];
      if (!table.config().SerializeAsString().empty() &&
          slot.config().SerializeAsString() != table.config().SerializeAsString()) {
        changed_configs.push_back(table.config());
      }
      slot = table;
    }
    for (auto& [uid, target] : before) {
      if (!tables_.count(uid)) cursors_to_delete_.emplace(uid, std::move(target));
    }
    for (const auto& [uid, table] : tables_) cursors_to_delete_.erase(uid);  // back again
  }
  // Configs before the streams that depend on them.
  for (auto& config : changed_configs) {
    reverser::v1::DeliveryMessage message;
    *message.mutable_target_config() = std::move(config);
    (void)delivery_->Send(std::move(message));  // on failure, on_connected re-sends all
  }
  {
    std::lock_guard lock(mu_);
    Reconcile();
  }
  DeleteRemovedCursors();
}

void TargetManager::DeleteRemovedCursors() {
  std::map<std::string, reverser::v1::GitTargetRef> removed;
  {
    std::lock_guard lock(mu_);
    removed = cursors_to_delete_;
  }
  if (removed.empty()) return;
  const SpliceStreamOptions& o = options_.stream_defaults;
  if (!redis_) {
    auto redis = redisstore::RedisConnection::Connect(o.redis);
    if (!redis.ok()) {
      runtime::LogWarning("cannot delete removed targets' cursors; retrying at the next update",
                          {{"error", redis.status().ToString()}});
      return;
    }
    redis_ = std::move(*redis);
  }
  redisstore::DeliveryCursorStore cursors(redis_.get(), o.prefix, o.cursor_ttl);
  for (const auto& [uid, target] : removed) {
    auto deleted = cursors.DeleteTarget(uid);
    if (!deleted.ok()) {
      runtime::LogWarning("cannot delete a removed target's cursors; retrying at the next update",
                          {{"gittarget_namespace", target.namespace_()},
                           {"gittarget_name", target.name()},
                           {"uid", uid},
                           {"error", deleted.status().ToString()}});
      redis_.reset();  // reconnect next time
      return;
    }
    runtime::LogInfo("GitTarget removed; its delivery cursors deleted",
                     {{"gittarget_namespace", target.namespace_()},
                      {"gittarget_name", target.name()},
                      {"uid", uid},
                      {"keys", static_cast<long long>(*deleted)}});
    metrics_
        ->GetCounter("reverser_splicer_cursors_deleted_total",
                     "Delivery and reference watch cursor keys deleted with their GitTarget.")
        .Increment(static_cast<double>(*deleted));
    std::lock_guard lock(mu_);
    cursors_to_delete_.erase(uid);
  }
}

void TargetManager::OnRefusal(const reverser::v1::DeliveryFeedback& feedback) {
  if (feedback.has_refusal()) refusals_.OnRefusal(feedback.refusal());
  if (feedback.has_refused_files()) refusals_.OnRefusedFiles(feedback.refused_files());
  if (feedback.has_path_refusal()) refusals_.OnPathRefusal(feedback.path_refusal());
  if (feedback.has_resync_request()) {
    const reverser::v1::ResyncRequest& request = feedback.resync_request();
    runtime::LogWarning("the gitworker asks for a resync of every type",
                        {{"target", TargetText(request.target())},
                         {"reason", request.reason()},
                         {"detail", request.message()}});
    auto claims = Resplice(request.target(), nullptr, request.reason(), request.message());
    if (!claims.ok()) {
      runtime::LogWarning("resync not started",
                          {{"target", TargetText(request.target())},
                           {"error", std::string(claims.status().message())}});
    }
  }
}

void TargetManager::SendConfigs() {
  std::vector<reverser::v1::GitTargetConfig> configs;
  {
    std::lock_guard lock(mu_);
    for (const auto& [uid, table] : tables_) configs.push_back(table.config());
  }
  for (auto& config : configs) {
    reverser::v1::DeliveryMessage message;
    *message.mutable_target_config() = std::move(config);
    if (!delivery_->Send(std::move(message)).ok()) return;
  }
}

void TargetManager::Reconcile() {
  // Each target reads the materializations its own rules ask for (rules::ServingScopes, the
  // catalog's claim rule): another target's ClusterWatchRule never moves a namespaced rule
  // onto the cluster-wide materialization.
  std::map<std::string, SpliceStreamOptions> wanted;
  for (const auto& [uid, table] : tables_) {
    for (const auto& type : table.types()) {
      auto add = [&](const reverser::v1::WatchScope& source, const TargetScope& scope) {
        SpliceStreamOptions o = options_.stream_defaults;
        o.refusals = &refusals_;
        o.target = table.target();
        *o.claim.mutable_type() = type.type();
        *o.claim.mutable_scope() = source;
        o.scope = scope;
        wanted[StreamKey(o.target, o.claim)] = std::move(o);
      };
      if (rules::ReadsClusterWide(rules::FromProto(type))) {
        reverser::v1::WatchScope source;
        source.set_cluster(true);
        add(source, TargetScope::From(type));
      } else {
        for (const auto& [ns, ops] : type.namespaces()) {
          reverser::v1::WatchScope source;
          source.set_namespace_(ns);
          TargetScope scope;
          scope.namespaces[ns] = ops;
          scope.sensitive = type.sensitive();
          add(source, scope);
        }
      }
    }
  }
  // All leaving streams are let go at once, so their readers' next rounds drop them together.
  for (auto& [key, stream] : streams_) {
    if (!wanted.count(key)) stream->RequestStop();
  }
  for (auto it = streams_.begin(); it != streams_.end();) {
    if (wanted.count(it->first)) {
      ++it;
      continue;
    }
    runtime::LogInfo("splice stream stopped", {{"stream", it->first}});
    it->second->Stop();
    it = streams_.erase(it);
  }
  for (auto& [key, o] : wanted) {
    auto it = streams_.find(key);
    if (it != streams_.end()) {
      it->second->UpdateScope(o.scope);
      continue;
    }
    runtime::LogInfo("splice stream started", {{"stream", key}});
    MaterializationReader* reader = ReaderFor(o.claim, o);
    auto stream = std::make_unique<SpliceStream>(std::move(o), delivery_, metrics_, reader);
    stream->Start();
    streams_.emplace(key, std::move(stream));
  }
  // A materialization no target follows any more needs no reader.
  for (auto it = readers_.begin(); it != readers_.end();) {
    it = it->second->size() == 0 ? readers_.erase(it) : std::next(it);
  }
  SplicerMetrics(metrics_).Streams(streams_.size());
}

MaterializationReader* TargetManager::ReaderFor(const reverser::v1::Claim& claim,
                                                const SpliceStreamOptions& o) {
  auto& reader = readers_[MaterializationKey(claim)];
  if (!reader) {
    MaterializationReaderOptions ro;
    ro.claim = claim;
    ro.redis = o.redis;
    ro.prefix = o.prefix;
    ro.body_cipher = o.body_cipher;
    ro.read_batch = o.read_batch;
    ro.attribution = o.attribution;
    reader = std::make_unique<MaterializationReader>(std::move(ro));
  }
  return reader.get();
}

void TargetManager::StopAll() {
  std::lock_guard lock(mu_);
  for (auto& [key, stream] : streams_) stream->RequestStop();
  for (auto& [key, stream] : streams_) stream->Stop();
  streams_.clear();
  readers_.clear();
}

size_t TargetManager::stream_count() const {
  std::lock_guard lock(mu_);
  return streams_.size();
}

std::vector<reverser::v1::StreamSummary> TargetManager::Summaries() const {
  std::lock_guard lock(mu_);
  std::map<std::string, reverser::v1::StreamSummary> by_target;
  std::map<std::string, absl::Time> last_push;
  for (const auto& [uid, table] : tables_) {
    auto& summary = by_target[uid];
    *summary.mutable_target() = table.target();
  }
  for (const auto& [key, stream] : streams_) {
    std::string uid = key.substr(0, key.find('|'));
    auto& summary = by_target[uid];
    SpliceStreamStatus status = stream->Status();
    auto* readiness = summary.add_streams();
    *readiness->mutable_claim() = stream->claim();
    readiness->set_state(status.state);
    readiness->set_reason(status.reason);
    readiness->set_message(status.message);
    if (status.last_push) {
      auto [it, inserted] = last_push.try_emplace(uid, *status.last_push);
      if (!inserted) it->second = std::max(it->second, *status.last_push);
    }
  }
  std::vector<reverser::v1::StreamSummary> out;
  for (auto& [uid, summary] : by_target) {
    rules::FillSummary(rules::RollUpStreams({summary.streams().begin(), summary.streams().end()}),
                       &summary);
    if (auto it = last_push.find(uid); it != last_push.end()) {
      *summary.mutable_last_push_time() =
          google::protobuf::util::TimeUtil::NanosecondsToTimestamp(absl::ToUnixNanos(it->second));
    }
    refusals_.Fill(&summary);
    out.push_back(std::move(summary));
  }
  return out;
}

}  // namespace reverser::splicer

namespace reverser::splicer {

absl::StatusOr<std::vector<reverser::v1::Claim>> TargetManager::Resplice(
    const reverser::v1::GitTargetRef& target, const reverser::v1::Claim* claim,
    const std::string& reason, const std::string& message) {
  std::lock_guard lock(mu_);
  const reverser::v1::WatchedTypeTable* table = nullptr;
  std::vector<std::string> known_targets;
  for (const auto& [uid, t] : tables_) {
    if (SameTarget(target, t.target())) table = &t;
    known_targets.push_back(TargetText(t.target()));
  }
  if (table == nullptr) {
    return absl::NotFoundError(absl::StrCat(
        "the splicer follows no GitTarget ",
        target.uid().empty() ? TargetText(target) : absl::StrCat("with uid ", target.uid()),
        " (targets: ", known_targets.empty() ? "none" : absl::StrJoin(known_targets, ", "), ")"));
  }
  std::vector<SpliceStream*> matched;
  std::vector<std::string> known_streams;
  for (const auto& [key, stream] : streams_) {
    if (stream->target().uid() != table->target().uid()) continue;
    known_streams.push_back(ClaimText(stream->claim()));
    if (claim == nullptr || ClaimMatches(*claim, stream->claim())) matched.push_back(stream.get());
  }
  if (matched.empty()) {
    return absl::NotFoundError(absl::StrCat(
        "GitTarget ", TargetText(table->target()), " has no stream",
        claim == nullptr ? "" : absl::StrCat(" of ", ClaimText(*claim)), " (its streams: ",
        known_streams.empty() ? "none" : absl::StrJoin(known_streams, ", "), ")"));
  }
  std::vector<reverser::v1::Claim> claims;
  for (SpliceStream* stream : matched) {
    stream->Resplice(reason, message);
    claims.push_back(stream->claim());
  }
  runtime::LogInfo("resplice", {{"target", TargetText(table->target())},
                                {"streams", static_cast<long long>(claims.size())}});
  return claims;
}

}  // namespace reverser::splicer
