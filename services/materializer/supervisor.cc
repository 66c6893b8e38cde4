#include "services/materializer/supervisor.h"

#include <set>
#include <map>
#include <optional>

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

caf::behavior Supervisor(caf::blocking_actor* self, SupervisorOptions options) {
  std::map<ClaimKey, std::unique_ptr<TypeMaterializer>> workers;
  bool running = true;
  self->receive_while([&] { return running; })(
      [&](caf::exit_msg&) { running = false; },
      [&](claims_atom, const std::string& serialized) {
        reverser::v1::ClaimSet set;
        if (!set.ParseFromString(serialized)) {
          runtime::LogError("malformed claim set ignored");
          return;
        }
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
            runtime::LogInfo("claim sensitivity changed", {{"type", it->second->Name()},
                                                          {"sensitive", want->second}});
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
      [&](list_atom) -> std::string {
        reverser::v1::ListMaterializationsResponse out;
        for (const auto& [key, worker] : workers) {
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
        return out.SerializeAsString();
      },
      [&](compact_atom, const std::string& serialized) -> std::string {
        reverser::v1::CompactRequest request;
        reverser::v1::CompactResponse out;
        if (!request.ParseFromString(serialized)) return out.SerializeAsString();
        std::optional<ClaimKey> only;
        if (request.has_claim()) {
          only = ClaimKey{core::FromProto(request.claim().type().gvr()),
                          core::FromProto(request.claim().scope())};
        }
        for (const auto& [key, worker] : workers) {
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
        return out.SerializeAsString();
      });
  for (auto& [key, worker] : workers) worker->Stop();
  return {};
}

caf::actor SpawnSupervisor(caf::actor_system& system, SupervisorOptions options) {
  return system.spawn<caf::detached>(
      [options = std::move(options)](caf::blocking_actor* self) { Supervisor(self, options); });
}

}  // namespace reverser::materializer
