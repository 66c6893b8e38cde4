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
};

struct AuthzAttributes {
  std::string verb;
  std::string api_group;
  std::string resource;
  std::string subresource;
  std::string namespace_;
  std::string name;
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
  // The real 403 text: `User "u" cannot list resource "configmaps" in API group "" in the
  // namespace "default"` (or `at the cluster scope`).
  static std::string DenyReason(const UserInfo& user, const AuthzAttributes& attrs);

 private:
  mutable std::mutex mu_;
  bool enabled_ = false;
  std::vector<RbacRule> rules_;
};

}  // namespace reverser::kubesim
