#pragma once

// Where the gitworker learns how a GitTarget is written (remote, branch, path, credential and
// signing Secrets, templates, recipients): from the catalog, over the authenticated mesh, never
// from the data plane. A splicer's `target_config` on a delivery stream only declares that the
// stream carries that GitTarget; what the gitworker writes with is the catalog's resolution of
// the GitTarget and its GitProvider, kept here and pushed to every stream that carries it.
//
// `--target_config_source=delivery` (local development and the gitworker's own tests) trusts
// the delivered config instead; then no book exists.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "proto/reverser/v1/catalog.pb.h"

namespace reverser::gitworker {

// "namespace/name", the key of a GitTarget everywhere in the gitworker.
std::string TargetRefKey(const reverser::v1::GitTargetRef& target);

class TargetConfigBook {
 public:
  // The target's config, or null once the catalog no longer has the target.
  using Listener = std::function<void(const reverser::v1::GitTargetConfig*)>;

  // Applies one WatchTables update (a full one replaces every config).
  void Apply(const reverser::v1::TableUpdate& update);
  void Put(const reverser::v1::GitTargetConfig& config);
  void Remove(const std::string& key);
  std::optional<reverser::v1::GitTargetConfig> Get(const std::string& key) const;

  // Calls `listener` with the target's config now (when known) and on every change, until
  // Unsubscribe. Listeners run under the book's lock, on the caller's or the follower's thread:
  // they must only post (caf::anon_send), never call back into the book.
  uint64_t Subscribe(const std::string& key, Listener listener);
  void Unsubscribe(uint64_t id);

  size_t size() const;
  // The destination of every config, in target order (what the branch units are made of).
  std::vector<reverser::v1::GitDestination> Destinations() const;

 private:
  void PutLocked(const reverser::v1::GitTargetConfig& config) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RemoveLocked(const std::string& key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  std::map<std::string, reverser::v1::GitTargetConfig> configs_ ABSL_GUARDED_BY(mu_);
  struct Subscription {
    std::string key;
    Listener listener;
  };
  std::map<uint64_t, Subscription> subscriptions_ ABSL_GUARDED_BY(mu_);
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
};

}  // namespace reverser::gitworker
