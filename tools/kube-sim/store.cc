#include "tools/kube-sim/store.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace reverser::kubesim {

StoredObject::StoredObject(Json v, std::string j) : value(std::move(v)), json(std::move(j)) {
  // Kept beside the tree so a namespaced watch filters events without walking it (each walk
  // is a few cache misses per event across a long backlog).
  auto meta = value.find("metadata");
  if (meta != value.end() && meta->is_object()) {
    auto ns = meta->find("namespace");
    if (ns != meta->end() && ns->is_string()) namespace_ = ns->get<std::string>();
  }
}

Store::Store(size_t history_limit) : history_limit_(std::max<size_t>(history_limit, 1)) {}

std::string Store::ObjectKey(const std::string& ns, const std::string& name) {
  return absl::StrCat(ns, "/", name);
}

int64_t Store::CurrentRv() const {
  std::lock_guard lock(mu_);
  return rv_;
}

int64_t Store::CompactedRv() const {
  std::lock_guard lock(mu_);
  return compacted_rv_;
}

std::optional<Json> Store::Get(const std::string& type_key, const std::string& ns,
                               const std::string& name) const {
  std::lock_guard lock(mu_);
  auto t = objects_.find(type_key);
  if (t == objects_.end()) return std::nullopt;
  auto o = t->second.find(ObjectKey(ns, name));
  if (o == t->second.end()) return std::nullopt;
  return o->second->value;
}

ApiOr<Store::StoredSnapshot> Store::ListLocked(const std::string& type_key, const std::string& ns,
                                               std::optional<int64_t> at_rv) const {
  static const ObjectMap kNone;
  auto t = objects_.find(type_key);
  const ObjectMap& current = t == objects_.end() ? kNone : t->second;
  std::string prefix = ns.empty() ? "" : absl::StrCat(ns, "/");
  StoredSnapshot snap;
  snap.rv = rv_;
  if (!at_rv || *at_rv >= rv_) {
    // The current state: no copy of the map, just the namespace's range of it.
    for (auto it = current.lower_bound(prefix);
         it != current.end() && absl::StartsWith(it->first, prefix); ++it) {
      snap.items.push_back(it->second);
    }
    return snap;
  }
  if (*at_rv < compacted_rv_) {
    return Gone("The resourceVersion for the provided list is too old.");
  }
  // Roll the current state back through the history, newest first.
  ObjectMap state = current;
  for (auto it = history_.rbegin(); it != history_.rend() && it->rv > *at_rv; ++it) {
    if (it->type_key != type_key) continue;
    const Json& meta = it->object->value["metadata"];
    std::string key = ObjectKey(meta.value("namespace", ""), meta.value("name", ""));
    if (it->prev) {
      state[key] = it->prev;
    } else {
      state.erase(key);
    }
  }
  snap.rv = *at_rv;
  for (auto it = state.lower_bound(prefix);
       it != state.end() && absl::StartsWith(it->first, prefix); ++it) {
    snap.items.push_back(it->second);
  }
  return snap;
}

ApiOr<Store::Snapshot> Store::List(const std::string& type_key, const std::string& ns,
                                   std::optional<int64_t> at_rv) const {
  std::lock_guard lock(mu_);
  ApiOr<StoredSnapshot> stored = ListLocked(type_key, ns, at_rv);
  if (!stored.ok()) return stored.error();
  Snapshot snap;
  snap.rv = stored->rv;
  snap.items.reserve(stored->items.size());
  for (const auto& o : stored->items) snap.items.push_back(o->value);
  return snap;
}

ApiOr<Store::StoredSnapshot> Store::ListStored(const std::string& type_key, const std::string& ns,
                                               std::optional<int64_t> at_rv) const {
  std::lock_guard lock(mu_);
  return ListLocked(type_key, ns, at_rv);
}

