#pragma once

// Turns the catalog's watched-type tables into splice streams: for every GitTarget, every type
// it follows and the materialization that serves it (the type's cluster-wide materialization
// when any target follows it cluster-wide, else one per namespace — the catalog's claim rule),
// one SpliceStream. Target configs go to the gitworker before any delivery, and again after
// every reconnect. Stream readiness is rolled up per target for the catalog.
//
// A GitTarget that leaves the tables — named in `removed`, or missing from a full update (which
// lists every target) — is removed: its streams stop, then its delivery cursors and reference
// watch cursors are deleted (retried at the next update if Redis fails; their TTL is the last
// resort). Nothing else deletes cursors: a reconnect to the catalog, or a restarted catalog,
// sends a full update only once it is primed (every GitTarget listed), so the same targets come
// back and keep their cursors; a type leaving a target's table keeps its cursor until the TTL.

#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "absl/status/statusor.h"
#include "proto/reverser/v1/catalog.pb.h"
#include "services/splicer/delivery_client.h"
#include "services/splicer/refusal_book.h"
#include "services/splicer/splice_stream.h"

namespace reverser::splicer {

struct TargetManagerOptions {
  SpliceStreamOptions stream_defaults;  // redis, prefix, attribution settings
  RefusalBookOptions refusals;  // how many standing refusals are kept and reported per target
};

class TargetManager {
 public:
  TargetManager(TargetManagerOptions options, DeliveryClient* delivery,
                runtime::MetricsRegistry* metrics);
  ~TargetManager();

  // Applies a table update (full replacement when update.full()).
  void Apply(const reverser::v1::TableUpdate& update);
  // A `refusal` or `refused_files` from the gitworker (DeliveryClient::SetOnRefusal): rolled up
  // per target into Summaries().
  void OnRefusal(const reverser::v1::DeliveryFeedback& feedback);
  // Sends every known target config (after a (re)connect).
  void SendConfigs();
  void StopAll();

  // Per-target readiness roll-up (libs/rules/stream_readiness.h: counted per type, reasons and
  // messages as the reference's), with each stream's claim, own state, reason and message, the
  // last push the gitworker acked, and the target's standing refusals (refusal_book.h).
  std::vector<reverser::v1::StreamSummary> Summaries() const;
  // Makes the streams of `target` (by uid, else namespace/name) splice again and send a fresh
  // resync; with `claim` (its type's group/version/resource, and its scope when set) only the
  // matching stream(s). Returns the claims of the streams asked to resplice; NotFound names the
  // unknown target or type and lists what exists. `reason`/`message`: what the streams' state
  // says while they resplice (empty: the usual replay reason).
  absl::StatusOr<std::vector<reverser::v1::Claim>> Resplice(
      const reverser::v1::GitTargetRef& target, const reverser::v1::Claim* claim,
      const std::string& reason = "", const std::string& message = "");
  size_t stream_count() const;

 private:
  void Reconcile();  // holds mu_
  // The reader of `claim`'s materialization, started on first use (holds mu_).
  MaterializationReader* ReaderFor(const reverser::v1::Claim& claim, const SpliceStreamOptions& o);
  // Deletes the cursors of removed targets (after Reconcile stopped their streams).
  void DeleteRemovedCursors();

  TargetManagerOptions options_;
  RefusalBook refusals_;
  DeliveryClient* delivery_;
  runtime::MetricsRegistry* metrics_;
  mutable std::mutex mu_;
  std::map<std::string, reverser::v1::WatchedTypeTable> tables_;  // by target uid
  // One reader per materialization (by MaterializationKey), shared by the streams that follow
  // it; declared before streams_ so that the streams go first.
  std::map<std::string, std::unique_ptr<MaterializationReader>> readers_;
  std::map<std::string, std::unique_ptr<SpliceStream>> streams_;  // by StreamKey
  // Removed targets whose cursors are still to be deleted, by uid.
  std::map<std::string, reverser::v1::GitTargetRef> cursors_to_delete_;
  std::unique_ptr<redisstore::RedisConnection> redis_;  // Apply's thread only
};

}  // namespace reverser::splicer
