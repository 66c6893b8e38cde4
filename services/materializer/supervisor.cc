#include "services/materializer/supervisor.h"

#include <map>
#include <optional>
#include <set>

#include "libs/core/proto_convert.h"
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

SupervisorActor::behavior_type Supervisor(SupervisorActor::stateful_pointer<SupervisorState> self,
                                          SupervisorOptions options) {
  // The workers stop while the actor still runs, as a message it handles, not in its cleanup.
  self->set_exit_handler([self](caf::exit_msg& msg) {
    self->state.StopAll();
    self->quit(msg.reason);
  });
  return {
      [self, options](claims_atom, const reverser::v1::ClaimSet& set) {
        auto& workers = self->state.workers;
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
        for (auto it = workers.begin(); it != workers.end();) {
          auto want = wanted.find(it->first);
          if (want != wanted.end() && want->second == it->second->sensitive()) {
            ++it;
            continue;
          }
          if (want != wanted.end()) {
            // Became (or stopped being) sensitive: a new worker rebuilds it sealed (or not).
            runtime::LogInfo("claim sensitivity changed",
                             {{"type", it->second->Name()}, {"sensitive", want->second}});
            if (auto s = it->second->StopAndRelease(); !s.ok()) {
              runtime::LogWarning("release failed", {{"error", s.ToString()}});
            }
            it = workers.erase(it);
            continue;
          }
          runtime::LogInfo("claim withdrawn", {{"type", it->second->Name()}});
          if (options.release_withdrawn) {
            if (auto s = it->second->StopAndRelease(); !s.ok()) {
              runtime::LogWarning("release failed", {{"error", s.ToString()}});
            }
          } else {
            it->second->Stop();
          }
          it = workers.erase(it);
        }
        for (const auto& [key, is_sensitive] : wanted) {
          if (workers.count(key)) continue;
          auto worker = options.make_worker(key.first, key.second, is_sensitive);
          runtime::LogInfo("claim started", {{"type", worker->Name()}});
          worker->Start();
          workers.emplace(key, std::move(worker));
        }
        if (options.on_applied) options.on_applied(workers.size());
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
