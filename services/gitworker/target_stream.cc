#include "services/gitworker/target_stream.h"

#include <deque>

#include "absl/strings/str_cat.h"
#include "libs/runtime/log.h"

namespace reverser::gitworker {
namespace {

struct TargetStreamState {
  TargetStreamOptions options;
  SettingsPtr settings;
  std::deque<WorkItemPtr> queue;
  std::deque<std::pair<uint64_t, WorkItemPtr>> waiting;  // not yet accepted: buffer full
  size_t in_flight = 0;
  static inline const char* name = "gitworker.target";
};

using Self = caf::stateful_actor<TargetStreamState>;

// Appends an item, folding a queued (not yet handed over) event of the same object into it.
void Enqueue(Self* self, WorkItemPtr item) {
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

void Pump(Self* self);

void Taken(Self* self) {
  auto& state = self->state;
  if (state.in_flight > 0) --state.in_flight;
  Pump(self);  // first hand over what is queued, then let waiting messages in behind it
  while (!state.waiting.empty() && state.queue.size() < state.options.capacity) {
    auto [sequence, item] = std::move(state.waiting.front());
    state.waiting.pop_front();
    Enqueue(self, std::move(item));
    state.options.sink->Accepted(sequence);
  }
  Pump(self);
}

void Pump(Self* self) {
  auto& state = self->state;
  while (state.in_flight < state.options.max_in_flight && !state.queue.empty()) {
    WorkItemPtr item = std::move(state.queue.front());
    state.queue.pop_front();
    caf::actor branch = state.options.branch_for(*item->settings);
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

caf::behavior TargetStream(Self* self, TargetStreamOptions options) {
  self->state.options = std::move(options);
  return {
      [=](config_atom, const SettingsPtr& settings) { self->state.settings = settings; },
      [=](deliver_atom, uint64_t sequence, const WorkItemPtr& item) {
        auto& state = self->state;
        item->settings = state.settings;
        if (!state.waiting.empty() || state.queue.size() >= state.options.capacity) {
          state.waiting.emplace_back(sequence, item);
          return;
        }
        Enqueue(self, item);
        state.options.sink->Accepted(sequence);
        Pump(self);
      },
      [=](status_atom) {
        auto& state = self->state;
        return absl::StrCat("queued=", state.queue.size(), " waiting=", state.waiting.size(),
                            " in_flight=", state.in_flight);
      },
  };
}

}  // namespace

caf::actor SpawnTargetStream(caf::actor_system& system, TargetStreamOptions options) {
  return system.spawn(TargetStream, std::move(options));
}

}  // namespace reverser::gitworker
