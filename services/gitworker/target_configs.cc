#include "services/gitworker/target_configs.h"

#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "google/protobuf/util/message_differencer.h"

namespace reverser::gitworker {

std::string TargetRefKey(const reverser::v1::GitTargetRef& target) {
  return absl::StrCat(target.namespace_(), "/", target.name());
}

void TargetConfigBook::Apply(const reverser::v1::TableUpdate& update) {
  absl::MutexLock lock(&mu_);
  std::set<std::string> listed;
  for (const reverser::v1::WatchedTypeTable& table : update.upserted()) {
    if (!table.has_config()) continue;
    listed.insert(TargetRefKey(table.config().target()));
    PutLocked(table.config());
  }
  for (const reverser::v1::GitTargetRef& removed : update.removed()) {
    RemoveLocked(TargetRefKey(removed));
  }
  if (update.full()) {
    std::vector<std::string> gone;
    for (const auto& [key, config] : configs_) {
      if (!listed.count(key)) gone.push_back(key);
    }
    for (const std::string& key : gone) RemoveLocked(key);
  }
}

void TargetConfigBook::Put(const reverser::v1::GitTargetConfig& config) {
  absl::MutexLock lock(&mu_);
  PutLocked(config);
}

void TargetConfigBook::PutLocked(const reverser::v1::GitTargetConfig& config) {
  const std::string key = TargetRefKey(config.target());
  auto [it, inserted] = configs_.try_emplace(key, config);
  if (!inserted) {
    if (google::protobuf::util::MessageDifferencer::Equals(it->second, config)) return;
    it->second = config;
  }
  for (auto& [id, subscription] : subscriptions_) {
    if (subscription.key == key) subscription.listener(&it->second);
  }
}

void TargetConfigBook::Remove(const std::string& key) {
  absl::MutexLock lock(&mu_);
  RemoveLocked(key);
}

void TargetConfigBook::RemoveLocked(const std::string& key) {
  if (configs_.erase(key) == 0) return;
  for (auto& [id, subscription] : subscriptions_) {
    if (subscription.key == key) subscription.listener(nullptr);
  }
}

std::optional<reverser::v1::GitTargetConfig> TargetConfigBook::Get(const std::string& key) const {
  absl::MutexLock lock(&mu_);
  auto it = configs_.find(key);
  if (it == configs_.end()) return std::nullopt;
  return it->second;
}

uint64_t TargetConfigBook::Subscribe(const std::string& key, Listener listener) {
  absl::MutexLock lock(&mu_);
  const uint64_t id = next_id_++;
  if (auto it = configs_.find(key); it != configs_.end()) listener(&it->second);
  subscriptions_.emplace(id, Subscription{key, std::move(listener)});
  return id;
}

void TargetConfigBook::Unsubscribe(uint64_t id) {
  absl::MutexLock lock(&mu_);
  subscriptions_.erase(id);
}

std::vector<reverser::v1::GitDestination> TargetConfigBook::Destinations() const {
  absl::MutexLock lock(&mu_);
  std::vector<reverser::v1::GitDestination> out;
  out.reserve(configs_.size());
  for (const auto& [key, config] : configs_) out.push_back(config.destination());
  return out;
}

size_t TargetConfigBook::size() const {
  absl::MutexLock lock(&mu_);
  return configs_.size();
}

}  // namespace reverser::gitworker
