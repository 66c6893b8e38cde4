#include "services/catalog/catalog_actor.h"

#include <chrono>

#include "libs/runtime/log.h"

// Inputs travel inside the process only, as shared pointers: no serialization needed.
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(std::shared_ptr<reverser::catalog::CatalogInput>)

namespace reverser::catalog {
namespace {

using tick_atom = caf::atom_constant<caf::atom("tick")>;
using reconcile_atom = caf::atom_constant<caf::atom("reconcile")>;

struct ActorState {
  // Rescan callers waiting for a reconcile that will not come get an answer on shutdown.
  ~ActorState() {
    for (ScanInput& scan : applied_scans) {
      for (auto& done : scan.callbacks) done(absl::UnavailableError("the catalog stopped"));
    }
  }

  std::unique_ptr<CatalogState> catalog;
  absl::Time tick_at = absl::InfiniteFuture();
  bool reconcile_pending = false;
  std::vector<ScanInput> applied_scans;  // answered after the next reconcile
};

using Self = caf::stateful_actor<ActorState>;

constexpr absl::Duration kUnprimedRecheck = absl::Seconds(1);

// Inputs only record facts; the reconcile runs once the inputs already queued behind this one
// were applied (the reconcile message joins the end of the mailbox). A burst of watch events —
// e.g. our own status writes coming back — costs one reconcile, not one per event.
void AfterChange(Self* self, const CatalogActorDeps& /*deps*/) {
  if (self->state.reconcile_pending) return;
  self->state.reconcile_pending = true;
  self->send(self, reconcile_atom::value);
}

// Reconciles, publishes, answers scans, and makes sure a tick is due at the registry's next
// deadline.
void ReconcileNow(Self* self, const CatalogActorDeps& deps) {
  self->state.reconcile_pending = false;
  CatalogState& catalog = *self->state.catalog;
  CatalogChanges changes = catalog.Reconcile();
  deps.outputs->Publish(catalog, changes);
  std::vector<ScanInput> scans;
  scans.swap(self->state.applied_scans);
  for (ScanInput& scan : scans) deps.outputs->ScanApplied(catalog, scan);
  std::optional<absl::Time> deadline = catalog.NextDeadline();
  const absl::Time now = deps.clock->Now();
  if (!catalog.primed()) {
    // Until primed, look again at least every second: readiness never hangs on one deadline.
    const absl::Time recheck = now + kUnprimedRecheck;
    if (!deadline || recheck < *deadline) deadline = recheck;
  }
  if (deadline && *deadline < self->state.tick_at) {
    self->state.tick_at = *deadline;
    // Rounded up: a tick never arrives before its deadline.
    absl::Duration delay =
        std::max(absl::Ceil(*deadline - now, absl::Milliseconds(1)), absl::Milliseconds(10));
    self->delayed_send(self, std::chrono::milliseconds(absl::ToInt64Milliseconds(delay)),
                       tick_atom::value);
  }
}

void Apply(Self* self, const CatalogActorDeps& deps, CatalogInput& input) {
  CatalogState& catalog = *self->state.catalog;
  std::visit(
      [&](auto& in) {
        using T = std::decay_t<decltype(in)>;
        if constexpr (std::is_same_v<T, ScanInput>) {
          if (in.scan.ok()) {
            catalog.ApplyScan(*in.scan);
          } else {
            runtime::LogWarning("discovery failed",
                                {{"error", std::string(in.scan.status().message())}});
          }
          self->state.applied_scans.push_back(std::move(in));
          AfterChange(self, deps);
        } else if constexpr (std::is_same_v<T, ReplaceInput>) {
          catalog.ReplaceObjects(in.kind, in.objects);
          AfterChange(self, deps);
        } else if constexpr (std::is_same_v<T, EventInput>) {
          if (in.deleted) {
            catalog.DeleteObject(in.kind, in.object);
          } else {
            catalog.UpsertObject(in.kind, in.object);
          }
          AfterChange(self, deps);
        } else if constexpr (std::is_same_v<T, ProbeInput>) {
          catalog.ApplyProbe(in.provider, std::move(in.probe));
          AfterChange(self, deps);
        } else if constexpr (std::is_same_v<T, EncryptionSecretInput>) {
          catalog.ApplyEncryptionSecret(in.target, std::move(in.result));
          AfterChange(self, deps);
        } else if constexpr (std::is_same_v<T, SummaryInput>) {
          catalog.ApplySummary(in.summary);
          AfterChange(self, deps);
        } else if constexpr (std::is_same_v<T, WatchHealthInput>) {
          deps.outputs->WatchHealth(catalog, in.kind, in.status);
        } else if constexpr (std::is_same_v<T, StatusFailedInput>) {
          // No reconcile here: the next input retries, which paces retries of a failing write.
          catalog.ForgetEmittedStatus(in.key);
        }
      },
      input);
}

caf::behavior CatalogActor(Self* self, CatalogActorDeps deps) {
  self->state.catalog = std::make_unique<CatalogState>(*deps.clock, deps.options);
  return {
      [self, deps](std::shared_ptr<CatalogInput> input) { Apply(self, deps, *input); },
      [self, deps](tick_atom) {
        self->state.tick_at = absl::InfiniteFuture();
        self->state.catalog->Tick();
        AfterChange(self, deps);
      },
      [self, deps](reconcile_atom) { ReconcileNow(self, deps); },
  };
}

}  // namespace

caf::actor SpawnCatalogActor(caf::actor_system& system, CatalogActorDeps deps) {
  return system.spawn(CatalogActor, std::move(deps));
}

void ActorInbox::Post(CatalogInput input) {
  caf::anon_send(actor_, std::make_shared<CatalogInput>(std::move(input)));
}

void ActorInbox::Tick() { caf::anon_send(actor_, tick_atom::value); }

}  // namespace reverser::catalog
