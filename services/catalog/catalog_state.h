#pragma once

// The catalog's domain state in one single-threaded object: the API resource catalog and the
// followability registry, the watched CRD objects, the rule store with its per-GitTarget
// watched-type tables, the claim set, and the statuses the controllers want written. The
// catalog actor owns one; tests drive it directly with a FakeClock.
//
// Inputs (scans, object events, probe results, stream summaries) only record facts;
// Reconcile() turns them into what must leave the process: a new claim set, table deltas,
// status writes, provider probes. Nothing is published before the state is primed: a first
// discovery scan applied, the settle window elapsed since (at startup every type is new, and
// version-less rules only select settled types), and every watched kind listed once. So a
// restarting catalog never tells subscribers that the world is empty or smaller than it is.

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "libs/core/clock.h"
#include "libs/rules/claims.h"
#include "libs/rules/table_store.h"
#include "libs/typeset/catalog.h"
#include "libs/typeset/registry.h"
#include "proto/reverser/v1/catalog.pb.h"
#include "services/catalog/controllers.h"
#include "services/catalog/objects.h"

namespace reverser::catalog {

// A status to write through the status subresource (merge patch of `status`).
struct StatusWrite {
  ObjectKey key;
  std::string uid;
  nlohmann::json status;
};

// A GitProvider whose credentials and remote must be (re)checked.
struct ProbeRequest {
  ObjectKey key;
  nlohmann::json provider;
};

// A GitTarget whose age key Secret must be (re)read — and, with generateWhenMissing, created or
// completed with a generated key.
struct EncryptionSecretRequest {
  ObjectKey key;
  std::string uid;
  std::string spec;  // EncryptionSpecKey of the target, echoed in the result
  EncryptionSecretRef secret;
};

struct CatalogChanges {
  std::optional<reverser::v1::ClaimSet> claims;    // the new claim set, when it changed
  std::optional<reverser::v1::TableUpdate> tables;  // a delta, when any table changed
  std::vector<StatusWrite> status_writes;
  std::vector<ProbeRequest> probes;
  std::vector<EncryptionSecretRequest> encryption_reads;
  bool types_changed = false;  // the registry revision moved
  size_t tables_resolved = 0;  // tables recomputed by this reconcile
};

struct CatalogStateOptions {
  typeset::RegistryOptions registry;
  // Generations start here so they keep increasing across catalog restarts (the service uses
  // the start time); subscribers compare generations for equality only.
  uint64_t generation_epoch = 0;
  // GitProvider probes and GitTarget encryption Secret reads are repeated this often (Secrets
  // are not watched: their values stay out of the catalog).
  absl::Duration probe_interval = absl::Minutes(5);
  // A GitTarget's status (with lastReconcileTime) is written again once the reconcile time it
  // shows is this old, even when nothing else changed: the reference's steady requeue.
  absl::Duration status_refresh = absl::Minutes(5);
};

class CatalogState {
 public:
  CatalogState(const core::Clock& clock, CatalogStateOptions options);

  // --- inputs -------------------------------------------------------------------------------
  void ApplyScan(const typeset::DiscoveryScan& scan);
  // Re-judges the registry's grace and settle deadlines.
  void Tick();
  // The complete set of one kind (initial list or relist): anything not in it is gone.
  void ReplaceObjects(ObjectKind kind, const std::vector<nlohmann::json>& objects);
  void UpsertObject(ObjectKind kind, const nlohmann::json& object);
  void DeleteObject(ObjectKind kind, const nlohmann::json& object);
  void ApplyProbe(const ObjectKey& provider, ProviderProbe probe);
  void ApplyEncryptionSecret(const ObjectKey& target, EncryptionSecretResult result);
  void ApplySummary(const reverser::v1::StreamSummary& summary);
  // A status write failed: the next Reconcile emits it again.
  void ForgetEmittedStatus(const ObjectKey& key) { emitted_status_.erase(key); }

  // Brings tables, claims and statuses up to date with the inputs so far.
  CatalogChanges Reconcile();

  // --- views --------------------------------------------------------------------------------
  // Inputs primed (below) and the first read of every encryption Secret a validated target
  // needs answered, so a restarting catalog does not drop encrypted targets from its first
  // tables and claims.
  bool primed() const { return InputsPrimed() && encryption_settled_; }
  // What priming still waits for, for operators ("" once primed).
  std::string WaitingFor() const;
  bool synced(ObjectKind kind) const { return synced_.count(kind) > 0; }
  const typeset::Registry& registry() const { return registry_; }
  const typeset::ApiResourceCatalog& catalog() const { return catalog_; }
  // When a Tick() may change something (registry deadlines, the end of the startup settle, a
  // GitTarget's status refresh).
  std::optional<absl::Time> NextDeadline() const;

