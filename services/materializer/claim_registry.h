#pragma once

// The (type, scope) claims this materializer currently owns, shared between the supervisor
// (which replaces them) and the audit intake (which routes audit events by them). A reader
// holds the registry while it writes to the claims it matched, and Replace waits for readers:
// once Replace returns, nothing writes to a withdrawn claim any more, so its keys can be
// released without an audit write recreating them.

#include <mutex>
#include <set>
#include <shared_mutex>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "libs/core/types.h"

namespace reverser::materializer {

using ClaimKey = std::pair<core::GroupVersionResource, core::WatchScope>;

class ClaimRegistry {
 public:
  class Reader {
   public:
    // The claims an object of `gvr` in namespace `ns` ("" for cluster-scoped objects) belongs
    // to: the same group, version and resource, scoped to the whole cluster or to `ns`.
    std::vector<ClaimKey> Match(const core::GroupVersionResource& gvr, absl::string_view ns) const;
    // Like Match, but for any version of the group and resource (a write through another
    // version has a body in that version, which the claim's stream must not carry).
    std::vector<ClaimKey> MatchAnyVersion(const core::GroupVersionResource& gvr,
                                          absl::string_view ns) const;
    // Whether `claim` is of a sensitive type (its bodies are sealed in Redis).
    bool Sensitive(const ClaimKey& claim) const { return registry_.sensitive_.count(claim) > 0; }

   private:
    friend class ClaimRegistry;
    explicit Reader(const ClaimRegistry& registry)
        : registry_(registry), lock_(registry.mu_) {}
    const ClaimRegistry& registry_;
    std::shared_lock<std::shared_mutex> lock_;
  };

  Reader Read() const { return Reader(*this); }
  // `sensitive`: the claims among them whose bodies are sealed in Redis.
  void Replace(std::vector<ClaimKey> claims, std::set<ClaimKey> sensitive = {});

  // Audit intake: the audit log could not deliver a change of `claim` (no body, a scale write,
  // another version, an entry diverted for its order); its worker LISTs early instead of waiting
  // for the next periodic LIST.
  void RequestRelist(const ClaimKey& claim);
  // True (once) when a relist of `claim` was requested since the last call.
  bool TakeRelistRequest(const ClaimKey& claim);

 private:
  mutable std::shared_mutex mu_;
  std::vector<ClaimKey> claims_;
  std::set<ClaimKey> sensitive_;
  std::mutex relist_mu_;
  std::set<ClaimKey> relist_requests_;  // guarded by relist_mu_
};

}  // namespace reverser::materializer
