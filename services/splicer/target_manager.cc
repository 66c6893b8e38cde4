#include "services/splicer/target_manager.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/util/time_util.h"
#include "libs/membership/units.h"
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

std::string UnitOf(const reverser::v1::GitTargetRef& target) {
  return membership::TargetUnit(target.namespace_(), target.name());
}

std::string BranchOf(const reverser::v1::GitTargetConfig& config) {
  const auto& d = config.destination();
  return membership::BranchUnit(d.provider_namespace(), d.provider_name(), d.branch());
}

}  // namespace

TargetManager::TargetManager(TargetManagerOptions options, DeliveryClient* delivery,
                             runtime::MetricsRegistry* metrics)
    : options_(std::move(options)),
      refusals_(options_.refusals),
      delivery_(delivery),
      metrics_(metrics) {
  if (Replicated()) owners_.emplace(options_.replica_id);
  if (Routing()) branches_.emplace("");
}

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
      if (tables_.count(uid)) continue;
      if (Replicated()) {
        // Only the replica that owned it deletes its cursors, through its fence.
        auto fence = fences_.find(uid);
        if (fence == fences_.end()) continue;
        delete_fences_[uid] = fence->second;
      }
      cursors_to_delete_.emplace(uid, std::move(target));
    }
    for (const auto& [uid, table] : tables_) {
      cursors_to_delete_.erase(uid);  // back again
      delete_fences_.erase(uid);
    }
  }
  if (Replicated() || Routing()) {
    Refresh("membership", std::move(changed_configs));
  } else {
    // Configs before the streams that depend on them.
    for (auto& config : changed_configs) {
      reverser::v1::DeliveryMessage message;
      *message.mutable_target_config() = std::move(config);
      (void)delivery_->Send(std::move(message));  // on failure, on_connected re-sends all
    }
    std::lock_guard lock(mu_);
    Reconcile();
    SplicerMetrics(metrics_).OwnedTargets(tables_.size());
  }
  DeleteRemovedCursors();
}

redisstore::RedisConnection* TargetManager::Redis() {
  if (!redis_) {
    auto redis = redisstore::RedisConnection::Connect(options_.stream_defaults.redis);
    if (!redis.ok()) {
      runtime::LogWarning("cannot connect to Redis", {{"error", redis.status().ToString()}});
      return nullptr;
    }
    redis_ = std::move(*redis);
  }
  return redis_.get();
}

