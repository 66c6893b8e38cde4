#pragma once

// The (type, scope) claims this materializer currently owns, shared between the supervisor
// (which replaces them) and the audit intake (which routes audit events by them). A reader
// holds the registry while it writes to the claims it matched, and Replace waits for readers:
// once Replace returns, nothing writes to a withdrawn claim any more, so its keys can be
// released without an audit write recreating them.

#include <mutex>
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

   private:
    friend class ClaimRegistry;
    explicit Reader(const ClaimRegistry& registry)
        : registry_(registry), lock_(registry.mu_) {}
    const ClaimRegistry& registry_;
    std::shared_lock<std::shared_mutex> lock_;
  };

  Reader Read() const { return Reader(*this); }
  void Replace(std::vector<ClaimKey> claims);

 private:
  mutable std::shared_mutex mu_;
  std::vector<ClaimKey> claims_;
};

}  // namespace reverser::materializer
