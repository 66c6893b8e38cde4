#include "libs/typeset/lookup.h"

namespace reverser::typeset {

void RecordIndex::Replace(std::vector<TypeRecord> records, uint64_t generation) {
  by_gvr_.clear();
  by_gvk_.clear();
  for (TypeRecord& r : records) {
    // First record wins for a kind, as in Registry::ByGVK (records arrive sorted by GVR).
    if (!r.gvk.kind.empty()) by_gvk_.emplace(r.gvk, r.gvr);
    core::GroupVersionResource gvr = r.gvr;
    by_gvr_.insert_or_assign(std::move(gvr), std::move(r));
  }
  generation_ = generation;
  ready_ = true;
}

std::optional<TypeRecord> RecordIndex::ByGVK(const core::GroupVersionKind& gvk) const {
  auto it = by_gvk_.find(gvk);
  if (it == by_gvk_.end()) return std::nullopt;
  return ByGVR(it->second);
}

std::optional<TypeRecord> RecordIndex::ByGVR(const core::GroupVersionResource& gvr) const {
  auto it = by_gvr_.find(gvr);
  if (it == by_gvr_.end()) return std::nullopt;
  return it->second;
}

}  // namespace reverser::typeset
