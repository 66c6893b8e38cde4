#pragma once

// The minimal read interface over type records that consumers need (the Git writer asks
// "is the catalog ready, and what is this kind?"). The Registry implements it in the catalog;
// RecordIndex implements it anywhere else from a ListTypes answer.

#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "libs/core/types.h"
#include "libs/typeset/model.h"

namespace reverser::typeset {

class TypeLookup {
 public:
  virtual ~TypeLookup() = default;
  virtual bool Ready() const = 0;
  virtual std::optional<TypeRecord> ByGVK(const core::GroupVersionKind& gvk) const = 0;
  virtual std::optional<TypeRecord> ByGVR(const core::GroupVersionResource& gvr) const = 0;
};

// A read-only copy of the registry's records (e.g. from Catalog.ListTypes). Not thread-safe.
class RecordIndex final : public TypeLookup {
 public:
  // Replaces every record; the index is Ready() from then on.
  void Replace(std::vector<TypeRecord> records, uint64_t generation);

  bool Ready() const override { return ready_; }
  std::optional<TypeRecord> ByGVK(const core::GroupVersionKind& gvk) const override;
  std::optional<TypeRecord> ByGVR(const core::GroupVersionResource& gvr) const override;
  uint64_t generation() const { return generation_; }
  size_t size() const { return by_gvr_.size(); }

 private:
  bool ready_ = false;
  uint64_t generation_ = 0;
  std::map<core::GroupVersionResource, TypeRecord> by_gvr_;
  std::map<core::GroupVersionKind, core::GroupVersionResource> by_gvk_;
};

}  // namespace reverser::typeset
