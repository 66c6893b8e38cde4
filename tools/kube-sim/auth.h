#pragma once

// Authentication (bearer tokens, impersonation headers) and a simple RBAC table.

#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "tools/kube-sim/api_error.h"

namespace reverser::kubesim {

struct UserInfo {
  std::string username;
  std::string uid;
  std::vector<std::string> groups;
  std::map<std::string, std::vector<std::string>> extra;

  Json ToJson() const;  // audit's authentication.k8s.io/v1 UserInfo
};

// One allow rule; an empty list means "any". Matches like an RBAC PolicyRule bound to the
// listed users/groups (cluster-wide unless namespaces are given).
struct RbacRule {
  std::vector<std::string> users;
  std::vector<std::string> groups;      // user groups
  std::vector<std::string> verbs;       // "*" or verbs
  std::vector<std::string> api_groups;  // "*" or groups ("" = core)
  std::vector<std::string> resources;   // "*", "configmaps", "deployments/scale"
  std::vector<std::string> namespaces;  // empty: all namespaces and cluster scope
  // Non-resource URLs ("/metrics", "/apis/*", "*"), matched as RBAC matches them (exact, or a
  // prefix before a trailing "*"). A rule with these and no `resources` grants no resources.
  std::vector<std::string> non_resource_urls;
};

struct AuthzAttributes {
  std::string verb;
  std::string api_group;
  std::string resource;
  std::string subresource;
  std::string namespace_;
  std::string name;
  // A non-resource request (SubjectAccessReview nonResourceAttributes): `verb` and `path` only.
  bool non_resource = false;
  std::string path;
};

// An authorization decision and the reason kube-apiserver's authorizer chain would give
// (empty for system:masters and with RBAC off, as the real privileged-group and AlwaysAllow
// authorizers give none; empty for a denial, as RBAC's no-opinion is).
struct AuthzDecision {
  bool allowed = false;
  std::string reason;
};

class Authenticator {
 public:
  // Without tokens everyone is `default_user`; with tokens an unknown bearer token is 401 and a
  // missing one is system:anonymous.
  void AddToken(const std::string& token, UserInfo user);
  // Loads kube-apiserver's --token-auth-file CSV: token,user,uid,"group1,group2".
  ApiOr<bool> LoadTokenFile(const std::string& path);
  void SetDefaultUser(UserInfo user);
  bool has_tokens() const;

  // `authorization` is the Authorization header value (may be empty).
  ApiOr<UserInfo> Authenticate(const std::string& authorization) const;
  // The user a bearer token (without "Bearer ") stands for, as a TokenReview answers: the token
  // file's user, nothing for an unknown token, the default user when there are no tokens (as
  // every request is then).
  std::optional<UserInfo> LookupToken(const std::string& token) const;

 private:
  mutable std::mutex mu_;
  std::map<std::string, UserInfo> tokens_;
  UserInfo default_user_{"system:admin", "", {"system:masters", "system:authenticated"}, {}};
};

class Authorizer {
 public:
  // Until enabled (or a rule is added) every request is allowed.
  void Enable(bool enabled);
  void AddRule(RbacRule rule);
  void Clear();
  bool enabled() const;
  // system:masters is always allowed, as in a real cluster.
  bool Allowed(const UserInfo& user, const AuthzAttributes& attrs) const;
  // The same decision with its reason (SubjectAccessReview status). Non-resource requests are
  // also allowed by the bootstrap bindings every cluster has: system:discovery (discovery,
  // OpenAPI, health and version paths, for system:authenticated) and system:public-info-viewer
  // (health and version paths, for everyone).
  AuthzDecision Decide(const UserInfo& user, const AuthzAttributes& attrs) const;
  // The real 403 text: `User "u" cannot list resource "configmaps" in API group "" in the
  // namespace "default"` (or `at the cluster scope`).
  static std::string DenyReason(const UserInfo& user, const AuthzAttributes& attrs);

 private:
  mutable std::mutex mu_;
  bool enabled_ = false;
  std::vector<RbacRule> rules_;
};

}  // namespace reverser::kubesim
