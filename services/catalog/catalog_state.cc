#include "services/catalog/catalog_state.h"

#include <google/protobuf/util/message_differencer.h>

#include "absl/strings/str_cat.h"
#include "libs/commitmeta/messages.h"
#include "libs/core/invariant.h"
#include "libs/core/proto_convert.h"
#include "libs/rules/proto_convert.h"
#include "libs/rules/stream_readiness.h"
#include "libs/typeset/proto_convert.h"

namespace reverser::catalog {
namespace {

bool IsRule(ObjectKind kind) {
  return kind == ObjectKind::kWatchRule || kind == ObjectKind::kClusterWatchRule;
}

rules::RuleKey RuleKeyOf(const ObjectKey& key) {
  return {key.kind == ObjectKind::kClusterWatchRule, key.namespace_, key.name};
}

// True when every field `desired` sets already has that value in `existing`: fields it does not
// set (lastPushTime before a splicer saw a push, lastReconcileTime) do not force a write.
bool Covers(const nlohmann::json& existing, const nlohmann::json& desired) {
  if (!existing.is_object()) return false;
  for (auto it = desired.begin(); it != desired.end(); ++it) {
    auto found = existing.find(it.key());
    // A null in the merge patch removes the field: covered when the field is already gone.
    if (it.value().is_null() && (found == existing.end() || found->is_null())) continue;
    if (found == existing.end() || *found != it.value()) return false;
  }
  return true;
}

}  // namespace

CatalogState::CatalogState(const core::Clock& clock, CatalogStateOptions options)
    : clock_(clock),
      options_(std::move(options)),
      registry_(clock, options_.registry),
      tables_generation_(options_.generation_epoch) {}

std::optional<std::string> CatalogState::InputsWaitingFor() const {
  if (!registry_.Ready() || !first_scan_at_) return "the first discovery pass";
  if (clock_.Now() < *first_scan_at_ + typeset::Registry::kSettleWindow) {
    return "the settle window after the first discovery pass";
  }
  for (ObjectKind kind : kAllObjectKinds) {
    if (!synced(kind)) return absl::StrCat("the first listing of ", KindName(kind));
  }
  return std::nullopt;
}

std::string CatalogState::WaitingFor() const {
  if (auto inputs = InputsWaitingFor()) return *inputs;
  return encryption_settled_ ? "" : "the encryption Secrets";
}

void CatalogState::ApplyScan(const typeset::DiscoveryScan& scan) {
  registry_.UpdateFromScan(catalog_.Update(scan));
  if (!first_scan_at_) first_scan_at_ = clock_.Now();
}

std::optional<absl::Time> CatalogState::NextDeadline() const {
  std::optional<absl::Time> deadline = registry_.NextDeadline();
  if (next_status_refresh_ && (!deadline || *next_status_refresh_ < *deadline)) {
    deadline = next_status_refresh_;
  }
  if (first_scan_at_) {
    absl::Time settled = *first_scan_at_ + typeset::Registry::kSettleWindow;
    if (clock_.Now() < settled && (!deadline || settled < *deadline)) deadline = settled;
  }
  return deadline;
}

void CatalogState::Tick() { registry_.Tick(); }

void CatalogState::ReplaceObjects(ObjectKind kind, const std::vector<nlohmann::json>& objects) {
  std::set<ObjectKey> listed;
  for (const auto& object : objects) listed.insert(KeyOf(kind, object));
  std::vector<ObjectKey> gone;
  for (const auto& [key, object] : objects_) {
    if (key.kind == kind && listed.count(key) == 0) gone.push_back(key);
  }
  for (const ObjectKey& key : gone) ForgetObject(key);
  for (const auto& object : objects) UpsertObject(kind, object);
  synced_.insert(kind);
}

void CatalogState::UpsertObject(ObjectKind kind, const nlohmann::json& object) {
  ObjectKey key = KeyOf(kind, object);
  if (key.name.empty()) return;  // not an object we can address
  auto [it, inserted] = objects_.insert_or_assign(key, object);
  if (IsRule(kind)) {
    if (inserted) ++rule_objects_;
    ParseRule(key, object);
  }
}

void CatalogState::DeleteObject(ObjectKind kind, const nlohmann::json& object) {
  ForgetObject(KeyOf(kind, object));
}

void CatalogState::ForgetObject(const ObjectKey& key) {
  auto it = objects_.find(key);
  if (it == objects_.end()) return;
  if (IsRule(key.kind)) {
    tables_.RemoveRule(RuleKeyOf(key));
    rule_errors_.erase(key);
    --rule_objects_;
  } else if (key.kind == ObjectKind::kGitTarget) {
    tables_.RemoveTarget({key.namespace_, key.name});
    summaries_.erase(UidOf(it->second));
    validations_.erase(key);
    encryptions_.erase(key);
    encryption_reads_.erase(key);
  } else if (key.kind == ObjectKind::kGitProvider) {
    probes_.erase(key);
  }
  emitted_status_.erase(key);
  objects_.erase(it);
}

void CatalogState::ParseRule(const ObjectKey& key, const nlohmann::json& object) {
  auto parsed = key.kind == ObjectKind::kWatchRule ? rules::ParseWatchRule(object)
                                                   : rules::ParseClusterWatchRule(object);
  if (parsed.ok()) {
    rule_errors_.erase(key);
    tables_.UpsertRule(*std::move(parsed));
  } else {
    // An invalid rule selects nothing (fail-closed) and says why in its status.
    rule_errors_[key] = std::string(parsed.status().message());
    tables_.RemoveRule(RuleKeyOf(key));
  }
}

void CatalogState::ApplyProbe(const ObjectKey& provider, ProviderProbe probe) {
  auto it = objects_.find(provider);
  if (it == objects_.end() || UidOf(it->second) != probe.uid) return;
  probes_[provider].result = std::move(probe);
}

void CatalogState::ApplyEncryptionSecret(const ObjectKey& target, EncryptionSecretResult result) {
  auto it = objects_.find(target);
  if (it == objects_.end() || UidOf(it->second) != result.uid) return;
  encryption_reads_[target].result = std::move(result);
}

const EncryptionSecretResult* CatalogState::SecretResultFor(const ObjectKey& key,
                                                            const nlohmann::json& target) const {
  auto it = encryption_reads_.find(key);
  if (it == encryption_reads_.end() || !it->second.result) return nullptr;
  const EncryptionSecretResult& result = *it->second.result;
  // A result for an earlier spec (or an earlier object of that name) says nothing now.
  if (result.uid != UidOf(target) || result.spec != EncryptionSpecKey(target)) return nullptr;
  return &result;
}

const EncryptionCheck* CatalogState::Encryption(const ObjectKey& key) const {
  auto it = encryptions_.find(key);
  return it == encryptions_.end() ? nullptr : &it->second;
}

void CatalogState::ApplySummary(const reverser::v1::StreamSummary& summary) {
  if (summary.target().uid().empty()) return;
  // Once every GitTarget is known, a summary for an unknown uid (a deleted or recreated
  // target) is dropped rather than kept forever.
  if (synced(ObjectKind::kGitTarget)) {
    const nlohmann::json* target = Object(
        {ObjectKind::kGitTarget, summary.target().namespace_(), summary.target().name()});
    if (target == nullptr || UidOf(*target) != summary.target().uid()) return;
  }
  summaries_[summary.target().uid()] = summary;
}

const nlohmann::json* CatalogState::Object(const ObjectKey& key) const {
  auto it = objects_.find(key);
  return it == objects_.end() ? nullptr : &it->second;
}

const nlohmann::json* CatalogState::ProviderOf(const nlohmann::json& target) const {
  return Object({ObjectKind::kGitProvider, StringAt(target, {"metadata", "namespace"}),
                 StringAt(target, {"spec", "providerRef", "name"})});
}

void CatalogState::Validate() {
  std::vector<std::pair<ObjectKey, const nlohmann::json*>> targets;
  for (const auto& [key, object] : objects_) {
    if (key.kind == ObjectKind::kGitTarget) targets.emplace_back(key, &object);
  }
  for (const auto& [key, target] : targets) {
    std::vector<const nlohmann::json*> others;
    for (const auto& [other_key, other] : targets) {
      if (other_key != key) others.push_back(other);
    }
    TargetValidation validation = ValidateTarget(*target, ProviderOf(*target), others);
    // The encryption gate runs only on validated targets (an invalid one shows it Blocked).
    EncryptionCheck encryption;
    if (validation.ok) encryption = CheckEncryption(*target, SecretResultFor(key, *target));
    rules::TargetKey target_key{key.namespace_, key.name};
    if (validation.ok && encryption.ok) {
      rules::GitDestination destination{key.namespace_,
                                        StringAt(*target, {"spec", "providerRef", "name"}),
                                        StringAt(*target, {"spec", "branch"}),
                                        *NormalizeTargetPath(StringAt(*target, {"spec", "path"}))};
      tables_.UpsertTarget({target_key, UidOf(*target), std::move(destination)});
    } else {
      // Only validated targets with their encryption configured get a table: nothing is
      // delivered to an invalid destination, and no sensitive object waits for recipients.
      tables_.RemoveTarget(target_key);
    }
    validations_[key] = std::move(validation);
    encryptions_[key] = std::move(encryption);
  }
}

reverser::v1::GitTargetConfig CatalogState::ConfigFor(const nlohmann::json& target,
                                                      const rules::WatchedTypeTable& table) const {
  reverser::v1::GitTargetConfig config;
  *config.mutable_target() = rules::ToProto(table.target);
  *config.mutable_destination() = rules::ToProto(table.target.destination);
  static const nlohmann::json kEmpty = nlohmann::json::object();
  const nlohmann::json* found = ProviderOf(target);
  const nlohmann::json& provider = found != nullptr ? *found : kEmpty;
  config.set_remote_url(StringAt(provider, {"spec", "url"}));
  std::string secret = StringAt(provider, {"spec", "secretRef", "name"});
  if (!secret.empty()) {
    config.set_credentials_secret(absl::StrCat(table.target.destination.provider_namespace, "/",
                                               secret));
  }
  // Only the Secret's name travels: the gitworker reads the key itself.
  std::string signing = StringAt(provider, {"spec", "commit", "signing", "secretRef", "name"});
  if (!signing.empty()) {
    config.set_signing_secret(
        absl::StrCat(table.target.destination.provider_namespace, "/", signing));
  }
  auto or_default = [](std::string value, const char* fallback) {
    return value.empty() ? std::string(fallback) : value;
  };
  config.set_committer_name(
      or_default(StringAt(provider, {"spec", "commit", "committer", "name"}), "GitOps Reverser"));
  config.set_committer_email(or_default(
      StringAt(provider, {"spec", "commit", "committer", "email"}), "noreply@configbutler.ai"));
  const nlohmann::json& message = NodeAt(provider, {"spec", "commit", "message"});
  config.set_event_template(
      or_default(StringAt(message, {"eventTemplate"}), commitmeta::kDefaultEventTemplate));
  config.set_group_template(
      or_default(StringAt(message, {"groupTemplate"}), commitmeta::kDefaultGroupTemplate));
  config.set_reconcile_template(
      or_default(StringAt(message, {"reconcileTemplate"}), commitmeta::kDefaultReconcileTemplate));
  absl::Duration window = absl::Seconds(5);
  std::string window_text = StringAt(provider, {"spec", "push", "commitWindow"});
  if (!window_text.empty() && (!absl::ParseDuration(window_text, &window) ||
                               window < absl::ZeroDuration())) {
    window = absl::Seconds(5);  // CommitConfigInvalid is reported on the provider
  }
  config.set_commit_window_ms(absl::ToInt64Milliseconds(window));
  const EncryptionCheck* encryption =
      Encryption({ObjectKind::kGitTarget, table.target.key.namespace_, table.target.key.name});
  if (encryption != nullptr && encryption->required && encryption->ok) {
    for (const std::string& r : encryption->recipients) config.add_age_recipients(r);
  }
  const nlohmann::json& by_type = NodeAt(target, {"spec", "placement", "byType"});
  if (by_type.is_object()) {
    for (auto it = by_type.begin(); it != by_type.end(); ++it) {
      if (it.value().is_string()) {
        (*config.mutable_placement_by_type())[it.key()] = it.value().get<std::string>();
      }
    }
  }
  config.set_placement_default(StringAt(target, {"spec", "placement", "default"}));
  return config;
}

CatalogChanges CatalogState::Reconcile() {
  CatalogChanges changes;
  // Type records are served (ListTypes, GetType) as soon as a scan exists, primed or not.
  changes.types_changed = !types_published_ || registry_.revision() != published_revision_ ||
                          registry_.Ready() != published_ready_;
  types_published_ = true;
  published_ready_ = registry_.Ready();
  published_revision_ = registry_.revision();
  if (!InputsPrimed()) return changes;
  Validate();
  CollectEncryptionReads(changes);
  if (!encryption_settled_) {
    // Nothing is published before the first read of every encryption Secret is answered.
    if (EncryptionPending()) return changes;
    encryption_settled_ = true;
  }
  rules::RefreshResult refreshed = tables_.Refresh(rules::RegistrySource(registry_));
  changes.tables_resolved = refreshed.resolved;

  // Table protos are rebuilt for every target: the config (provider settings, placement) can
  // change while the plan stays the same.
  reverser::v1::TableUpdate delta;
  std::set<rules::TargetKey> present;
  for (const rules::WatchedTypeTable* table : tables_.Tables()) {
    const rules::TargetKey& key = table->target.key;
    present.insert(key);
    const nlohmann::json* target = Object({ObjectKind::kGitTarget, key.namespace_, key.name});
    if (target == nullptr) continue;
    reverser::v1::WatchedTypeTable proto = rules::ToProto(*table);
    *proto.mutable_config() = ConfigFor(*target, *table);
    auto it = table_protos_.find(key);
    if (it == table_protos_.end() ||
        !google::protobuf::util::MessageDifferencer::Equals(it->second, proto)) {
      *delta.add_upserted() = proto;
      table_protos_[key] = std::move(proto);
    }
  }
  for (auto it = table_protos_.begin(); it != table_protos_.end();) {
    if (present.count(it->first) == 0) {
      *delta.add_removed() = it->second.target();
      it = table_protos_.erase(it);
    } else {
      ++it;
    }
  }
  bool claims_changed = claims_.Update(tables_.Tables());
  if (!ever_published_ || delta.upserted_size() > 0 || delta.removed_size() > 0) {
    delta.set_generation(++tables_generation_);
    delta.set_full(!ever_published_);
    changes.tables = std::move(delta);
  }
  if (!ever_published_ || claims_changed) changes.claims = Claims();
  ever_published_ = true;

  CollectStatus(changes);
  CollectProbes(changes);
  return changes;
}

void CatalogState::EmitStatus(const ObjectKey& key, const nlohmann::json& object,
                              nlohmann::json status, CatalogChanges& changes,
                              bool stamp_reconcile_time) {
  const absl::Time now = clock_.Now();
  bool current = Covers(NodeAt(object, {"status"}), status);
  if (current && stamp_reconcile_time) {
    // Also rewritten once the reconcile time shown is older than the refresh period.
    std::optional<absl::Time> shown =
        ParseKubeTime(StringAt(object, {"status", "lastReconcileTime"}));
    current = shown && now - *shown < options_.status_refresh;
  }
  if (current) {
    emitted_status_.erase(key);
    return;
  }
  auto it = emitted_status_.find(key);
  if (it != emitted_status_.end() && it->second == status) return;  // already on its way
  emitted_status_[key] = status;
  if (stamp_reconcile_time) status["lastReconcileTime"] = FormatKubeTime(now);
  changes.status_writes.push_back({key, UidOf(object), std::move(status)});
}

std::vector<reverser::v1::StreamReadiness> CatalogState::RuleStreams(
    const rules::WatchedTypeTable& table, const rules::RuleKey& rule,
    const reverser::v1::StreamSummary* summary) const {
  std::vector<reverser::v1::StreamReadiness> out;
  auto selected = table.selections.find(rule);
  if (selected == table.selections.end()) return out;
  for (const auto& [gvr, ns] : selected->second) {
    auto type = table.types.find(gvr);
    if (type == table.types.end()) {
      // Resolution adds a type with every selection of it (rules/table.cc): in release the
      // stream goes unreported rather than invented.
      REVERSER_BUG("a rule selects a type its GitTarget's table does not hold");
      continue;
    }
    const core::WatchScope serving = rules::ServingScope(type->second, ns);
    reverser::v1::StreamReadiness readiness;
    *readiness.mutable_claim()->mutable_type() = rules::ToProto(type->second).type();
    *readiness.mutable_claim()->mutable_scope() = core::ToProto(serving);
    readiness.set_state(reverser::v1::STREAM_STATE_REPLAYING);
    readiness.set_reason(rules::kStreamReasonInitialReplay);
    readiness.set_message("waiting for the splicer to report this stream");
    if (summary != nullptr) {
      for (const auto& reported : summary->streams()) {
        if (core::FromProto(reported.claim().type().gvr()) == gvr &&
            core::FromProto(reported.claim().scope()) == serving) {
          readiness = reported;
          break;
        }
      }
    }
    out.push_back(std::move(readiness));
  }
  return out;
}

void CatalogState::CollectStatus(CatalogChanges& changes) {
  const absl::Time now = clock_.Now();
  // GitTargets sort before rules (ObjectKind order): their statuses are computed first and
  // mirrored into the rules' GitTargetReady.
  std::map<ObjectKey, nlohmann::json> target_statuses;
  next_status_refresh_.reset();
  for (const auto& [key, object] : objects_) {
    switch (key.kind) {
      case ObjectKind::kGitProvider: {
        const ProviderProbe* probe = nullptr;
        auto it = probes_.find(key);
        if (it != probes_.end() && it->second.result &&
            it->second.result->uid == UidOf(object) &&
            it->second.result->generation == GenerationOf(object)) {
          probe = &*it->second.result;
        }
        EmitStatus(key, object, ProviderStatus(object, probe, now), changes);
        break;
      }
      case ObjectKind::kGitTarget: {
        auto summary = summaries_.find(UidOf(object));
        nlohmann::json status =
            TargetStatus(object, validations_[key], encryptions_[key],
                         tables_.Table({key.namespace_, key.name}),
                         summary == summaries_.end() ? nullptr : &summary->second, now);
        target_statuses[key] = status;
        EmitStatus(key, object, std::move(status), changes, /*stamp_reconcile_time=*/true);
        if (emitted_status_.count(key) == 0) {
          // Shown and current: due again when its reconcile time ages past the refresh.
          std::optional<absl::Time> shown =
              ParseKubeTime(StringAt(object, {"status", "lastReconcileTime"}));
          if (shown) {
            absl::Time due = *shown + options_.status_refresh;
            if (!next_status_refresh_ || due < *next_status_refresh_) next_status_refresh_ = due;
          }
        }
        break;
      }
      case ObjectKind::kWatchRule:
      case ObjectKind::kClusterWatchRule: {
        RuleContext context;
        if (auto err = rule_errors_.find(key); err != rule_errors_.end()) {
          context.parse_error = err->second;
        } else {
          context.target_namespace = key.kind == ObjectKind::kWatchRule
                                         ? key.namespace_
                                         : StringAt(object, {"spec", "targetRef", "namespace"});
          context.target_name = StringAt(object, {"spec", "targetRef", "name"});
          ObjectKey target_key{ObjectKind::kGitTarget, context.target_namespace,
                               context.target_name};
          context.target = Object(target_key);
          if (auto t = target_statuses.find(target_key); t != target_statuses.end()) {
            context.target_status = &t->second;
          }
          if (const auto* table = tables_.Table({context.target_namespace, context.target_name})) {
            for (const auto& u : table->unresolved) {
              if (u.rule == RuleKeyOf(key)) context.unresolved.push_back(u);
            }
            auto summary = summaries_.find(table->target.uid);
            const reverser::v1::StreamSummary* reported =
                summary == summaries_.end() ? nullptr : &summary->second;
            context.streams = RuleStreams(*table, RuleKeyOf(key), reported);
            if (reported != nullptr && reported->has_observed_time()) {
              context.streams_observed = absl::FromUnixSeconds(reported->observed_time().seconds());
            }
          }
        }
        EmitStatus(key, object, RuleStatus(object, context, now), changes);
        break;
      }
    }
  }
}

void CatalogState::CollectProbes(CatalogChanges& changes) {
  const absl::Time now = clock_.Now();
  for (const auto& [key, object] : objects_) {
    if (key.kind != ObjectKind::kGitProvider) continue;
    ProbeSlot& slot = probes_[key];
    std::string uid = UidOf(object);
    int64_t generation = GenerationOf(object);
    if (slot.requested_uid == uid && slot.requested_generation == generation &&
        now - slot.requested_at < options_.probe_interval) {
      continue;
    }
    slot.requested_uid = uid;
    slot.requested_generation = generation;
    slot.requested_at = now;
    changes.probes.push_back({key, object});
  }
}

void CatalogState::CollectEncryptionReads(CatalogChanges& changes) {
  const absl::Time now = clock_.Now();
  for (const auto& [key, encryption] : encryptions_) {
    if (!encryption.secret) continue;
    const nlohmann::json* target = Object(key);
    if (target == nullptr) continue;
    EncryptionSlot& slot = encryption_reads_[key];
    std::string uid = UidOf(*target);
    std::string spec = EncryptionSpecKey(*target);
    if (slot.requested_uid == uid && slot.requested_spec == spec &&
        now - slot.requested_at < options_.probe_interval) {
      continue;
    }
    slot.requested_uid = uid;
    slot.requested_spec = spec;
    slot.requested_at = now;
    changes.encryption_reads.push_back({key, uid, std::move(spec), *encryption.secret});
  }
}

bool CatalogState::EncryptionPending() const {
  for (const auto& [key, encryption] : encryptions_) {
    if (encryption.pending) return true;
  }
  return false;
}

reverser::v1::ClaimSet CatalogState::Claims() const {
  return rules::ToProto(claims_.claims(), options_.generation_epoch + claims_.generation());
}

reverser::v1::TableUpdate CatalogState::AllTables() const {
  reverser::v1::TableUpdate out;
  out.set_generation(tables_generation_);
  out.set_full(true);
  for (const auto& [key, proto] : table_protos_) *out.add_upserted() = proto;
  return out;
}

std::vector<reverser::v1::TypeRecord> CatalogState::TypeRecords(bool followable_only) const {
  std::vector<reverser::v1::TypeRecord> out;
  for (const typeset::TypeRecord& record : registry_.All()) {
    if (followable_only && !record.Followable()) continue;
    out.push_back(typeset::ToProto(record));
  }
  return out;
}

std::optional<reverser::v1::TypeRecord> CatalogState::Type(
    const core::GroupVersionResource& gvr) const {
  auto record = registry_.ByGVR(gvr);
  if (!record) return std::nullopt;
  return typeset::ToProto(*record);
}

}  // namespace reverser::catalog
