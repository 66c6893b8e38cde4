#pragma once

// The splicer bench's data: N Deployments shaped like a real captured one
// (tests/testdata/k8s/objects/gitops-engine/deployment-live.json, managedFields removed as the
// materializer stores them) in a checkpoint, then M stream entries after it — creates, spec
// updates, status-only updates (which the no-op dedup drops) and deletes — as the materializer
// would append them. Deterministic for a seed.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "libs/core/stream_position.h"
#include "libs/redisstore/stream_entry.h"
#include "nlohmann/json.hpp"

namespace reverser::bench {

struct WorkloadOptions {
  int objects = 100000;
  int entries = 100000;
  int namespaces = 100;
  uint64_t seed = 42;
};

struct Workload {
  redisstore::ObjectMap checkpoint;  // identity -> object JSON
  core::StreamPosition checkpoint_position;
  std::vector<redisstore::StreamEntry> entries;  // append order, ascending resourceVersion
  size_t live_after = 0;                         // objects that exist once every entry is applied
  int creates = 0, updates = 0, status_updates = 0, deletes = 0;
  size_t bytes = 0;  // object JSON bytes in the checkpoint and the entries
};

// The captured Deployment without managedFields (the template every object is made from).
absl::StatusOr<nlohmann::json> LoadTemplate();

Workload MakeWorkload(const WorkloadOptions& options, const nlohmann::json& deployment);

}  // namespace reverser::bench
