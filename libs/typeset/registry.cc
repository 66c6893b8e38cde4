#include "libs/typeset/registry.h"

#include <set>
#include <utility>

namespace reverser::typeset {
namespace {

bool SameDecision(const TypeRecord& a, const TypeRecord& b) {
  return a.gvk == b.gvk && a.gvr == b.gvr && a.scope == b.scope && a.origin == b.origin &&
         a.preferred == b.preferred && a.verbs == b.verbs && a.subresources == b.subresources &&
         a.sensitive == b.sensitive && a.trusted == b.trusted &&
         a.followability == b.followability && a.activated == b.activated &&
         a.settled == b.settled && a.absent_since == b.absent_since;
}

// The reason code that decided a verdict: the first permanent failure for refused, the first
// failure otherwise.
std::string DecidingReason(const Followability& f) {
  if (f.verdict == Verdict::kRefused) {
    for (const FollowCheck& c : f.checks) {
      if (!c.passed && c.reason != reason::kNotServed && c.reason != reason::kDiscoveryDegraded) {
        return c.reason;
      }
    }
  }
  const FollowCheck* first = f.FirstFailure();
  return first ? first->reason : "";
}

}  // namespace

absl::string_view LifecycleEventName(LifecycleEventType type) {
  switch (type) {
    case LifecycleEventType::kActivated:
      return "activated";
    case LifecycleEventType::kWobbling:
      return "wobbling";
    case LifecycleEventType::kRecovered:
      return "recovered";
    case LifecycleEventType::kRemoved:
      return "removed";
    case LifecycleEventType::kRefused:
      return "refused";
  }
  return "unknown";
}

Registry::Registry(const core::Clock& clock, RegistryOptions options)
    : clock_(clock), options_(std::move(options)) {}

void Registry::UpdateFromScan(const CatalogSnapshot& snapshot) {
  absl::Time now = clock_.Now();
  std::set<GroupVersion> scanned(snapshot.scanned.begin(), snapshot.scanned.end());
  std::set<GroupVersion> failed(snapshot.degraded.begin(), snapshot.degraded.end());
  std::set<core::GroupVersionResource> listed;

  for (const CatalogEntry& facts : snapshot.entries) {
    listed.insert(facts.gvr);
    Entry& e = entries_[facts.gvr];
    e.facts = facts;
    e.present = true;
    e.trusted = true;
    e.expired = false;
    e.absent_since.reset();
  }
  bool dropped = false;
  for (auto it = entries_.begin(); it != entries_.end();) {
    auto& [gvr, e] = *it;
    if (listed.count(gvr)) {
      ++it;
      continue;
    }
    GroupVersion gv{gvr.group, gvr.version};
    const bool live = e.record.Followable();
    if (failed.count(gv)) {
      // Retain-on-error: keep the last-known facts, untrusted, for as long as it fails. A
      // record already counting down its grace keeps counting.
      e.trusted = false;
    } else if (scanned.count(gv) || snapshot.complete) {
      if (!live) {
        // Never live (refused): nothing to hold, it simply goes with its observation.
        it = entries_.erase(it);
        dropped = true;
        continue;
      }
      e.present = false;
      e.trusted = true;
      if (!e.absent_since) e.absent_since = now;
    }
    // Otherwise an incomplete scan did not look: carry forward unchanged.
    ++it;
  }
  ready_ = true;
  scan_generation_ = snapshot.generation;
  std::vector<LifecycleEvent> events;
  JudgeAll(now, events, dropped);
  Publish(events);
}

void Registry::Tick() {
  if (!ready_) return;
  std::vector<LifecycleEvent> events;
  JudgeAll(clock_.Now(), events, /*dropped=*/false);
  Publish(events);
}

std::optional<absl::Time> Registry::NextDeadline() const {
  std::optional<absl::Time> next;
  auto consider = [&next](absl::Time t) {
    if (!next || t < *next) next = t;
  };
  for (const auto& [gvr, e] : entries_) {
    if (!e.expired && e.absent_since) consider(*e.absent_since + kRemovalGrace);
    if (e.followable_since) consider(*e.followable_since + kSettleWindow);
  }
  return next;
}

void Registry::JudgeAll(absl::Time now, std::vector<LifecycleEvent>& events, bool dropped) {
  std::vector<Entry*> changed;
  size_t first_event = events.size();
  for (auto it = entries_.begin(); it != entries_.end();) {
    Entry& e = it->second;
    TypeRecord before = e.record;
    bool was_judged = e.judged;
    Judge(e, now, events);
    if (e.expired) {
      // The grace elapsed: the absence is trusted and the record leaves the registry.
      it = entries_.erase(it);
      dropped = true;
      continue;
    }
    if (!was_judged || !SameDecision(before, e.record)) changed.push_back(&e);
    ++it;
  }
  if (changed.empty() && !dropped) return;
  ++revision_;
  for (Entry* e : changed) e->record.generation = revision_;
  for (size_t i = first_event; i < events.size(); ++i) events[i].generation = revision_;
}

void Registry::Judge(Entry& e, absl::Time now, std::vector<LifecycleEvent>& events) {
  const Verdict old = e.judged ? e.record.verdict() : Verdict::kUnknown;
  if (!e.expired && e.absent_since && now - *e.absent_since >= kRemovalGrace) e.expired = true;

  const CatalogEntry& f = e.facts;
  FunnelInput in;
  in.facts = &f;
  in.present = e.present;
  in.trusted = e.trusted;
  in.absence_expired = e.expired;
  in.excluded_by_policy = options_.watch_policy.Excluded(f.gvr.group, f.gvr.resource);
  in.sensitive = options_.sensitive_policy.IsSensitive(f.gvr.group, f.gvr.resource);
  in.sensitive_supported = options_.sensitive_supported;

  TypeRecord next;
  next.gvk = f.gvk;
  next.gvr = f.gvr;
  next.scope = f.scope;
  next.origin = f.origin;
  next.preferred = f.preferred;
  next.verbs = f.verbs;
  next.subresources = f.subresources;
  next.sensitive = in.sensitive;
  next.trusted = e.trusted;
  next.followability = Evaluate(in);
  next.absent_since = e.absent_since;
  next.activated = e.record.activated;
  next.generation = e.record.generation;
  next.settled = e.record.settled;

  const Verdict to = next.verdict();
  const bool was_live = old == Verdict::kFollowable || old == Verdict::kRetained;
  auto emit = [&](LifecycleEventType type, Verdict from) {
    events.push_back(
        {type, next.gvk, next.gvr, from, to, DecidingReason(next.followability), 0, now});
  };
  switch (to) {
    case Verdict::kFollowable:
      if (old != Verdict::kFollowable) {
        // A new followable streak.
        if (old == Verdict::kRetained) emit(LifecycleEventType::kRecovered, old);
        e.followable_since = now;
        e.activation_from = old;
        next.activated = false;
      }
      if (!next.activated && e.followable_since && now - *e.followable_since >= kSettleWindow) {
        next.activated = true;
        next.settled = true;
        e.followable_since.reset();
        emit(LifecycleEventType::kActivated, e.activation_from);
      }
      break;
    case Verdict::kRetained:
      if (old == Verdict::kFollowable) emit(LifecycleEventType::kWobbling, old);
      e.followable_since.reset();
      next.activated = false;
      break;
    case Verdict::kRefused:
    case Verdict::kUnknown:
      if (was_live) {
        emit(e.expired ? LifecycleEventType::kRemoved : LifecycleEventType::kRefused, old);
      }
      e.followable_since.reset();
      next.activated = false;
      next.settled = false;
      break;
  }
  e.record = std::move(next);
  e.judged = true;
}

void Registry::Publish(const std::vector<LifecycleEvent>& events) {
  if (events.empty()) return;
  // Copy: an observer may unsubscribe while being called.
  std::vector<Observer> observers;
  for (const auto& [id, observer] : observers_) observers.push_back(observer);
  for (const LifecycleEvent& event : events) {
    for (const Observer& observer : observers) observer(event);
  }
}

std::optional<TypeRecord> Registry::ByGVR(const core::GroupVersionResource& gvr) const {
  auto it = entries_.find(gvr);
  if (it != entries_.end()) return it->second.record;
  if (ready_) return std::nullopt;
  TypeRecord unknown;
  unknown.gvr = gvr;
  unknown.followability = CatalogUnavailable();
  return unknown;
}

std::optional<TypeRecord> Registry::ByGVK(const core::GroupVersionKind& gvk) const {
  for (const auto& [gvr, e] : entries_) {
    if (e.record.gvk == gvk && !e.facts.subresource_only) return e.record;
  }
  if (ready_) return std::nullopt;
  TypeRecord unknown;
  unknown.gvk = gvk;
  unknown.followability = CatalogUnavailable();
  return unknown;
}

std::vector<TypeRecord> Registry::ByGroupResource(absl::string_view group,
                                                  absl::string_view resource) const {
  std::vector<TypeRecord> out;
  for (const auto& [gvr, e] : entries_) {
    if (gvr.group == group && gvr.resource == resource) out.push_back(e.record);
  }
  return out;
}

std::vector<TypeRecord> Registry::Followable() const {
  std::vector<TypeRecord> out;
  for (const auto& [gvr, e] : entries_) {
    if (e.record.Followable()) out.push_back(e.record);
  }
  return out;
}

std::vector<TypeRecord> Registry::All() const {
  std::vector<TypeRecord> out;
  out.reserve(entries_.size());
  for (const auto& [gvr, e] : entries_) out.push_back(e.record);
  return out;
}

int Registry::Subscribe(Observer observer) {
  int id = next_observer_id_++;
  observers_.emplace(id, std::move(observer));
  return id;
}

void Registry::Unsubscribe(int id) { observers_.erase(id); }

}  // namespace reverser::typeset
