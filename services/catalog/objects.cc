#include "services/catalog/objects.h"

#include "absl/strings/str_cat.h"

namespace reverser::catalog {

absl::string_view KindName(ObjectKind kind) {
  switch (kind) {
    case ObjectKind::kGitProvider:
      return "GitProvider";
    case ObjectKind::kGitTarget:
      return "GitTarget";
    case ObjectKind::kWatchRule:
      return "WatchRule";
    case ObjectKind::kClusterWatchRule:
      return "ClusterWatchRule";
  }
  return "Unknown";
}

core::GroupVersionResource GvrOf(ObjectKind kind) {
  switch (kind) {
    case ObjectKind::kGitProvider:
      return {kGroup, kVersion, "gitproviders"};
    case ObjectKind::kGitTarget:
      return {kGroup, kVersion, "gittargets"};
    case ObjectKind::kWatchRule:
      return {kGroup, kVersion, "watchrules"};
    case ObjectKind::kClusterWatchRule:
      return {kGroup, kVersion, "clusterwatchrules"};
  }
  return {};
}

std::string ObjectKey::ToString() const {
  return namespace_.empty() ? absl::StrCat(KindName(kind), " ", name)
                            : absl::StrCat(KindName(kind), " ", namespace_, "/", name);
}

const nlohmann::json& NodeAt(const nlohmann::json& object,
                             std::initializer_list<const char*> path) {
  static const nlohmann::json* const kNull = new nlohmann::json();
  const nlohmann::json* node = &object;
  for (const char* part : path) {
    if (!node->is_object()) return *kNull;
    auto it = node->find(part);
    if (it == node->end()) return *kNull;
    node = &*it;
  }
  return *node;
}

std::string StringAt(const nlohmann::json& object, std::initializer_list<const char*> path,
                     const std::string& fallback) {
  const nlohmann::json& node = NodeAt(object, path);
  return node.is_string() ? node.get<std::string>() : fallback;
}

int64_t GenerationOf(const nlohmann::json& object) {
  const nlohmann::json& node = NodeAt(object, {"metadata", "generation"});
  return node.is_number_integer() ? node.get<int64_t>() : 0;
}

std::string UidOf(const nlohmann::json& object) { return StringAt(object, {"metadata", "uid"}); }

ObjectKey KeyOf(ObjectKind kind, const nlohmann::json& object) {
  return {kind, StringAt(object, {"metadata", "namespace"}), StringAt(object, {"metadata", "name"})};
}

}  // namespace reverser::catalog
