#include "services/gitworker/target_stream.h"

#include <deque>

#include "absl/strings/str_cat.h"
#include "google/protobuf/util/message_differencer.h"
#include "libs/runtime/log.h"

namespace reverser::gitworker {
namespace {

struct TargetStreamState {
  TargetStreamOptions options;
  SettingsPtr settings;
  TargetConfigPtr declared;  // what the splicer delivers with (catalog as the source)
  TargetConfigPtr catalog;   // the catalog's config of the target
  std::deque<WorkItemPtr> queue;
  std::deque<std::pair<uint64_t, WorkItemPtr>> waiting;  // not yet accepted: buffer full
  size_t in_flight = 0;
  // The NotOwner last told (unit, owner, address), until the branch is accepted here again.
  std::optional<std::string> told_not_owner;
  static inline const char* name = "gitworker.target";
};

using Self = TargetStreamActor::stateful_pointer<TargetStreamState>;

// Appends an item, folding a queued (not yet handed over) event of the same object into it.
void Enqueue(Self self, WorkItemPtr item) {
  auto& state = self->state;
  if (item->kind == WorkItem::Kind::kEvent) {
    const std::string key = item->ObjectKey();
    const std::string claim = ClaimKey(item->event.claim());
    for (auto it = state.queue.rbegin(); it != state.queue.rend(); ++it) {
      const WorkItem& queued = **it;
      // Never fold across a resync of the same claim: it orders what came before it.
      if (queued.kind == WorkItem::Kind::kResync && ClaimKey(queued.resync.claim()) == claim) {
        break;
      }
      if (queued.kind != WorkItem::Kind::kEvent || queued.ObjectKey() != key) continue;
      std::vector<Coverage> covers = std::move((*it)->covers);
      for (Coverage& cover : item->covers) covers.push_back(std::move(cover));
      item->covers = std::move(covers);
      state.queue.erase(std::next(it).base());
      state.options.metrics
          ->GetCounter("reverser_gitworker_events_coalesced_total",
                       "Queued events replaced by a newer event of the same object.")
          .Increment();
      break;
    }
  }
  state.queue.push_back(std::move(item));
}

void Pump(Self self);

// Whether the target's items are taken here (always without membership or before settings).
bool Accepting(Self self) {
  auto& state = self->state;
  if (state.options.ownership == nullptr || !state.settings) return true;
  return state.options.ownership->Accepts(UnitOf(state.settings->destination));
}

void CountNotOwner(Self self, size_t messages) {
  if (messages == 0) return;
  self->state.options.metrics
      ->GetCounter("reverser_gitworker_not_owner_total",
                   "Delivery messages (resyncs, events) not applied because this replica does "
                   "not own their target's branch (answered not_owner).")
      .Increment(static_cast<double>(messages));
}

// The target's branch is not accepted here: what it buffered and what waits is dropped (waiting
// messages accepted now, so the stream's credit moves on), and the stream is told NotOwner once
// per owner.
void RefuseNotOwned(Self self) {
  auto& state = self->state;
  size_t dropped = state.queue.size();
  state.queue.clear();
  for (auto& [sequence, item] : state.waiting) {
    state.options.sink->Accepted(sequence);
    ++dropped;
  }
  state.waiting.clear();
  CountNotOwner(self, dropped);
  const std::string unit = UnitOf(state.settings->destination);
  reverser::v1::NotOwner not_owner =
      state.options.ownership->NotOwnerFor(state.settings->target, unit);
  std::string told =
      absl::StrCat(unit, "|", not_owner.owner_replica(), "|", not_owner.owner_address());
  if (state.told_not_owner == told) return;
  state.told_not_owner = std::move(told);
  runtime::LogInfo("not the owner of a target's branch; told the stream",
                   {{"target", state.settings->TargetKey()},
                    {"branch_unit", unit},
                    {"owner", not_owner.owner_replica()},
                    {"dropped", dropped}});
  state.options.sink->NotOwner(not_owner);
}

// Lets waiting messages into the buffer as far as it has room (and the target has settings).
void Admit(Self self) {
  auto& state = self->state;
  if (!Accepting(self)) return RefuseNotOwned(self);
  while (state.settings && !state.waiting.empty() && state.queue.size() < state.options.capacity) {
    auto [sequence, item] = std::move(state.waiting.front());
    state.waiting.pop_front();
    item->settings = state.settings;
    Enqueue(self, std::move(item));
    state.options.sink->Accepted(sequence);
  }
}

void Taken(Self self) {
  auto& state = self->state;
  if (state.in_flight > 0) --state.in_flight;
  Pump(self);  // first hand over what is queued, then let waiting messages in behind it
  Admit(self);
  Pump(self);
}

void Pump(Self self) {
  auto& state = self->state;
  if (!Accepting(self)) return RefuseNotOwned(self);
  while (state.in_flight < state.options.max_in_flight && !state.queue.empty()) {
    WorkItemPtr item = std::move(state.queue.front());
    state.queue.pop_front();
    BranchItemActor branch = state.options.branch_for(*item->settings);
    ++state.in_flight;
    self->request(branch, caf::infinite, item_atom::value, std::move(item))
        .then([self](bool) { Taken(self); },
              [self](caf::error& err) {
                runtime::LogWarning("branch actor did not take an item",
                                    {{"error", self->system().render(err)}});
                Taken(self);
              });
  }
}

// With the catalog as the source: settings from its config while the splicer's equals it.
void Reevaluate(Self self) {
  auto& state = self->state;
  const bool agreed =
      state.declared && state.catalog &&
      google::protobuf::util::MessageDifferencer::Equals(*state.declared, *state.catalog);
  if (!agreed) {
    state.settings = nullptr;  // later items wait for the two to agree
    return;
  }
  if (state.settings) return;
  auto settings = SettingsFromConfig(*state.catalog, state.options.limits);
  if (!settings.ok()) {
    state.options.metrics
        ->GetCounter("reverser_gitworker_target_configs_unusable_total",
                     "Catalog configs of a GitTarget the gitworker cannot write with (its items "
                     "wait until the catalog publishes a usable one).")
        .Increment();
    runtime::LogWarning("catalog config of a GitTarget is unusable",
                        {{"target", absl::StrCat(state.catalog->target().namespace_(), "/",
                                                 state.catalog->target().name())},
                         {"error", std::string(settings.status().message())}});
    return;
  }
  state.settings = *settings;
  Admit(self);
  Pump(self);
}

TargetStreamActor::behavior_type TargetStream(Self self, TargetStreamOptions options) {
  self->state.options = std::move(options);
  return {
      [=](config_atom, const SettingsPtr& settings) {
        self->state.settings = settings;
        Admit(self);
        Pump(self);
      },
      [=](declare_atom, const TargetConfigPtr& config) {
        if (self->state.declared && config &&
            !google::protobuf::util::MessageDifferencer::Equals(*self->state.declared, *config)) {
          self->state.settings = nullptr;
        }
        self->state.declared = config;
        Reevaluate(self);
      },
      [=](catalog_atom, const TargetConfigPtr& config) {
        if (self->state.catalog && config &&
            !google::protobuf::util::MessageDifferencer::Equals(*self->state.catalog, *config)) {
          self->state.settings = nullptr;
        }
        self->state.catalog = config;
        Reevaluate(self);
      },
      [=](deliver_atom, uint64_t sequence, const WorkItemPtr& item) {
        auto& state = self->state;
        item->settings = state.settings;
        if (!Accepting(self)) {
          state.options.sink->Accepted(sequence);
          CountNotOwner(self, 1);
          RefuseNotOwned(self);
          return;
        }
        // Without settings yet (the catalog has not published the target), items wait
        // unaccepted: the splicer runs out of credit, nothing is dropped.
        if (!state.settings || !state.waiting.empty() ||
            state.queue.size() >= state.options.capacity) {
          state.waiting.emplace_back(sequence, item);
          return;
        }
        Enqueue(self, item);
        state.options.sink->Accepted(sequence);
        Pump(self);
      },
      [=](ownership_atom) {
        if (!self->state.settings) return;
        if (Accepting(self)) {
          self->state.told_not_owner.reset();
          Admit(self);
          Pump(self);
        } else {
          RefuseNotOwned(self);
        }
      },
      [=](status_atom) {
        auto& state = self->state;
        return TargetStreamStatus{state.queue.size(), state.waiting.size(), state.in_flight};
      },
  };
}

}  // namespace

std::string TargetStreamStatus::ToString() const {
  return absl::StrCat("queued=", queued, " waiting=", waiting, " in_flight=", in_flight);
}

TargetStreamActor SpawnTargetStream(caf::actor_system& system, TargetStreamOptions options) {
  return system.spawn(TargetStream, std::move(options));
}

}  // namespace reverser::gitworker
