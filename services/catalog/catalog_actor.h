#pragma once

// The catalog actor: the one owner of CatalogState. Blocking parts post CatalogInputs to it;
// after each input (and on registry deadline ticks it schedules itself) it reconciles and hands
// the changes to CatalogOutputs, which publishes them (feeds, status writes, probes, metrics).

#include <caf/all.hpp>
#include <memory>

#include "absl/status/status.h"
#include "libs/core/clock.h"
#include "services/catalog/catalog_state.h"
#include "services/catalog/inbox.h"

namespace reverser::catalog {

// Called on the actor's thread, in order.
class CatalogOutputs {
 public:
  virtual ~CatalogOutputs() = default;
  virtual void Publish(const CatalogState& state, const CatalogChanges& changes) = 0;
  // After a discovery pass was applied and published (answers Rescan callbacks).
  virtual void ScanApplied(const CatalogState& state, ScanInput& scan) = 0;
  virtual void WatchHealth(const CatalogState& state, ObjectKind kind,
                           const absl::Status& status) = 0;
};

struct CatalogActorDeps {
  const core::Clock* clock = nullptr;
  CatalogStateOptions options;
  CatalogOutputs* outputs = nullptr;  // outlives the actor
};

caf::actor SpawnCatalogActor(caf::actor_system& system, CatalogActorDeps deps);

// Posts inputs to the actor (thread-safe, never blocks).
class ActorInbox final : public CatalogInbox {
 public:
  explicit ActorInbox(caf::actor actor) : actor_(std::move(actor)) {}
  void Post(CatalogInput input) override;
  // Re-judges the registry's grace and settle deadlines now.
  void Tick();

 private:
  caf::actor actor_;
};

}  // namespace reverser::catalog
