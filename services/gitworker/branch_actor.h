#pragma once

// The branch actor (protocol in branch_protocol.h) and the registry of branch actors:
//   branch actor (one per provider namespace, provider, branch; detached — it does blocking Git
//     I/O on its own thread): owns a BranchWorker, arms its window silence timers and push
//     cooldown timers;
//   BranchRegistry: finds or spawns the branch actor of a GitTarget's destination.

#include <caf/all.hpp>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "libs/core/clock.h"
#include "libs/git/credentials.h"
#include "libs/runtime/metrics.h"
#include "services/gitworker/branch_protocol.h"
#include "services/gitworker/branch_worker.h"
#include "services/gitworker/work_item.h"

namespace reverser::gitworker {

// How a branch actor runs: on a thread of its own (the service: its Git I/O blocks), or
// scheduled like any actor, so CAF's deterministic test coordinator runs it message by message.
enum class BranchActorThread { kOwn, kScheduled };

BranchActor SpawnBranchActor(caf::actor_system& system, BranchWorkerOptions options,
                             BranchActorThread thread = BranchActorThread::kOwn);

// Resolves a GitProvider's credential Secret ("namespace/name") to credentials.
using CredentialsResolver =
    std::function<absl::StatusOr<git::GitCredentials>(const std::string& secret)>;

// Reads Secret data mounted as files: <dir>/<namespace>/<name>/<key> (as Kubernetes projects a
// Secret volume), then applies the reference's key dialects (CredentialsFromSecretData).
CredentialsResolver DirectoryCredentialsResolver(std::string dir);

struct BranchRegistryOptions {
  std::string work_dir;
  absl::Time stale_lock_cutoff = absl::InfinitePast();  // git::RepositoryOptions'
  absl::Duration push_cooldown = absl::Seconds(5);
  CredentialsResolver credentials;  // empty: anonymous
  WriterLimits limits;              // what branch workers read and render
  SigningKeyResolver signing_keys;  // empty: signing targets' commits wait (secret_source.h)
  // With several replicas (branch_ownership.h): whether this replica may write the branch now.
  // Items for a branch it may not write are dropped unapplied, and nothing is pushed. Null:
  // every branch is this replica's.
  std::function<bool(const BranchKey&)> may_write;
  // With may_write: a grant for one push cycle of the branch (BranchWorkerOptions::begin_push).
  std::function<std::shared_ptr<void>(const BranchKey&)> begin_write;
  const core::Clock* clock = &core::Clock::Real();
  runtime::MetricsRegistry* metrics = &runtime::MetricsRegistry::Global();
};

// Thread-safe map from destination to branch actor; spawns on first use.
class BranchRegistry {
 public:
  BranchRegistry(caf::actor_system& system, BranchRegistryOptions options);

  BranchActor Get(const TargetSettings& settings);
  // The branch actor that writes GitTarget `target_key` ("namespace/name"), if one was used.
  std::optional<BranchActor> ForTarget(const std::string& target_key) const;
  std::optional<BranchKey> KeyForTarget(const std::string& target_key) const;
  std::vector<BranchActor> All() const;
  // The spec.path of every GitTarget last seen writing to `key` ("" = repository root), sorted.
  std::vector<std::string> PathsOn(const BranchKey& key) const;
  // Stops the work of the branches of these units (membership::BranchUnit; lost by this
  // replica): each branch actor drops what it has not pushed (abandon_atom). The actor stays
  // registered, idle, so a branch that comes back reuses it and never races its clone.
  void Abandon(const std::vector<std::string>& units);
  // Asks every branch actor at once to finalize and push, waiting up to `timeout` in all. It
  // blocks its caller: only ServiceApp::Stop calls it, on the main thread (never on a gRPC or
  // actor thread). The gRPC server still takes calls then, so a branch first used afterwards
  // is told to stop as soon as it starts and is not kept: the actor system joins every actor at
  // exit, and one left running, or still referenced, would hold the process.
  void StopAll(absl::Duration timeout);

 private:
  caf::actor_system& system_;
  BranchRegistryOptions options_;
  mutable absl::Mutex mu_;
  std::map<BranchKey, BranchActor> branches_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;  // StopAll began
  std::map<std::string, BranchKey> targets_ ABSL_GUARDED_BY(mu_);
  // Target key → its normalized path.
  std::map<std::string, std::string> target_paths_ ABSL_GUARDED_BY(mu_);
};

}  // namespace reverser::gitworker
