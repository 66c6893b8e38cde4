#pragma once

// The actors of the gitworker and their messages:
//   branch actor (one per provider namespace, provider, branch; detached — it does blocking Git
//     I/O on its own thread): owns a BranchWorker, arms its window silence timers and push
//     cooldown timers;
//   BranchRegistry: finds or spawns the branch actor of a GitTarget's destination.

#include <caf/all.hpp>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "libs/core/clock.h"
#include "libs/git/credentials.h"
#include "libs/runtime/metrics.h"
#include "services/gitworker/branch_worker.h"
#include "services/gitworker/work_item.h"

namespace reverser::gitworker {

using WorkItemPtr = std::shared_ptr<WorkItem>;
using SettingsPtr = std::shared_ptr<const TargetSettings>;

using item_atom = caf::atom_constant<caf::atom("item")>;
using window_atom = caf::atom_constant<caf::atom("window")>;
using push_atom = caf::atom_constant<caf::atom("push")>;
using status_atom = caf::atom_constant<caf::atom("status")>;
using stop_atom = caf::atom_constant<caf::atom("stop")>;
using attach_atom = caf::atom_constant<caf::atom("attach")>;
using outcome_atom = caf::atom_constant<caf::atom("outcome")>;
using finalize_atom = caf::atom_constant<caf::atom("finalize")>;
using config_atom = caf::atom_constant<caf::atom("config")>;
using deliver_atom = caf::atom_constant<caf::atom("deliver")>;

}  // namespace reverser::gitworker

// In-process messages only (never serialized).
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(reverser::gitworker::WorkItemPtr)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(reverser::gitworker::SettingsPtr)

namespace reverser::gitworker {

// Branch actor messages:
//   (item_atom, WorkItemPtr) -> bool            the item is in a window or pending write (credit)
//   (window_atom, uint64_t generation) -> void  silence timer (self-sent)
//   (push_atom) -> void                         push timer (self-sent)
//   (status_atom) -> std::string                serialized reverser.v1.BranchStatus
//   (attach_atom, username, target_key, message, uint32_t close_delay_seconds) -> uint64_t
//       attaches to the open window of (username, target) and finalizes it after the delay;
//       returns the write id, 0 when no such window is open
//   (finalize_atom, uint64_t id) -> void         delayed finalize (self-sent)
//   (outcome_atom, uint64_t id) -> std::string  "pending", or "pushed:<sha>" ("pushed:" = no-op)
//   (stop_atom) -> bool                         finalize (shutdown), push, quit
caf::actor SpawnBranchActor(caf::actor_system& system, BranchWorkerOptions options);

// Resolves a GitProvider's credential Secret ("namespace/name") to credentials.
using CredentialsResolver =
    std::function<absl::StatusOr<git::GitCredentials>(const std::string& secret)>;

// Reads Secret data mounted as files: <dir>/<namespace>/<name>/<key> (as Kubernetes projects a
// Secret volume), then applies the reference's key dialects (CredentialsFromSecretData).
CredentialsResolver DirectoryCredentialsResolver(std::string dir);

struct BranchRegistryOptions {
  std::string work_dir;
  absl::Duration push_cooldown = absl::Seconds(5);
  CredentialsResolver credentials;  // empty: anonymous
  WriterLimits limits;              // what branch workers read and render
  SigningKeyResolver signing_keys;  // empty: signing targets' commits wait (secret_source.h)
  const core::Clock* clock = &core::Clock::Real();
  runtime::MetricsRegistry* metrics = &runtime::MetricsRegistry::Global();
};

// Thread-safe map from destination to branch actor; spawns on first use.
class BranchRegistry {
 public:
  BranchRegistry(caf::actor_system& system, BranchRegistryOptions options);

  caf::actor Get(const TargetSettings& settings);
  // The branch actor that writes GitTarget `target_key` ("namespace/name"), if one was used.
  std::optional<caf::actor> ForTarget(const std::string& target_key) const;
  std::optional<BranchKey> KeyForTarget(const std::string& target_key) const;
  std::vector<caf::actor> All() const;
  // The spec.path of every GitTarget last seen writing to `key` ("" = repository root), sorted.
  std::vector<std::string> PathsOn(const BranchKey& key) const;
  // Asks every branch actor to finalize and push, waiting up to `timeout` in total.
  void StopAll(absl::Duration timeout);

 private:
  caf::actor_system& system_;
  BranchRegistryOptions options_;
  mutable std::mutex mu_;
  std::map<BranchKey, caf::actor> branches_;
  std::map<std::string, BranchKey> targets_;
  std::map<std::string, std::string> target_paths_;  // target key → its normalized path
};

}  // namespace reverser::gitworker
