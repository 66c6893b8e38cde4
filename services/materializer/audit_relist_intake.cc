#include "services/materializer/audit_relist_intake.h"

#include <algorithm>
#include <vector>

#include "absl/time/clock.h"
#include "libs/core/status.h"
#include "libs/runtime/log.h"
#include "services/materializer/stream_entries.h"

namespace reverser::materializer {
namespace {

// identity -> what `materialized` holds for it (nullopt: nothing), for every identity whose
// body differs between `materialized` and `listed`.
std::map<std::string, std::optional<std::string>> Differences(
    const redisstore::ObjectMap& materialized, const redisstore::ObjectMap& listed) {
  std::map<std::string, std::optional<std::string>> out;
  auto i = materialized.begin();
  auto j = listed.begin();
  while (i != materialized.end() || j != listed.end()) {
    if (j == listed.end() || (i != materialized.end() && i->first < j->first)) {
      out[i->first] = i->second;
      ++i;
    } else if (i == materialized.end() || j->first < i->first) {
      out[j->first] = std::nullopt;
      ++j;
    } else {
      if (i->second != j->second) out[i->first] = i->second;
      ++i, ++j;
    }
  }
  return out;
}

}  // namespace

AuditRelistIntake::AuditRelistIntake(std::shared_ptr<kube::RestClient> client,
                                     MaterializationCore* core)
    : client_(std::move(client)), core_(*core) {}

void AuditRelistIntake::CountRelist(const std::string& outcome) {
  runtime::Labels labels = core_.labels();
  labels.emplace_back("outcome", outcome);
  core_.metrics()
      ->GetCounter("reverser_materializer_relists_total",
                   "Audit intake: periodic LISTs by outcome (initial, unchanged, deferred, "
                   "healed, superseded, rebuilt, error).",
                   labels)
      .Increment();
}

void AuditRelistIntake::Run(const MaterializationCore::Opened& opened) {
  const TypeMaterializerOptions& options = core_.options();
  if (opened.has_checkpoint) core_.SetPhase("Streaming", "ResumedFromCursor");
  absl::Duration backoff = absl::Milliseconds(800);
  bool rebuild = false;  // lost state: the next LIST replaces the checkpoint outright
  while (!core_.stopping()) {
    absl::Status listed = Relist(rebuild);
    if (core_.stopping()) return;
    if (!listed.ok()) {
      core_.UpdateStatus([&](TypeMaterializerStatus& s) { s.last_error = listed.ToString(); });
      CountRelist("error");
      runtime::LogWarning("list failed", {{"type", core_.Name()}, {"error", listed.ToString()}});
      core_.SetPhase(core_.Status().checkpoint.empty() ? "Replaying" : "Blocked", "ListError");
      if (core_.WaitForStop(backoff)) return;
      backoff = std::min(backoff * 2, absl::Seconds(30));
      continue;
    }
    backoff = absl::Milliseconds(800);
    rebuild = false;
    // Until the next LIST, keep the stream within its bound (the audit webhook appends to it),
    // watch for early-LIST requests and look for lost state.
    const absl::Time listed_at = absl::Now();
    absl::Time next_compaction_check = listed_at + options.compaction_check_interval;
    absl::Time next_state_check = listed_at + options.state_check_interval;
    const ClaimKey self{options.gvr, options.scope};
    absl::Time next_list = listed_at + options.relist_interval;
    // Differences waiting to settle are looked at again as soon as the oldest could count.
    for (const auto& [identity, difference] : unhealed_) {
      next_list = std::min(next_list, std::max(difference.first_seen + options.heal_settle,
                                               listed_at + options.relist_request_min_gap));
    }
    while (absl::Now() < next_list) {
      absl::Duration tick =
          std::min({next_list, next_compaction_check, next_state_check}) - absl::Now();
      if (options.relist_requests) tick = std::min(tick, options.relist_request_poll);
      if (core_.WaitForStop(std::max(tick, absl::ZeroDuration()))) return;
      if (absl::Now() >= next_state_check) {
        next_state_check = absl::Now() + options.state_check_interval;
        if (auto loss = core_.CheckState(core_.store())) {
          core_.OnStateLost(*loss);
          rebuild = true;
          break;
        }
      }
      if (absl::Now() >= next_compaction_check) {
        core_.CompactIfLong();
        next_compaction_check = absl::Now() + options.compaction_check_interval;
      }
      if (options.relist_requests && absl::Now() >= listed_at + options.relist_request_min_gap &&
          options.relist_requests->TakeRelistRequest(self)) {
        runtime::LogInfo("early LIST: the audit log missed a change", {{"type", core_.Name()}});
        break;
      }
    }
  }
}

absl::Status AuditRelistIntake::Relist(bool rebuild) {
  const TypeMaterializerOptions& options = core_.options();
  redisstore::MaterializationStore& store = core_.store();
  const std::string ns = options.scope.IsCluster() ? "" : options.scope.namespace_;
  redisstore::ObjectMap items;
  kube::ListOptions list_options;
  list_options.limit = options.list_page_size;
  std::string list_rv;
  std::vector<std::string> refused;  // identities of the items the client refused
  // Pages of one LIST share its snapshot; an expired continue token restarts it (Expired error).
  do {
    ASSIGN_OR_RETURN(kube::ListPage page, client_->List(options.gvr, ns, list_options));
    if (list_rv.empty()) list_rv = page.resource_version;
    for (const kube::RefusedObject& object : page.refused) {
      std::string identity = core_.RecordRefusal(object, "LIST");
      if (!identity.empty()) refused.push_back(std::move(identity));
    }
    for (nlohmann::json& item : page.items) {
      SetTypeFromList(item, page.kind, page.api_version);
      items[redisstore::ObjectIdentity(ObjectMetadata(item, "namespace"),
                                       ObjectMetadata(item, "name"))] = StoredObjectJson(item);
    }
    list_options.continue_token = page.continue_token;
  } while (!list_options.continue_token.empty() && !core_.stopping());
  if (core_.stopping()) return absl::OkStatus();
  ASSIGN_OR_RETURN(uint64_t rv, core::ParseResourceVersion(list_rv));
  const core::StreamPosition covered = core::StreamPosition::EndOf(rv);

  auto view = core_.WithRetry("load materialization", [&] { return store.Load(); });
  if (!view.ok()) return absl::OkStatus();  // stopping
  if (auto judged = core_.lineage().Observe(view->mark); judged.loss) {
    core_.OnStateLost(*judged.loss);
    rebuild = true;
  }
  std::string outcome;
  size_t lasting = 0;
  if (rebuild) {
    // The LIST replaces whatever is there: no settling, no fold onto a state that was lost.
    unhealed_.clear();
  } else if (view->checkpoint && *view->checkpoint > covered) {
    outcome = "superseded";  // a newer checkpoint (a compaction past R) is in place
  } else if (view->checkpoint) {
    const redisstore::ObjectMap folded = view->Fold(covered);
    MaterializationCore::KeepLastStored(folded, refused, items);
    // Differences healed only once the stream has not moved for that object for heal_settle.
    const absl::Time now = absl::Now();
    std::map<std::string, UnhealedDifference> still;
    for (auto& [identity, materialized] : Differences(folded, items)) {
      auto seen = unhealed_.find(identity);
      if (seen != unhealed_.end() && seen->second.materialized == materialized) {
        if (now - seen->second.first_seen >= options.heal_settle) ++lasting;
        still.emplace(identity, seen->second);
      } else {
        still.emplace(identity, UnhealedDifference{std::move(materialized), now});
      }
    }
    unhealed_ = std::move(still);
    if (lasting == 0) {
      // Fold what is there instead of replacing the checkpoint, so a reader already past those
      // entries keeps its place.
      outcome = unhealed_.empty() ? "unchanged" : "deferred";
      auto compacted = core_.WithRetry("fold confirmed entries",
                                       [&] { return store.CompactView(*view, covered); });
      if (!compacted.ok()) return absl::OkStatus();
      core_.CountCompaction(*compacted);
    }
  }
  if (outcome.empty()) {
    auto swap = core_.WithRetry("replace checkpoint",
                                [&] { return store.ReplaceCheckpoint(items, covered); });
    if (!swap.ok()) return absl::OkStatus();
    outcome = rebuild             ? "rebuilt"
              : !view->checkpoint ? "initial"
              : swap->swapped     ? "healed"
                                  : "superseded";
    core_.OnRebuilt(*swap);
    if (swap->swapped) {
      unhealed_.clear();
      core_.UpdateStatus([&](TypeMaterializerStatus& status) {
        status.checkpoint = swap->position.ToString();
        ++status.replays;
      });
    }
    if (outcome == "healed") {
      runtime::LogWarning("LIST found changes the audit log did not deliver; checkpoint replaced",
                          {{"type", core_.Name()},
                           {"objects", static_cast<long long>(lasting)},
                           {"position", swap->position.ToString()}});
    }
  }
  CountRelist(outcome);
  if (outcome == "healed") {
    core_.metrics()
        ->GetCounter("reverser_materializer_relist_healed_objects_total",
                     "Audit intake: objects a LIST healed (still different after the settle time).",
                     core_.labels())
        .Increment(static_cast<double>(lasting));
  }
  if (outcome != "deferred" && outcome != "superseded") {  // the checkpoint now holds `items`
    core_.metrics()
        ->GetGauge("reverser_materializer_checkpoint_items", "Objects in the checkpoint.",
                   core_.labels())
        .Set(static_cast<double>(items.size()));
  }
  core_.UpdateStatus([](TypeMaterializerStatus& status) { ++status.relists; });
  core_.SetPhase("Streaming", "AuditIntake");
  return absl::OkStatus();
}

}  // namespace reverser::materializer