  reverser::v1::ClaimSet Claims() const;
  size_t claim_count() const { return claims_.claims().size(); }
  // Every table at the current generation, `full` set.
  reverser::v1::TableUpdate AllTables() const;
  uint64_t tables_generation() const { return tables_generation_; }
  std::vector<reverser::v1::TypeRecord> TypeRecords(bool followable_only) const;
  std::optional<reverser::v1::TypeRecord> Type(const core::GroupVersionResource& gvr) const;
  const rules::WatchedTypeTable* Table(const rules::TargetKey& key) const {
    return tables_.Table(key);
  }
  const nlohmann::json* Object(const ObjectKey& key) const;
  // The target's EncryptionConfigured verdict as of the last Reconcile (null if unknown).
  const EncryptionCheck* Encryption(const ObjectKey& key) const;
  size_t rule_count() const { return rule_objects_; }
  const rules::TableStore& table_store() const { return tables_; }

 private:
  // What the inputs (discovery, its settle window, the first listings) still wait for;
  // nullopt once they are primed.
  std::optional<std::string> InputsWaitingFor() const;
  bool InputsPrimed() const { return !InputsWaitingFor().has_value(); }
  void ParseRule(const ObjectKey& key, const nlohmann::json& object);
  const EncryptionSecretResult* SecretResultFor(const ObjectKey& key,
                                                const nlohmann::json& target) const;
  void ForgetObject(const ObjectKey& key);
  const nlohmann::json* ProviderOf(const nlohmann::json& target) const;
  reverser::v1::GitTargetConfig ConfigFor(const nlohmann::json& target,
                                          const rules::WatchedTypeTable& table) const;
  void Validate();
  void CollectStatus(CatalogChanges& changes);
  void CollectProbes(CatalogChanges& changes);
  void CollectEncryptionReads(CatalogChanges& changes);
  bool EncryptionPending() const;
  // Queues a status write unless the object already shows `status` (or the same write is in
  // flight). `stamp_reconcile_time`: the write carries lastReconcileTime = now, and is also
  // made once the shown one is older than status_refresh.
  void EmitStatus(const ObjectKey& key, const nlohmann::json& object, nlohmann::json status,
                  CatalogChanges& changes, bool stamp_reconcile_time = false);
  // One StreamReadiness per (type, namespace) `rule` selects in `table`: the reported state of
  // the splice stream that serves it (rules::ServingScope), else InitialReplay.
  std::vector<reverser::v1::StreamReadiness> RuleStreams(
      const rules::WatchedTypeTable& table, const rules::RuleKey& rule,
      const reverser::v1::StreamSummary* summary) const;

  const core::Clock& clock_;
  CatalogStateOptions options_;
  typeset::ApiResourceCatalog catalog_;
  typeset::Registry registry_;
  rules::TableStore tables_;
  rules::ClaimTracker claims_;

  std::map<ObjectKey, nlohmann::json> objects_;
  std::set<ObjectKind> synced_;
  std::map<ObjectKey, std::string> rule_errors_;  // parse failures, by rule object
  size_t rule_objects_ = 0;
  std::map<ObjectKey, TargetValidation> validations_;
  std::map<std::string, reverser::v1::StreamSummary> summaries_;  // by GitTarget uid
  struct ProbeSlot {
    std::optional<ProviderProbe> result;
    std::string requested_uid;
    int64_t requested_generation = -1;
    absl::Time requested_at = absl::InfinitePast();
  };
  std::map<ObjectKey, ProbeSlot> probes_;
  std::map<ObjectKey, EncryptionCheck> encryptions_;  // GitTargets, as of the last Validate
  struct EncryptionSlot {
    std::optional<EncryptionSecretResult> result;
    std::string requested_uid;
    std::string requested_spec;
    absl::Time requested_at = absl::InfinitePast();
  };
  std::map<ObjectKey, EncryptionSlot> encryption_reads_;
  bool encryption_settled_ = false;
  // The last status emitted per object: a write in flight is not repeated while the watch has
  // not yet delivered the written object back.
  std::map<ObjectKey, nlohmann::json> emitted_status_;
  // The earliest lastReconcileTime refresh due (NextDeadline).
  std::optional<absl::Time> next_status_refresh_;

  std::map<rules::TargetKey, std::string> published_tables_;  // serialized proto per target
  std::map<rules::TargetKey, reverser::v1::WatchedTypeTable> table_protos_;
  uint64_t tables_generation_;
  uint64_t published_revision_ = 0;
  std::optional<absl::Time> first_scan_at_;
  bool types_published_ = false;
  bool published_ready_ = false;
  bool ever_published_ = false;
};

}  // namespace reverser::catalog
