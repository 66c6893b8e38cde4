#pragma once

// The typeset Registry: the judgement over discovery. "Additions fast, removals slow":
//  - a type listed by a scan gets fresh, trusted facts;
//  - a type whose group/version discovery FAILED keeps its last-known facts as `retained`
//    (discovery-degraded) for as long as the failure lasts;
//  - a live type missing from a scanned group/version (or from a complete scan) is `retained`
//    (not-served) for kRemovalGrace, then dropped (TypeRemoved, absence-expired); a refused
//    type that disappears is dropped at once;
//  - an incomplete scan carries unscanned group/versions forward unjudged, and never
//    resurrects a record that is mid-grace;
//  - a type is activated only after kSettleWindow of continuous followability, so flaps
//    inside the window coalesce into one later activation; a recovery starts a new window.
// Lifecycle events concern live types only: a type refused from its first sight is silent.
// Time comes from an injected clock; call Tick() at NextDeadline() (or on any timer) so grace
// and settle deadlines are judged without a new scan.
//
// Not thread-safe: owned by one actor. Observers run synchronously, after the state changed.

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <vector>

#include "absl/time/time.h"
#include "libs/core/clock.h"
#include "libs/core/types.h"
#include "libs/typeset/catalog.h"
#include "libs/typeset/lookup.h"
#include "libs/typeset/model.h"
#include "libs/typeset/policy.h"

namespace reverser::typeset {

enum class LifecycleEventType {
  kActivated,  // followable for the settle window (once per followable streak)
  kWobbling,   // followable -> retained
  kRecovered,  // retained -> followable (a new streak: kActivated follows after the window)
  kRemoved,    // live -> refused because the removal grace expired (absence-expired)
  kRefused,    // live (followable or retained) -> refused for a permanent reason
};

absl::string_view LifecycleEventName(LifecycleEventType type);  // "activated", ...

struct LifecycleEvent {
  LifecycleEventType type;
  core::GroupVersionKind gvk;
  core::GroupVersionResource gvr;
  Verdict from;
  Verdict to;
  std::string reason;   // reason code of the deciding check; empty for followable
  uint64_t generation;  // registry revision after the change
  absl::Time at;
};

struct RegistryOptions {
  WatchPolicy watch_policy = WatchPolicy::Default();
  SensitivePolicy sensitive_policy;
  // False refuses sensitive types (sensitive-unsupported), e.g. when no encryption exists.
  bool sensitive_supported = true;
};

class Registry final : public TypeLookup {
 public:
  static constexpr absl::Duration kRemovalGrace = absl::Seconds(60);
  static constexpr absl::Duration kSettleWindow = absl::Seconds(5);

  using Observer = std::function<void(const LifecycleEvent&)>;

  // `clock` must outlive the registry.
  explicit Registry(const core::Clock& clock, RegistryOptions options = {});

  // Applies one catalog snapshot (see the header comment for the rules).
  void UpdateFromScan(const CatalogSnapshot& snapshot);
  // Re-judges grace and settle deadlines at the clock's current time.
  void Tick();
  // The earliest time a Tick() would change something, if any.
  std::optional<absl::Time> NextDeadline() const;

  // True once a scan has been applied; before that every lookup is `unknown`.
  bool Ready() const override { return ready_; }
  // Catalog generation of the last applied snapshot (moves when normalized facts change).
  uint64_t generation() const { return scan_generation_; }
  // Decision counter: moves whenever any record changes (facts, verdict, activation). Rule
  // resolution keys on this.
  uint64_t revision() const { return revision_; }

  // Full records. Before Ready(), an unknown type yields an `unknown` record.
  std::optional<TypeRecord> ByGVR(const core::GroupVersionResource& gvr) const override;
  std::optional<TypeRecord> ByGVK(const core::GroupVersionKind& gvk) const override;
  // Every served version of a group/resource, sorted by version.
  std::vector<TypeRecord> ByGroupResource(absl::string_view group,
                                          absl::string_view resource) const;
  // Followable or retained records, sorted by GVR.
  std::vector<TypeRecord> Followable() const;
  std::vector<TypeRecord> All() const;

  // Observers get every lifecycle event from then on. Returns an id for Unsubscribe.
  int Subscribe(Observer observer);
  void Unsubscribe(int id);

 private:
  struct Entry {
    CatalogEntry facts;
    bool present = true;
    bool trusted = true;
    bool expired = false;
    std::optional<absl::Time> absent_since;
    std::optional<absl::Time> followable_since;  // pending activation
    Verdict activation_from = Verdict::kUnknown;
    TypeRecord record;
    bool judged = false;
  };

  // `dropped`: records were already removed in this update (the revision must move).
  void JudgeAll(absl::Time now, std::vector<LifecycleEvent>& events, bool dropped);
  void Judge(Entry& entry, absl::Time now, std::vector<LifecycleEvent>& events);
  void Publish(const std::vector<LifecycleEvent>& events);

  const core::Clock& clock_;
  RegistryOptions options_;
  bool ready_ = false;
  uint64_t scan_generation_ = 0;
  uint64_t revision_ = 0;
  std::map<core::GroupVersionResource, Entry> entries_;
  std::map<int, Observer> observers_;
  int next_observer_id_ = 1;
};

}  // namespace reverser::typeset
