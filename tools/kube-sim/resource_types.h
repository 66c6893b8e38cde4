#pragma once

// The resource types the simulator serves: the built-in table and types added by CRDs.

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "tools/kube-sim/api_error.h"

namespace reverser::kubesim {

class CrdSchema;

struct SubresourceType {
  std::string name;  // "status", "scale"
  // The kind the subresource speaks when it differs from the parent (scale: autoscaling/v1 Scale).
  std::string group;
  std::string version;
  std::string kind;
  std::vector<std::string> verbs;
};

struct ResourceType {
  std::string group;  // "" for core
  std::string version;
  std::string plural;
  std::string singular;
  std::string kind;
  bool namespaced = true;
  std::vector<std::string> verbs;  // sorted, as discovery lists them
  std::vector<std::string> short_names;
  std::vector<std::string> categories;
  std::vector<SubresourceType> subresources;
  // metadata.generation is kept and bumped when anything but metadata/status changes.
  bool tracks_generation = false;
  bool custom = false;  // defined by a CRD: merge patch only, unstructured
  // A review (TokenReview, SubjectAccessReview): create only, answered from the request and
  // never stored; other verbs on it get the router's 405 (reviews.cc).
  bool review = false;
  // For a CRD-defined scale subresource: JSON pointers into the object.
  std::string spec_replicas_path;
  std::string status_replicas_path;
  // A CRD version's structural schema: writes are pruned, defaulted and validated against it.
  std::shared_ptr<const CrdSchema> schema;
  Json openapi_schema;  // the same schema as written, published in /openapi/v3 (kubectl explain)

  std::string ApiVersion() const;  // "v1", "apps/v1"
  std::string Key() const;         // "apps/deployments": store key, version-free
  ErrorSubject Subject() const;
  const SubresourceType* FindSubresource(const std::string& name) const;
  bool HasStatus() const { return FindSubresource("status") != nullptr; }
  bool HasVerb(const std::string& verb) const;
};

// Thread-safe table of served types. Group order is discovery priority order.
class TypeRegistry {
 public:
  TypeRegistry();  // with the built-in types

  std::shared_ptr<const ResourceType> Find(const std::string& group, const std::string& version,
                                           const std::string& plural) const;
  std::shared_ptr<const ResourceType> FindByKind(const std::string& group,
                                                 const std::string& version,
                                                 const std::string& kind) const;
  // All types, grouped: core first, then named groups in priority order.
  std::vector<std::shared_ptr<const ResourceType>> All() const;
  // Named groups in priority order, each with its versions (preferred first).
  std::vector<std::pair<std::string, std::vector<std::string>>> Groups() const;
  bool HasGroupVersion(const std::string& group, const std::string& version) const;

  // CRD types replace any previous definition with the same group/plural.
  void AddCustom(std::vector<ResourceType> versions);
  void RemoveCustom(const std::string& group, const std::string& plural);
  // Bumped on every change, so discovery caches (ETags) can be recomputed.
  uint64_t generation() const;

 private:
  mutable std::mutex mu_;
  std::vector<std::shared_ptr<const ResourceType>> types_;
  std::vector<std::string> builtin_group_order_;
  uint64_t generation_ = 1;
};

// Derives the served types from a CustomResourceDefinition object (one per served version,
// storage/first version first). Returns an error text for malformed specs.
ApiOr<std::vector<ResourceType>> TypesFromCrd(const Json& crd);

}  // namespace reverser::kubesim
