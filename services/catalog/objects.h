#pragma once

// The configbutler.ai/v1alpha3 objects the catalog watches and writes status for.

#include <compare>
#include <nlohmann/json.hpp>
#include <string>

#include "absl/strings/string_view.h"
#include "libs/core/types.h"

namespace reverser::catalog {

inline constexpr char kGroup[] = "configbutler.ai";
inline constexpr char kVersion[] = "v1alpha3";

enum class ObjectKind { kGitProvider, kGitTarget, kWatchRule, kClusterWatchRule };
inline constexpr ObjectKind kAllObjectKinds[] = {ObjectKind::kGitProvider, ObjectKind::kGitTarget,
                                                 ObjectKind::kWatchRule,
                                                 ObjectKind::kClusterWatchRule};

absl::string_view KindName(ObjectKind kind);  // "GitProvider", ...
core::GroupVersionResource GvrOf(ObjectKind kind);
// CommitRequests are not catalog state: their own controller (commit_request_controller.h)
// watches them.
inline const core::GroupVersionResource kCommitRequestGvr{kGroup, kVersion, "commitrequests"};

// One watched object by kind, namespace ("" for ClusterWatchRule) and name.
struct ObjectKey {
  ObjectKind kind = ObjectKind::kGitProvider;
  std::string namespace_;
  std::string name;

  std::string ToString() const;  // "GitTarget team-a/t1"
  auto operator<=>(const ObjectKey&) const = default;
};

// Key of an object as served (metadata.namespace / metadata.name).
ObjectKey KeyOf(ObjectKind kind, const nlohmann::json& object);

// Small readers that never throw: a missing or mistyped field reads as the default.
std::string StringAt(const nlohmann::json& object, std::initializer_list<const char*> path,
                     const std::string& fallback = "");
const nlohmann::json& NodeAt(const nlohmann::json& object, std::initializer_list<const char*> path);
int64_t GenerationOf(const nlohmann::json& object);
std::string UidOf(const nlohmann::json& object);

}  // namespace reverser::catalog
