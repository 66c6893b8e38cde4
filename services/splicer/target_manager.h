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

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>

#include "absl/status/statusor.h"
#include "libs/membership/membership.h"
#include "libs/membership/ownership.h"
#include "libs/redisstore/ownership_store.h"
#include "proto/reverser/v1/catalog.pb.h"
#include "services/splicer/delivery_client.h"
#include "services/splicer/refusal_book.h"
#include "services/splicer/splice_stream.h"

namespace reverser::splicer {

struct TargetManagerOptions {
  SpliceStreamOptions stream_defaults;  // redis, prefix, attribution settings
  RefusalBookOptions refusals;  // how many standing refusals are kept and reported per target
  // --membership: this splicer replica's id. Empty: the only replica, every target is spliced.
  // Set: only the targets this replica owns (SetMembership; units TargetUnit(ns, name)), each
  // taken over in Redis (a fence) before its first write, and none while `held` says false.
  std::string replica_id;
  std::function<bool()> held;  // Replica::Held (empty: always held)
  // --gitworker_membership: deliveries go to the gitworker replica owning each target's branch
  // (SetGitworkerMembership; units BranchUnit of every target's destination), one client per
  // replica address, made by `new_client` (not started). Empty: the one DeliveryClient given.
  std::function<std::unique_ptr<DeliveryClient>(const std::string& address)> new_client;
};

// What a replica-aware manager posts to its owner (the actor) from other threads: a target whose
// cursor write was fenced, and the feedback of a routed gitworker client (with its address).
struct TargetManagerPosts {
  std::function<void(const reverser::v1::GitTargetRef&)> fenced;
  std::function<void(const std::string&, const reverser::v1::DeliveryFeedback&)> feedback;
};

class TargetManager {
 public:
  // `delivery`: the one gitworker client (null with options.new_client).
  TargetManager(TargetManagerOptions options, DeliveryClient* delivery,
                runtime::MetricsRegistry* metrics);
  ~TargetManager();

  // Set once, before the first Apply (the posts must not block: they run on reader and delivery
  // threads).
  void SetPosts(TargetManagerPosts posts) { posts_ = std::move(posts); }
  // The splicer members (--membership): targets gained start from their persisted cursor, targets
  // lost stop at once.
  void SetMembership(const membership::Membership& members);
  // The gitworker members (--gitworker_membership): targets whose branch owner moved are routed
  // to the new owner and restart from their cursor there.
  void SetGitworkerMembership(const membership::Membership& members);
  // Periodic: whether the replica still holds its Lease (nothing is spliced while it does not),
  // and takeovers that failed are tried again.
  void Tick();
  // A cursor write of `target` was refused by its fence: the target stops until it is gained again.
  void OnFenced(const reverser::v1::GitTargetRef& target);
  // Feedback of the routed client at `address`: NotOwner re-routes the target, the rest is
  // OnRefusal's.
  void OnFeedback(const std::string& address, const reverser::v1::DeliveryFeedback& feedback);
  // The uids of the targets spliced here (owned, held, taken over, routed).
  std::set<std::string> ActiveTargets() const;
  // Where each active target delivers (routing only): uid → gitworker address.
  std::map<std::string, std::string> Routes() const;

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
  // Recomputes what is spliced here and where it goes (ownership, takeovers, routes, clients),
  // sends the configs of newly routed targets, then reconciles the streams. `reason`: what a
  // re-route is counted as (membership, not_owner).
  void Refresh(const std::string& reason,
               std::vector<reverser::v1::GitTargetConfig> changed_configs = {});
  // Whether `uid` is owned here: held and taken over (holds mu_; always without --membership).
  bool OwnedLocked(const std::string& uid) const;
  // And routed to a gitworker: spliced here (holds mu_).
  bool ActiveLocked(const std::string& uid) const;
  // The client `uid`'s streams deliver to (holds mu_); null: none (it waits).
  DeliveryClient* ClientFor(const std::string& uid) const;
  bool Routing() const { return static_cast<bool>(options_.new_client); }
  bool Replicated() const { return !options_.replica_id.empty(); }
  redisstore::RedisConnection* Redis();  // Apply's (the actor's) connection, reconnected
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
  TargetManagerPosts posts_;

  // Replicas (--membership), all under mu_.
  std::optional<membership::OwnershipTable> owners_;
  bool held_ = true;
  std::map<std::string, redisstore::Fence> fences_;  // by uid: owned and taken over
  std::set<std::string> fenced_;  // refused by a fence: stopped until lost and gained again
  bool takeover_failed_ = false;  // a TakeOver failed: Tick tries again
  // The fence a removed target's cursors are deleted with (only its owner deletes them).
  std::map<std::string, redisstore::Fence> delete_fences_;

  // Routing (--gitworker_membership), all under mu_.
  std::optional<membership::OwnershipTable> branches_;
  // Clients by gitworker address; declared after the streams would be wrong: streams are stopped
  // explicitly before a client is dropped.
  std::map<std::string, std::unique_ptr<DeliveryClient>> clients_;
  std::map<std::string, std::string> routes_;     // uid → address it delivers to
  std::map<std::string, std::string> overrides_;  // uid → address a NotOwner named ("" : wait)
  std::map<std::string, DeliveryClient*> stream_clients_;  // StreamKey → its client
  std::map<std::string, int64_t> stream_epochs_;           // StreamKey → its fence's epoch
  // What each routed client sends first on every (re)connect: the configs routed to it. Read on
  // the client's connection thread (never the actor), hence its own lock.
  struct ConfigBook {
    std::mutex mu;
    std::map<std::string, std::map<std::string, reverser::v1::GitTargetConfig>> by_address;
  };
  std::shared_ptr<ConfigBook> config_book_ = std::make_shared<ConfigBook>();
};

}  // namespace reverser::splicer
