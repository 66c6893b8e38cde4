#pragma once

// The shared vocabulary of Kubernetes type and object identity.

#include <compare>
#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"

namespace reverser::core {

// A kind: group ("" for core), version, kind.
struct GroupVersionKind {
  std::string group;
  std::string version;
  std::string kind;

  // "v1" for core, "apps/v1" otherwise.
  std::string ApiVersion() const;
  // "apps/v1, Kind=Deployment" as client-go prints it.
  std::string ToString() const;
  auto operator<=>(const GroupVersionKind&) const = default;
};

// A served resource type: group ("" for core), version, plural resource.
struct GroupVersionResource {
  std::string group;
  std::string version;
  std::string resource;

  std::string ApiVersion() const;
  // The reference's `GR` key segment: "configmaps" for core, "apps/deployments" otherwise.
  std::string GroupResource() const;
  // "apps/v1/deployments", "v1/configmaps".
  std::string ToString() const;
  auto operator<=>(const GroupVersionResource&) const = default;
};

// Splits an apiVersion ("v1", "apps/v1") into group and version.
absl::StatusOr<std::pair<std::string, std::string>> ParseApiVersion(absl::string_view api_version);

enum class Scope { kNamespaced, kCluster };

absl::string_view ScopeName(Scope scope);

// Which part of a type a unit of work covers: the whole type, or one namespace.
struct WatchScope {
  std::string namespace_;  // empty: cluster-wide

  static WatchScope Cluster() { return {}; }
  static WatchScope Namespace(std::string ns) { return {std::move(ns)}; }
  bool IsCluster() const { return namespace_.empty(); }
  // "cluster" or "ns:<namespace>" (the Redis key segment).
  std::string KeySegment() const;
  static absl::StatusOr<WatchScope> ParseKeySegment(absl::string_view segment);
  auto operator<=>(const WatchScope&) const = default;
};

// One object of a type; uid tells incarnations apart.
struct ResourceRef {
  GroupVersionResource gvr;
  std::string namespace_;
  std::string name;
  std::string uid;

  // "apps/v1/deployments default/web" style, for logs.
  std::string ToString() const;
  auto operator<=>(const ResourceRef&) const = default;
};

// Validates a Kubernetes object name or namespace as a DNS-1123 subdomain (names) or label
// (namespaces): the rules the API server enforces for namespaces and for most names. Not every
// kind: RBAC names (Role, ClusterRole, RoleBinding, ClusterRoleBinding) are path segments — any
// character but `/` and `%`, not `.`/`..`, no length limit — so Git paths never rely on
// ValidateObjectName; libs/manifest/paths.h turns every accepted name into a file name.
absl::Status ValidateObjectName(absl::string_view name);
absl::Status ValidateNamespaceName(absl::string_view ns);

}  // namespace reverser::core
