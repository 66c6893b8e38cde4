#include "services/materializer/claim_registry.h"

namespace reverser::materializer {

std::vector<ClaimKey> ClaimRegistry::Reader::Match(const core::GroupVersionResource& gvr,
                                                   absl::string_view ns) const {
  std::vector<ClaimKey> out;
  for (const ClaimKey& claim : registry_.claims_) {
    if (!(claim.first == gvr)) continue;
    if (claim.second.IsCluster() || claim.second.namespace_ == ns) out.push_back(claim);
  }
  return out;
}

void ClaimRegistry::Replace(std::vector<ClaimKey> claims) {
  std::unique_lock lock(mu_);
  claims_ = std::move(claims);
}

}  // namespace reverser::materializer