void TargetManager::DeleteRemovedCursors() {
  std::map<std::string, reverser::v1::GitTargetRef> removed;
  std::map<std::string, redisstore::Fence> fences;
  {
    std::lock_guard lock(mu_);
    removed = cursors_to_delete_;
    fences = delete_fences_;
  }
  if (removed.empty()) return;
  const SpliceStreamOptions& o = options_.stream_defaults;
  if (Redis() == nullptr) {
    runtime::LogWarning("cannot delete removed targets' cursors; retrying at the next update");
    return;
  }
  for (const auto& [uid, target] : removed) {
    std::optional<redisstore::Fence> fence;
    if (auto it = fences.find(uid); it != fences.end()) fence = it->second;
    redisstore::DeliveryCursorStore cursors(redis_.get(), o.prefix, o.cursor_ttl, fence);
    auto deleted = cursors.DeleteTarget(uid);
    if (redisstore::IsFenced(deleted.status())) {
      // Another replica took it over before it left the tables: its cursors are that one's.
      runtime::LogInfo("removed GitTarget's cursors left to its new owner",
                       {{"gittarget_namespace", target.namespace_()},
                        {"gittarget_name", target.name()},
                        {"uid", uid}});
      std::lock_guard lock(mu_);
      cursors_to_delete_.erase(uid);
      delete_fences_.erase(uid);
      continue;
    }
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
    delete_fences_.erase(uid);
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
    for (const auto& [uid, table] : tables_) {
      if (ActiveLocked(uid)) configs.push_back(table.config());
    }
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
  std::map<std::string, DeliveryClient*> wanted_clients;
  for (const auto& [uid, table] : tables_) {
    if (!ActiveLocked(uid)) continue;
    DeliveryClient* client = ClientFor(uid);
    std::optional<redisstore::Fence> fence;
    if (auto it = fences_.find(uid); it != fences_.end()) fence = it->second;
    for (const auto& type : table.types()) {
      auto add = [&, &table = table](const reverser::v1::WatchScope& source,
                                     const TargetScope& scope) {
        SpliceStreamOptions o = options_.stream_defaults;
        o.refusals = &refusals_;
        o.target = table.target();
        o.fence = fence;
        o.on_fenced = posts_.fenced;
        *o.claim.mutable_type() = type.type();
        *o.claim.mutable_scope() = source;
        o.scope = scope;
        const std::string key = StreamKey(o.target, o.claim);
        wanted_clients[key] = client;
        wanted[key] = std::move(o);
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
  // A stream stays only while it is wanted on the same client with the same fence (a re-routed
  // or re-taken target starts over from its persisted cursor).
  auto keeps = [&](const std::string& key) {
    auto w = wanted.find(key);
    if (w == wanted.end()) return false;
    auto c = stream_clients_.find(key);
    if (c == stream_clients_.end() || c->second != wanted_clients[key]) return false;
    auto e = stream_epochs_.find(key);
    const int64_t epoch = w->second.fence ? w->second.fence->epoch : 0;
    return e != stream_epochs_.end() && e->second == epoch;
  };
  // All leaving streams are let go at once, so their readers' next rounds drop them together.
  for (auto& [key, stream] : streams_) {
    if (!keeps(key)) stream->RequestStop();
  }
  for (auto it = streams_.begin(); it != streams_.end();) {
    if (keeps(it->first)) {
      ++it;
      continue;
    }
    runtime::LogInfo("splice stream stopped", {{"stream", it->first}});
    it->second->Stop();
    stream_clients_.erase(it->first);
    stream_epochs_.erase(it->first);
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
    DeliveryClient* client = wanted_clients[key];
    stream_clients_[key] = client;
    stream_epochs_[key] = o.fence ? o.fence->epoch : 0;
    auto stream = std::make_unique<SpliceStream>(std::move(o), client, metrics_, reader);
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
  std::map<std::string, std::unique_ptr<DeliveryClient>> clients;
  {
    std::lock_guard lock(mu_);
    for (auto& [key, stream] : streams_) stream->RequestStop();
    for (auto& [key, stream] : streams_) stream->Stop();
    streams_.clear();
    stream_clients_.clear();
    stream_epochs_.clear();
    readers_.clear();
    clients.swap(clients_);
    routes_.clear();
  }
  for (auto& [address, client] : clients) client->Stop();
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
    // Replicas report only what they own: the owner's summary is the one that counts.
    if (Replicated() && !fences_.count(uid)) continue;
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

namespace reverser::splicer {

bool TargetManager::OwnedLocked(const std::string& uid) const {
  if (!Replicated()) return true;
  return held_ && fences_.count(uid) && !fenced_.count(uid);
}

bool TargetManager::ActiveLocked(const std::string& uid) const {
  return OwnedLocked(uid) && (!Routing() || routes_.count(uid));
}

DeliveryClient* TargetManager::ClientFor(const std::string& uid) const {
  if (!Routing()) return delivery_;
  auto route = routes_.find(uid);
  if (route == routes_.end()) return nullptr;
  auto client = clients_.find(route->second);
  return client == clients_.end() ? nullptr : client->second.get();
}

std::set<std::string> TargetManager::ActiveTargets() const {
  std::lock_guard lock(mu_);
  std::set<std::string> out;
  for (const auto& [uid, table] : tables_) {
    if (ActiveLocked(uid)) out.insert(uid);
  }
  return out;
}

std::map<std::string, std::string> TargetManager::Routes() const {
  std::lock_guard lock(mu_);
  return routes_;
}

void TargetManager::SetMembership(const membership::Membership& members) {
  if (!Replicated()) return;
  {
    std::lock_guard lock(mu_);
    owners_->SetMembership(members);
  }
  Refresh("membership");
}

void TargetManager::SetGitworkerMembership(const membership::Membership& members) {
  if (!Routing()) return;
  {
    std::lock_guard lock(mu_);
    branches_->SetMembership(members);
    overrides_.clear();  // the members say who owns what now
  }
  Refresh("membership");
}

void TargetManager::Tick() {
  if (!Replicated()) return;
  bool refresh = false;
  {
    std::lock_guard lock(mu_);
    const bool held = !options_.held || options_.held();
    refresh = held != held_ || takeover_failed_;
    // A NotOwner that named no other owner came from a replica whose view lagged (just resumed
    // from a pause, just started): the members may not change again, so each tick routes the
    // waiting targets by the members once more instead of waiting for a change.
    for (auto it = overrides_.begin(); it != overrides_.end();) {
      if (it->second.empty()) {
        it = overrides_.erase(it);
        refresh = true;
      } else {
        ++it;
      }
    }
  }
  if (refresh) Refresh("membership");
}

void TargetManager::OnFenced(const reverser::v1::GitTargetRef& target) {
  {
    std::lock_guard lock(mu_);
    if (!fences_.erase(target.uid())) return;  // already stopped
    fenced_.insert(target.uid());
    runtime::LogWarning("GitTarget fenced: another splicer replica took it over; stopped here",
                        {{"target", TargetText(target)}});
  }
  Refresh("membership");
}

void TargetManager::OnFeedback(const std::string& address,
                               const reverser::v1::DeliveryFeedback& feedback) {
  if (!feedback.has_not_owner()) {
    OnRefusal(feedback);
    return;
  }
  const reverser::v1::NotOwner& not_owner = feedback.not_owner();
  {
    std::lock_guard lock(mu_);
    std::string uid = not_owner.target().uid();
    if (uid.empty()) {
      for (const auto& [u, table] : tables_) {
        if (SameTarget(not_owner.target(), table.target())) uid = u;
      }
    }
    auto route = routes_.find(uid);
    if (route == routes_.end() || route->second != address) return;  // already moved on
    std::string to = not_owner.owner_address() == address ? "" : not_owner.owner_address();
    overrides_[uid] = to;
    runtime::LogInfo("gitworker replica does not own the target's branch; re-routing",
                     {{"target", TargetText(not_owner.target())},
                      {"branch_unit", not_owner.branch_unit()},
                      {"from", address},
                      {"to", to.empty() ? std::string("(waits for the members)") : to}});
  }
  Refresh("not_owner");
}

void TargetManager::Refresh(const std::string& reason,
                            std::vector<reverser::v1::GitTargetConfig> changed_configs) {
  std::vector<std::pair<DeliveryClient*, reverser::v1::GitTargetConfig>> sends;
  std::set<std::string> addresses;  // the clients to keep
  std::set<std::string> gained;     // taken over now: their configs go first
  {
    std::lock_guard lock(mu_);
    if (Replicated()) {
      held_ = !options_.held || options_.held();
      std::vector<std::string> units;
      for (const auto& [uid, table] : tables_) units.push_back(UnitOf(table.target()));
      owners_->SetUnits(std::move(units));
      takeover_failed_ = false;
      for (const auto& [uid, table] : tables_) {
        const std::string unit = UnitOf(table.target());
        if (!owners_->Owns(unit)) fenced_.erase(uid);  // a later gain takes it over again
        if (!owners_->Owns(unit) || !held_ || fenced_.count(uid)) {
          if (fences_.erase(uid)) {
            runtime::LogInfo(
                "GitTarget lost; its streams stop",
                {{"target", TargetText(table.target())}, {"held", held_ ? "true" : "false"}});
          }
          continue;
        }
        if (fences_.count(uid)) continue;
        // Before its first write: every later write of a previous owner is refused.
        redisstore::RedisConnection* redis = Redis();
        if (redis == nullptr) {
          takeover_failed_ = true;
          continue;
        }
        redisstore::OwnershipStore store(redis, options_.stream_defaults.prefix);
        auto fence = store.TakeOver(unit, options_.replica_id);
        if (!fence.ok()) {
          runtime::LogWarning(
              "GitTarget not taken over; retrying",
              {{"target", TargetText(table.target())}, {"error", fence.status().ToString()}});
          takeover_failed_ = true;
          redis_.reset();
          continue;
        }
        runtime::LogInfo("GitTarget gained; it starts from its persisted cursor",
                         {{"target", TargetText(table.target())},
                          {"epoch", static_cast<long long>(fence->epoch)}});
        fences_[uid] = *fence;
        gained.insert(uid);
      }
      for (auto it = fences_.begin(); it != fences_.end();) {
        it = tables_.count(it->first) ? std::next(it) : fences_.erase(it);
      }
      for (auto it = fenced_.begin(); it != fenced_.end();) {
        it = tables_.count(*it) ? std::next(it) : fenced_.erase(it);
      }
    }
    std::set<std::string> changed;
    for (const auto& config : changed_configs) changed.insert(config.target().uid());
    if (Routing()) {
      // The gitworker shares out exactly the branches of every target, owned here or not.
      std::vector<std::string> units;
      for (const auto& [uid, table] : tables_) units.push_back(BranchOf(table.config()));
      branches_->SetUnits(std::move(units));
      for (const auto& member : branches_->membership().members) {
        if (!member.address.empty()) addresses.insert(member.address);
      }
      std::map<std::string, std::string> routes;
      for (const auto& [uid, table] : tables_) {
        if (!OwnedLocked(uid)) continue;
        std::string address;
        if (auto o = overrides_.find(uid); o != overrides_.end()) {
          address = o->second;
        } else if (auto owner = branches_->OwnerOf(BranchOf(table.config()))) {
          address = branches_->AddressOf(*owner).value_or("");
        }
        if (address.empty()) continue;  // no known owner: the target waits
        routes[uid] = address;
        addresses.insert(address);
      }
      for (const auto& address : addresses) {
        if (clients_.count(address)) continue;
        auto client = options_.new_client(address);
        DeliveryClient* raw = client.get();
        std::shared_ptr<ConfigBook> book = config_book_;
        client->SetOnConnected([raw, book, address] {
          std::vector<reverser::v1::GitTargetConfig> configs;
          {
            std::lock_guard book_lock(book->mu);
            for (const auto& [uid, config] : book->by_address[address]) configs.push_back(config);
          }
          for (auto& config : configs) {
            reverser::v1::DeliveryMessage message;
            *message.mutable_target_config() = std::move(config);
            if (!raw->Send(std::move(message)).ok()) return;
          }
        });
        auto feedback = posts_.feedback;
        client->SetOnRefusal([feedback, address](const reverser::v1::DeliveryFeedback& f) {
          if (feedback) feedback(address, f);
        });
        client->Start();
        runtime::LogInfo("gitworker replica client started", {{"gitworker", address}});
        clients_.emplace(address, std::move(client));
      }
      for (const auto& [uid, old] : routes_) {
        auto now = routes.find(uid);
        if ((now == routes.end() || now->second != old) && OwnedLocked(uid)) {
          SplicerMetrics(metrics_).Rerouted(reason);
          runtime::LogInfo(
              "GitTarget re-routed; it restarts from its persisted cursor",
              {{"target", TargetText(tables_.at(uid).target())},
               {"from", old},
               {"to", now == routes.end() ? std::string("(no owner yet)") : now->second},
               {"reason", reason}});
        }
      }
      for (const auto& [uid, address] : routes) {
        auto old = routes_.find(uid);
        if (old != routes_.end() && old->second == address && !changed.count(uid)) continue;
        sends.emplace_back(clients_.at(address).get(), tables_.at(uid).config());
      }
      routes_ = std::move(routes);
      std::lock_guard book_lock(config_book_->mu);
      config_book_->by_address.clear();
      for (const auto& [uid, address] : routes_) {
        config_book_->by_address[address][uid] = tables_.at(uid).config();
      }
    } else {
      for (auto& config : changed_configs) {
        gained.erase(config.target().uid());
        if (ActiveLocked(config.target().uid())) sends.emplace_back(delivery_, std::move(config));
      }
      for (const auto& uid : gained) {
        auto table = tables_.find(uid);
        if (table != tables_.end() && ActiveLocked(uid) &&
            !table->second.config().SerializeAsString().empty()) {
          sends.emplace_back(delivery_, table->second.config());
        }
      }
    }
  }
  // Configs before the streams that depend on them (a client not connected yet sends them from
  // the book when it connects).
  for (auto& [client, config] : sends) {
    reverser::v1::DeliveryMessage message;
    *message.mutable_target_config() = std::move(config);
    (void)client->Send(std::move(message));
  }
  std::vector<std::unique_ptr<DeliveryClient>> retired;
  {
    std::lock_guard lock(mu_);
    Reconcile();
    if (Routing()) {
      // A replica that left: no stream delivers to it any more.
      for (auto it = clients_.begin(); it != clients_.end();) {
        if (addresses.count(it->first)) {
          ++it;
          continue;
        }
        runtime::LogInfo("gitworker replica client stopped", {{"gitworker", it->first}});
        retired.push_back(std::move(it->second));
        it = clients_.erase(it);
      }
    }
    size_t owned = 0;
    for (const auto& [uid, table] : tables_) owned += OwnedLocked(uid) ? 1 : 0;
    SplicerMetrics(metrics_).OwnedTargets(owned);
  }
  for (auto& client : retired) client->Stop();
}

}  // namespace reverser::splicer
