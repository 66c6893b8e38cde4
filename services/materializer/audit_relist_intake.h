#pragma once

// The per-claim half of the audit intake (--intake=audit): no watch. The stream is fed by the
// audit webhook (AuditStreamWriter, on the webhook's threads); this loop, on the claim's worker
// thread, LISTs at start and every `relist_interval`. A LIST whose objects differ from
// checkpoint + stream (up to the LIST's RV) replaces the checkpoint at that RV — healing
// whatever the audit log missed — while entries above it stay; a LIST that agrees only folds
// the stream up to its RV (a compaction), so readers that are caught up need not splice again.
// A difference counts only once it has lasted `heal_settle` with no stream entry for that
// object (its audit event may be in flight); until then the LIST is only folded and a
// follow-up LIST is scheduled. When the audit writer reports a change it could not stream
// (ClaimRegistry::RequestRelist), the LIST comes early. Between LISTs the loop keeps the stream
// within compact_after_entries and looks for lost Redis state every state_check_interval; lost
// state is rebuilt by a LIST that replaces the checkpoint without waiting for differences to
// settle.

#include <map>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "libs/kube/rest_client.h"
#include "services/materializer/materialization_core.h"

namespace reverser::materializer {

class AuditRelistIntake final : public ClaimIntake {
 public:
  AuditRelistIntake(std::shared_ptr<kube::RestClient> client, MaterializationCore* core);

  void Run(const MaterializationCore::Opened& opened) override;

 private:
  // One LIST, then a checkpoint replacement (differences found, or `rebuild`: lost state) or a
  // fold up to its RV.
  absl::Status Relist(bool rebuild);
  void CountRelist(const std::string& outcome);

  std::shared_ptr<kube::RestClient> client_;
  MaterializationCore& core_;

  // Differences between LIST and checkpoint + stream not yet healed, by identity: what
  // checkpoint + stream held for it (nullopt: nothing) when first seen. Worker thread only.
  struct UnhealedDifference {
    std::optional<std::string> materialized;
    absl::Time first_seen;
  };
  std::map<std::string, UnhealedDifference> unhealed_;
};

}  // namespace reverser::materializer
