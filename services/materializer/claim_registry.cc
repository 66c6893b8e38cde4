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

std::vector<ClaimKey> ClaimRegistry::Reader::MatchAnyVersion(const core::GroupVersionResource& gvr,
                                                            absl::string_view ns) const {
  std::vector<ClaimKey> out;
  for (const ClaimKey& claim : registry_.claims_) {
    if (claim.first.group != gvr.group || claim.first.resource != gvr.resource) continue;
    if (claim.second.IsCluster() || claim.second.namespace_ == ns) out.push_back(claim);
  }
  return out;
}

void ClaimRegistry::RequestRelist(const ClaimKey& claim) {
  std::lock_guard lock(relist_mu_);
  relist_requests_.insert(claim);
}

bool ClaimRegistry::TakeRelistRequest(const ClaimKey& claim) {
  std::lock_guard lock(relist_mu_);
  return relist_requests_.erase(claim) > 0;
}

void ClaimRegistry::Replace(std::vector<ClaimKey> claims, std::set<ClaimKey> sensitive) {
  std::unique_lock lock(mu_);
  claims_ = std::move(claims);
  sensitive_ = std::move(sensitive);
}

}  // namespace reverser::materializer
