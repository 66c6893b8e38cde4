#include "services/catalog/feeds.h"

namespace reverser::catalog {

int Feed::Subscribe(std::shared_ptr<FeedListener> listener) {
  absl::MutexLock lock(&mu_);
  int id = next_id_++;
  listeners_[id] = std::move(listener);
  return id;
}

void Feed::Unsubscribe(int id) {
  absl::MutexLock lock(&mu_);
  listeners_.erase(id);
}

size_t Feed::subscribers() const {
  absl::MutexLock lock(&mu_);
  return listeners_.size();
}

void Feed::WakeAll() {
  std::vector<std::shared_ptr<FeedListener>> listeners;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [id, l] : listeners_) listeners.push_back(l);
  }
  for (const auto& l : listeners) l->Wake();
}

void ClaimFeed::Publish(reverser::v1::ClaimSet claims) {
  {
    absl::MutexLock lock(&mu_);
    current_ = std::move(claims);
  }
  WakeAll();
}

std::optional<reverser::v1::ClaimSet> ClaimFeed::Next(std::optional<uint64_t> known) const {
  absl::MutexLock lock(&mu_);
  if (!current_ || (known && *known == current_->generation())) return std::nullopt;
  return current_;
}

std::optional<reverser::v1::ClaimSet> ClaimFeed::Current() const {
  absl::MutexLock lock(&mu_);
  return current_;
}

void TableFeed::Publish(reverser::v1::TableUpdate delta, reverser::v1::TableUpdate full) {
  {
    absl::MutexLock lock(&mu_);
    if (!deltas_.empty() && deltas_.back().generation() + 1 != delta.generation()) {
      deltas_.clear();  // a gap: only the full set is trustworthy
    }
    deltas_.push_back(std::move(delta));
    while (deltas_.size() > kDeltaHistory) deltas_.pop_front();
    full_ = std::move(full);
  }
  WakeAll();
}

std::optional<reverser::v1::TableUpdate> TableFeed::Next(std::optional<uint64_t> known) const {
  absl::MutexLock lock(&mu_);
  if (!full_) return std::nullopt;
  if (known && *known == full_->generation()) return std::nullopt;
  if (known && !deltas_.empty() && deltas_.front().generation() <= *known + 1 &&
      *known < full_->generation()) {
    const auto& delta = deltas_[*known + 1 - deltas_.front().generation()];
    if (!delta.full()) return delta;
  }
  return full_;
}

std::optional<reverser::v1::TableUpdate> TableFeed::Current() const {
  absl::MutexLock lock(&mu_);
  return full_;
}

void TypeFeed::Publish(std::shared_ptr<const TypeSnapshot> snapshot) {
  absl::MutexLock lock(&mu_);
  current_ = std::move(snapshot);
}

std::shared_ptr<const TypeSnapshot> TypeFeed::Current() const {
  absl::MutexLock lock(&mu_);
  return current_;
}

}  // namespace reverser::catalog
