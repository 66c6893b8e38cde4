#include "services/gitworker/branch_actor.h"

#include <set>

#include "absl/strings/str_cat.h"
#include "libs/runtime/caf_thread.h"
#include "libs/runtime/log.h"
#include "services/gitworker/branch_ownership.h"
#include "services/gitworker/secret_source.h"

namespace reverser::gitworker {
namespace {

struct BranchActorState {
  BranchWorkerOptions options;  // a new worker is made with them after an abandon
  std::unique_ptr<BranchWorker> worker;
  uint64_t armed_generation = 0;
  std::optional<absl::Time> push_timer_at;
  bool push_queued = false;  // a push_atom is in the mailbox behind the items already queued
  std::optional<absl::Time> commit_timer_at;  // the CommitRequest timer armed
  const core::Clock* clock = nullptr;
  static inline const char* name = "gitworker.branch";
};

using Self = BranchActor::stateful_pointer<BranchActorState>;

std::chrono::microseconds ToChrono(absl::Duration d) {
  if (d < absl::ZeroDuration()) d = absl::ZeroDuration();
  return std::chrono::microseconds(absl::ToInt64Microseconds(d));
}

// After every message: arm the silence timer of a window that got a new event, and schedule the
// next push. A due push is queued behind the messages already in the mailbox rather than run at
// once, so every item that arrived meanwhile is committed first and one push carries them all
// (under load pushes batch by themselves; when idle a push follows its commit immediately).
void Rearm(Self self, bool push_now = false) {
  auto& state = self->state;
  if (auto timer = state.worker->WindowTimer();
      timer.has_value() && timer->first != state.armed_generation) {
    state.armed_generation = timer->first;
    self->delayed_send(self, ToChrono(timer->second), window_atom::value, timer->first);
  }
  if (auto due = state.worker->CommitRequestDeadline();
      due.has_value() && (!state.commit_timer_at.has_value() || *due < *state.commit_timer_at)) {
    state.commit_timer_at = *due;
    self->delayed_send(self, ToChrono(*due - state.clock->Now()), commit_timer_atom::value);
  }
  if (push_now) state.worker->PushIfDue();
  if (auto next = state.worker->NextPushAt(); next.has_value()) {
    if (*next <= state.clock->Now()) {
      if (!state.push_queued) {
        state.push_queued = true;
        self->send(self, push_atom::value);
      }
    } else if (!state.push_timer_at.has_value() || *next < *state.push_timer_at) {
      state.push_timer_at = *next;
      self->delayed_send(self, ToChrono(*next - state.clock->Now()), push_atom::value);
    }
  }
}

BranchActor::behavior_type BranchActorBehavior(Self self, BranchWorkerOptions options) {
  self->state.clock = options.clock;
  self->state.options = options;
  self->state.worker = std::make_unique<BranchWorker>(std::move(options));
  return {
      [=](item_atom, const WorkItemPtr& item) {
        if (self->state.options.may_push && !self->state.options.may_push()) {
          // Not this replica's branch (any more): the target stream tells its stream so.
          return true;
        }
        self->state.worker->Add(std::move(*item));
        Rearm(self);
        return true;
      },
      [=](window_atom, uint64_t generation) {
        self->state.worker->OnWindowTimer(generation);
        Rearm(self);
      },
      [=](push_atom) {
        self->state.push_timer_at.reset();
        self->state.push_queued = false;
        Rearm(self, /*push_now=*/true);
      },
      [=](status_atom) { return self->state.worker->Status().SerializeAsString(); },
      [=](attach_atom, const CommitRequestSpec& spec) {
        CommitRequestView view = self->state.worker->RegisterCommitRequest(spec);
        Rearm(self);
        return view;
      },
      [=](commit_timer_atom) {
        self->state.commit_timer_at.reset();
        self->state.worker->OnCommitRequestTimer();
        Rearm(self);
      },
      [=](abandon_atom) {
        auto& state = self->state;
        const size_t dropped = state.worker->QueueDepth();
        runtime::LogInfo("branch no longer owned; its unpushed writes are dropped",
                         {{"branch", state.options.key.ToString()}, {"dropped", dropped}});
        // Its timers still arrive; the new worker has no window or write they could match
        // except by generation, and an early finalize or push check is harmless.
        state.worker = std::make_unique<BranchWorker>(state.options);
        state.armed_generation = 0;
        state.commit_timer_at.reset();
        state.worker->UpdateQueueGauge();
      },
      [=](stop_atom) {
        self->state.worker->Shutdown();
        self->quit();
        return true;
      },
  };
}

}  // namespace

BranchActor SpawnBranchActor(caf::actor_system& system, BranchWorkerOptions options,
                             BranchActorThread thread) {
  if (thread == BranchActorThread::kScheduled) {
    return system.spawn(BranchActorBehavior, std::move(options));
  }
  return system.spawn<caf::detached>(BranchActorBehavior, std::move(options));
}

CredentialsResolver DirectoryCredentialsResolver(std::string dir) {
  return SecretCredentialsResolver(DirectorySecretReader(std::move(dir)));
}

BranchRegistry::BranchRegistry(caf::actor_system& system, BranchRegistryOptions options)
    : system_(system), options_(std::move(options)) {}

BranchActor BranchRegistry::Get(const TargetSettings& settings) {
  const BranchKey key = BranchKey::Of(settings);
  absl::MutexLock lock(&mu_);
  targets_[settings.TargetKey()] = key;
  target_paths_[settings.TargetKey()] = settings.path;
  if (auto it = branches_.find(key); it != branches_.end()) return it->second;
  BranchWorkerOptions options;
  options.key = key;
  options.remote_url = settings.remote_url;
  options.work_dir = options_.work_dir;
  options.stale_lock_cutoff = options_.stale_lock_cutoff;
  options.push_cooldown = options_.push_cooldown;
  options.limits = options_.limits;
  options.signing_keys = options_.signing_keys;
  if (options_.may_write) {
    options.may_push = [may_write = options_.may_write, key] { return may_write(key); };
  }
  if (options_.begin_write) {
    options.begin_push = [begin_write = options_.begin_write, key] { return begin_write(key); };
  }
  options.clock = options_.clock;
  options.metrics = options_.metrics;
  if (!settings.credentials_secret.empty() && options_.credentials) {
    auto credentials = options_.credentials(settings.credentials_secret);
    if (credentials.ok()) {
      options.credentials = *credentials;
    } else {
      runtime::LogError("credentials unavailable; connecting anonymously",
                        {{"branch", key.ToString()}, {"error", credentials.status().ToString()}});
    }
  }
  runtime::LogInfo("branch worker started",
                   {{"branch", key.ToString()}, {"remote", settings.remote_url}});
  BranchActor actor = SpawnBranchActor(system_, std::move(options));
  // Asked from a target stream (a CAF thread) or a gRPC handler (not one): caf_thread.h.
  runtime::ReleaseCafThreadLogger();
  if (stopping_) {
    // It pushes what reaches it before the stop; the rest is redelivered after the restart. It
    // is not kept: a detached actor's thread ends only once no handle to it is left.
    runtime::LogInfo("branch worker started during shutdown; stopping it",
                     {{"branch", key.ToString()}});
    caf::anon_send(actor, stop_atom::value);
    return actor;
  }
  branches_.emplace(key, actor);
  return actor;
}

std::optional<BranchActor> BranchRegistry::ForTarget(const std::string& target_key) const {
  absl::MutexLock lock(&mu_);
  auto target = targets_.find(target_key);
  if (target == targets_.end()) return std::nullopt;
  auto branch = branches_.find(target->second);
  if (branch == branches_.end()) return std::nullopt;
  return branch->second;
}

std::optional<BranchKey> BranchRegistry::KeyForTarget(const std::string& target_key) const {
  absl::MutexLock lock(&mu_);
  auto target = targets_.find(target_key);
  if (target == targets_.end()) return std::nullopt;
  return target->second;
}

std::vector<BranchActor> BranchRegistry::All() const {
  absl::MutexLock lock(&mu_);
  std::vector<BranchActor> out;
  for (const auto& [key, actor] : branches_) out.push_back(actor);
  return out;
}

std::vector<std::string> BranchRegistry::PathsOn(const BranchKey& key) const {
  absl::MutexLock lock(&mu_);
  std::set<std::string> paths;
  for (const auto& [target, branch] : targets_) {
    if (branch != key) continue;
    if (auto path = target_paths_.find(target); path != target_paths_.end()) {
      paths.insert(path->second);
    }
  }
  return {paths.begin(), paths.end()};
}

void BranchRegistry::Abandon(const std::vector<std::string>& units) {
  const std::set<std::string> lost(units.begin(), units.end());
  absl::MutexLock lock(&mu_);
  for (const auto& [key, actor] : branches_) {
    if (lost.contains(UnitOf(key))) caf::anon_send(actor, abandon_atom::value);
  }
}

void BranchRegistry::StopAll(absl::Duration timeout) {
  std::vector<BranchActor> actors;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    for (const auto& [key, actor] : branches_) actors.push_back(actor);
    branches_.clear();
  }
  // Every branch is asked before any answer is awaited: they finalize and push in parallel.
  runtime::CafThreadLoggerRelease release_logger;  // after `self` (caf_thread.h)
  caf::scoped_actor self{system_};
  const auto wait = ToChrono(std::max(timeout, absl::Milliseconds(1)));
  using Pending = decltype(self->request(actors.front(), wait, stop_atom::value));
  std::vector<Pending> pending;
  pending.reserve(actors.size());
  for (const BranchActor& actor : actors) {
    pending.push_back(self->request(actor, wait, stop_atom::value));
  }
  for (size_t i = 0; i < pending.size(); ++i) {
    pending[i].receive([](bool) {},
                       [&](caf::error& err) {
                         runtime::LogWarning("branch worker did not stop in time",
                                             {{"error", system_.render(err)}});
                         caf::anon_send_exit(actors[i], caf::exit_reason::user_shutdown);
                       });
  }
}

}  // namespace reverser::gitworker