ApiOr<WriteResult> Store::Write(const std::string& type_key, const std::string& ns,
                                const std::string& name, const Mutator& mutator, bool dry_run) {
  std::unique_lock lock(mu_);
  auto& objects = objects_[type_key];
  std::string key = ObjectKey(ns, name);
  auto existing = objects.find(key);
  std::shared_ptr<const StoredObject> current =
      existing == objects.end() ? nullptr : existing->second;
  ApiOr<WriteDecision> decision = mutator(current ? &current->value : nullptr);
  if (!decision.ok()) return decision.error();
  WriteResult result;
  // Rendered here, once per write, rather than once per watcher per event.
  auto store = [](const Json& object) {
    return std::make_shared<const StoredObject>(object, object.dump());
  };
  switch (decision->kind) {
    case WriteDecision::Kind::kNoChange:
      result.object = current ? current->value : decision->object;
      return result;
    case WriteDecision::Kind::kPut: {
      result.object = std::move(decision->object);
      result.event = current ? "MODIFIED" : "ADDED";
      if (dry_run) return result;
      result.object["metadata"]["resourceVersion"] = std::to_string(++rv_);
      auto stored = store(result.object);
      objects[key] = stored;
      RecordLocked({rv_, type_key, result.event, std::move(stored), std::move(current)});
      break;
    }
    case WriteDecision::Kind::kDelete: {
      result.object = std::move(decision->object);
      result.event = "DELETED";
      if (!current) return result;
      if (dry_run) return result;
      // The DELETED event carries the deletion's own new resourceVersion.
      result.object["metadata"]["resourceVersion"] = std::to_string(++rv_);
      objects.erase(key);
      RecordLocked({rv_, type_key, "DELETED", store(result.object), std::move(current)});
      break;
    }
  }
  lock.unlock();
  cv_.notify_all();
  return result;
}

void Store::RecordLocked(StoredEvent event) {
  history_.push_back(std::move(event));
  while (history_.size() > history_limit_) {
    compacted_rv_ = history_.front().rv;
    history_.pop_front();
  }
}

Store::WaitResult Store::WaitForEvents(const std::string& type_key, int64_t after_rv,
                                       absl::Time deadline, uint64_t epoch) const {
  std::unique_lock lock(mu_);
  WaitResult result;
  while (true) {
    if (shutdown_ || epoch_ != epoch) {
      result.interrupted = true;
      break;
    }
    if (after_rv < compacted_rv_) {
      result.expired = true;
      break;
    }
    if (rv_ > after_rv) {
      // History is in RV order: find the first event after after_rv.
      auto it = std::upper_bound(history_.begin(), history_.end(), after_rv,
                                 [](int64_t rv, const StoredEvent& e) { return rv < e.rv; });
      for (; it != history_.end(); ++it) {
        if (it->type_key == type_key) result.events.push_back(*it);
      }
      if (!result.events.empty()) break;
      after_rv = rv_;  // other types moved the counter; nothing for us yet
    }
    absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) break;
    cv_.wait_for(lock, absl::ToChronoMilliseconds(std::min(left, absl::Seconds(1))));
  }
  result.current_rv = rv_;
  return result;
}

bool Store::WaitForRv(int64_t rv, absl::Time deadline) const {
  std::unique_lock lock(mu_);
  while (rv_ < rv && !shutdown_) {
    absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) return false;
    cv_.wait_for(lock, absl::ToChronoMilliseconds(left));
  }
  return rv_ >= rv;
}

void Store::Compact() {
  {
    std::lock_guard lock(mu_);
    compacted_rv_ = rv_;
    history_.clear();
  }
  cv_.notify_all();
}

void Store::DropWatches() {
  {
    std::lock_guard lock(mu_);
    ++epoch_;
  }
  cv_.notify_all();
}

uint64_t Store::epoch() const {
  std::lock_guard lock(mu_);
  return epoch_;
}

void Store::Shutdown() {
  {
    std::lock_guard lock(mu_);
    shutdown_ = true;
  }
  cv_.notify_all();
}

bool Store::shutting_down() const {
  std::lock_guard lock(mu_);
  return shutdown_;
}

}  // namespace reverser::kubesim
