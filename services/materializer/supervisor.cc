#include "services/materializer/supervisor.h"

#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "libs/core/proto_convert.h"
#include "libs/runtime/log.h"

namespace reverser::materializer {
namespace {

using ClaimKey = std::pair<core::GroupVersionResource, core::WatchScope>;

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
        std::map<ClaimKey, bool> wanted;
        for (const auto& claim : set.claims()) {
          wanted[{core::FromProto(claim.type().gvr()), core::FromProto(claim.scope())}] = true;
        }
        for (auto it = workers.begin(); it != workers.end();) {
          if (wanted.count(it->first)) {
            ++it;
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
        for (const auto& [key, unused] : wanted) {
          if (workers.count(key)) continue;
          auto worker = options.make_worker(key.first, key.second);
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
          m->set_diverted_entries(status.diverted);
          m->set_replays(status.replays);
          m->set_stream_length(status.appended);
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

absl::StatusOr<reverser::v1::ClaimSet> ParseStaticClaims(absl::string_view text) {
  reverser::v1::ClaimSet set;
  set.set_generation(1);
  for (absl::string_view item : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    item = absl::StripAsciiWhitespace(item);
    std::pair<absl::string_view, absl::string_view> type_ns = absl::StrSplit(item, '@');
    std::vector<absl::string_view> parts = absl::StrSplit(type_ns.first, '/');
    core::GroupVersionResource gvr;
    if (parts.size() == 2) {
      gvr = {"", std::string(parts[0]), std::string(parts[1])};
    } else if (parts.size() == 3) {
      gvr = {std::string(parts[0]), std::string(parts[1]), std::string(parts[2])};
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "static claim \"", item, "\" is not group/version/resource or version/resource"));
    }
    if (gvr.version.empty() || gvr.resource.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("static claim \"", item, "\" is incomplete"));
    }
    auto* claim = set.add_claims();
    *claim->mutable_type()->mutable_gvr() = core::ToProto(gvr);
    if (type_ns.second.empty()) {
      claim->mutable_scope()->set_cluster(true);
    } else {
      if (auto s = core::ValidateNamespaceName(type_ns.second); !s.ok()) return s;
      claim->mutable_scope()->set_namespace_(std::string(type_ns.second));
    }
  }
  return set;
}

}  // namespace reverser::materializer
