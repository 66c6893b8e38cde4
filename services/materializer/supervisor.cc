#include "services/materializer/supervisor.h"

#include <map>
#include <optional>
#include <set>

#include "absl/strings/str_join.h"
#include "libs/core/proto_convert.h"
#include "libs/membership/units.h"
#include "libs/runtime/log.h"

namespace reverser::materializer {
namespace {

reverser::v1::MaterializationPhase PhaseOf(const std::string& phase) {
  if (phase == "Streaming") return reverser::v1::MATERIALIZATION_PHASE_STREAMING;
  if (phase == "Blocked") return reverser::v1::MATERIALIZATION_PHASE_BLOCKED;
  return reverser::v1::MATERIALIZATION_PHASE_REPLAYING;
}

}  // namespace

SupervisorState::~SupervisorState() { StopAll(); }

void SupervisorState::StopAll() {
  for (auto& [key, worker] : workers) worker->Stop();
  workers.clear();
}

std::string UnitOf(const ClaimKey& claim) {
  return membership::MaterializationUnit(redisstore::GroupResourceSegment(claim.first),
                                         redisstore::ScopeSegment(claim.second));
}

namespace {

using Self = SupervisorActor::stateful_pointer<SupervisorState>;

void ScheduleRetry(Self self, const SupervisorMembership& m) {
  if (self->state.retry_scheduled) return;
  self->state.retry_scheduled = true;
  self->delayed_send(self, std::chrono::milliseconds(absl::ToInt64Milliseconds(m.retry_after)),
                     retry_atom::value);
}

// The unit's fence, taking the unit over first when this replica holds none; nullopt when that
// cannot be done now (Lease not held, Redis down).
std::optional<redisstore::Fence> FenceOf(Self self, const SupervisorMembership& m,
                                         const std::string& unit) {
  auto& st = self->state;
  if (auto it = st.fences.find(unit); it != st.fences.end()) return it->second;
  if (m.held && !m.held()) return std::nullopt;
  if (!st.redis) {
    auto redis = redisstore::RedisConnection::Connect(m.redis);
    if (!redis.ok()) {
      runtime::LogWarning("unit takeover failed; retrying",
                          {{"unit", unit}, {"error", redis.status().ToString()}});
      return std::nullopt;
    }
    st.redis = std::move(*redis);
  }
  redisstore::OwnershipStore own(st.redis.get(), m.prefix);
  auto fence = own.TakeOver(unit, m.replica_id);
  if (!fence.ok()) {
    runtime::LogWarning("unit takeover failed; retrying",
                        {{"unit", unit}, {"error", fence.status().ToString()}});
    return std::nullopt;
  }
  runtime::LogInfo("unit taken over", {{"unit", unit}, {"epoch", fence->epoch}});
  st.fences[unit] = *fence;
  return *fence;
}

// A worker for `key`; null when its unit cannot be taken over now (a retry is scheduled).
std::unique_ptr<TypeMaterializer> MakeWorker(Self self, const SupervisorOptions& options,
                                             const ClaimKey& key, bool sensitive) {
  if (!options.membership) return options.make_worker(key.first, key.second, sensitive);
  const SupervisorMembership& m = *options.membership;
  const std::string unit = UnitOf(key);
  std::optional<redisstore::Fence> fence = FenceOf(self, m, unit);
  if (!fence) {
    ScheduleRetry(self, m);
    return nullptr;
  }
  WorkerOwnership ownership;
  ownership.fence = *fence;
  ownership.may_write = m.held;
  auto weak = caf::actor_cast<caf::weak_actor_ptr>(self);
  ownership.on_fenced = [weak, unit] {
    if (auto supervisor = caf::actor_cast<SupervisorActor>(weak)) {
      caf::anon_send(supervisor, fenced_atom::value, unit);
    }
  };
  return m.make_worker(key.first, key.second, sensitive, ownership);
}

void LogChange(const membership::OwnershipChange& change, size_t owned) {
  if (!change.gained.empty()) {
    runtime::LogInfo("units gained", {{"units", absl::StrJoin(change.gained, ",")},
                                      {"owned", static_cast<long long>(owned)}});
  }
  if (!change.lost.empty()) {
    runtime::LogInfo("units lost", {{"units", absl::StrJoin(change.lost, ",")},
                                    {"owned", static_cast<long long>(owned)}});
  }
}

// Makes the workers match the claim set (and, with membership, the owned units): starts the
// missing, stops (and releases) the rest.
void Apply(Self self, const SupervisorOptions& options) {
  auto& st = self->state;
  auto& workers = st.workers;
  std::map<ClaimKey, bool> desired;
  if (!st.stopped) {
    for (const auto& [key, sensitive] : st.wanted) {
      if (!st.table || st.table->Owns(UnitOf(key))) desired[key] = sensitive;
    }
  }
  for (auto it = workers.begin(); it != workers.end();) {
    auto want = desired.find(it->first);
    const bool fenced = it->second->fenced();
    if (want != desired.end() && want->second == it->second->sensitive() && !fenced) {
      ++it;
      continue;
    }
    if (want != desired.end() && fenced) {
      // Stopped by its fence while this replica still owns the unit: started again below,
      // after a new takeover.
      runtime::LogInfo("claim restarted after it was fenced", {{"type", it->second->Name()}});
      it->second->Stop();
      it = workers.erase(it);
      continue;
    }
    if (want != desired.end()) {
      // Became (or stopped being) sensitive: a new worker rebuilds it sealed (or not).
      runtime::LogInfo("claim sensitivity changed",
                       {{"type", it->second->Name()}, {"sensitive", want->second}});
      if (auto s = it->second->StopAndRelease(); !s.ok()) {
        runtime::LogWarning("release failed", {{"error", s.ToString()}});
      }
      it = workers.erase(it);
      continue;
    }
    if (!st.wanted.count(it->first)) {
      runtime::LogInfo("claim withdrawn", {{"type", it->second->Name()}});
      if (options.release_withdrawn) {
        if (auto s = it->second->StopAndRelease(); !s.ok()) {
          runtime::LogWarning("release failed", {{"error", s.ToString()}});
        }
      } else {
        it->second->Stop();
      }
    } else {
      // Its unit is another replica's now (or the supervisor is stopping): stop at once, keep
      // the keys for the new owner.
      runtime::LogInfo("claim stopped", {{"type", it->second->Name()},
                                         {"reason", st.stopped ? "stopping" : "unit lost"}});
      it->second->Stop();
    }
    it = workers.erase(it);
  }
  if (st.table) {
    for (auto it = st.fences.begin(); it != st.fences.end();) {
      it = st.table->Owns(it->first) && !st.stopped ? std::next(it) : st.fences.erase(it);
    }
  }
  for (const auto& [key, is_sensitive] : desired) {
    if (workers.count(key)) continue;
    auto worker = MakeWorker(self, options, key, is_sensitive);
    if (!worker) continue;  // its unit is taken over on the retry
    runtime::LogInfo("claim started", {{"type", worker->Name()}});
    worker->Start();
    workers.emplace(key, std::move(worker));
  }
  if (st.table && options.membership->metrics) {
    options.membership->metrics
        ->GetGauge("reverser_materializer_owned_units",
                   "Units (type, scope materializations) this replica owns (--membership).")
        .Set(static_cast<double>(st.table->owned().size()));
  }
  if (options.on_applied && st.claims_applied) options.on_applied(workers.size());
}

}  // namespace

SupervisorActor::behavior_type Supervisor(SupervisorActor::stateful_pointer<SupervisorState> self,
                                          SupervisorOptions options) {
  // The workers stop while the actor still runs, as a message it handles, not in its cleanup.
  self->set_exit_handler([self](caf::exit_msg& msg) {
    self->state.StopAll();
    self->quit(msg.reason);
  });
  if (options.membership) self->state.table.emplace(options.membership->replica_id);
  return {
      [self, options](claims_atom, const reverser::v1::ClaimSet& set) {
        auto& st = self->state;
        std::map<ClaimKey, bool> wanted;  // claim -> sensitive
        for (const auto& claim : set.claims()) {
          wanted[{core::FromProto(claim.type().gvr()), core::FromProto(claim.scope())}] =
              claim.sensitive();
        }
        if (options.registry) {
          // Before any release: once this returns, the audit intake no longer writes to a
          // withdrawn claim's keys.
          std::vector<ClaimKey> keys;
          std::set<ClaimKey> sensitive;
          for (const auto& [key, is_sensitive] : wanted) {
            keys.push_back(key);
            if (is_sensitive) sensitive.insert(key);
          }
          options.registry->Replace(std::move(keys), std::move(sensitive));
        }
        st.wanted = std::move(wanted);
        st.claims_applied = true;
        if (st.table) {
          std::vector<std::string> units;
          for (const auto& [key, sensitive] : st.wanted) units.push_back(UnitOf(key));
          LogChange(st.table->SetUnits(std::move(units)), st.table->owned().size());
        }
        Apply(self, options);
      },
      [self, options](membership_atom, const membership::Membership& members) {
        auto& st = self->state;
        if (!st.table) return;
        LogChange(st.table->SetMembership(members), st.table->owned().size());
        Apply(self, options);
      },
      [self, options](fenced_atom, const std::string& unit) {
        // Another replica took the unit over (it stopped its worker already). Held again only
        // after a new takeover, once the retry finds the unit still ours.
        self->state.fences.erase(unit);
        if (options.membership) ScheduleRetry(self, *options.membership);
      },
      [self, options](retry_atom) {
        self->state.retry_scheduled = false;
        Apply(self, options);
      },
      [self, options](stop_atom) {
        self->state.stopped = true;
        Apply(self, options);
        return true;
      },
      [self](list_atom) {
        MaterializationList list;
        reverser::v1::ListMaterializationsResponse& out = list.response;
        for (const auto& [key, worker] : self->state.workers) {
          TypeMaterializerStatus status = worker->Status();
          auto* m = out.add_materializations();
          *m->mutable_claim()->mutable_type()->mutable_gvr() = core::ToProto(key.first);
          *m->mutable_claim()->mutable_scope() = core::ToProto(key.second);
          m->set_phase(PhaseOf(status.phase));
          m->set_reason(status.reason);
          auto position = core::StreamPosition::Parse(status.checkpoint);
          if (position.ok()) m->set_checkpoint_revision(position->rv());
          m->set_replays(status.replays);
          m->set_refused_objects(static_cast<uint64_t>(status.refused_objects));
          m->set_last_refused(status.last_refused);
          // From Redis when it answers (right in audit mode and across restarts); else what
          // this process has counted.
          absl::StatusOr<TypeMaterializer::StoredFacts> stored = worker->ReadStoredFacts();
          m->set_stream_length(stored.ok() ? stored->stream_length : status.appended);
          m->set_diverted_entries(stored.ok() ? stored->diverted : status.diverted);
        }
        return list;
      },
      [self](compact_atom, const reverser::v1::CompactRequest& request) {
        CompactOutcome outcome;
        reverser::v1::CompactResponse& out = outcome.response;
        std::optional<ClaimKey> only;
        if (request.has_claim()) {
          only = ClaimKey{core::FromProto(request.claim().type().gvr()),
                          core::FromProto(request.claim().scope())};
        }
        for (const auto& [key, worker] : self->state.workers) {
          if (only && key != *only) continue;
          auto* result = out.add_results();
          *result->mutable_claim()->mutable_type()->mutable_gvr() = core::ToProto(key.first);
          *result->mutable_claim()->mutable_scope() = core::ToProto(key.second);
          auto compacted = worker->CompactNow();
          if (!compacted.ok()) {
            result->set_error(compacted.status().ToString());
            continue;
          }
          result->set_compacted(compacted->compacted);
          result->mutable_checkpoint()->set_rv(compacted->position.rv());
          result->mutable_checkpoint()->set_seq(compacted->position.seq());
          result->set_folded(compacted->folded);
          result->set_trimmed(compacted->trimmed);
        }
        return outcome;
      },
  };
}

SupervisorActor SpawnSupervisor(caf::actor_system& system, SupervisorOptions options) {
  return system.spawn<caf::detached>(Supervisor, std::move(options));
}

}  // namespace reverser::materializer
