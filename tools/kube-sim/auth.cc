#include "tools/kube-sim/auth.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace reverser::kubesim {
namespace {

bool AnyOf(const std::vector<std::string>& list, const std::string& value) {
  if (list.empty()) return true;
  return std::find(list.begin(), list.end(), "*") != list.end() ||
         std::find(list.begin(), list.end(), value) != list.end();
}

// RBAC's NonResourceURLMatches: "*", the URL itself, or a prefix ending in "*".
bool NonResourceUrlMatches(const std::vector<std::string>& urls, const std::string& path) {
  for (const auto& u : urls) {
    if (u == "*" || u == path) return true;
    if (!u.empty() && u.back() == '*' && absl::StartsWith(path, u.substr(0, u.size() - 1))) {
      return true;
    }
  }
  return false;
}

// Splits one CSV line honouring double quotes.
std::vector<std::string> SplitCsv(const std::string& line) {
  std::vector<std::string> out;
  std::string cur;
  bool quoted = false;
  for (char c : line) {
    if (c == '"') {
      quoted = !quoted;
    } else if (c == ',' && !quoted) {
      out.push_back(cur);
      cur.clear();
    } else {
      cur.push_back(c);
    }
  }
  out.push_back(cur);
  return out;
}

}  // namespace

Json UserInfo::ToJson() const {
  Json j = {{"username", username}};
  if (!uid.empty()) j["uid"] = uid;
  if (!groups.empty()) j["groups"] = groups;
  if (!extra.empty()) j["extra"] = extra;
  return j;
}

void Authenticator::AddToken(const std::string& token, UserInfo user) {
  std::lock_guard lock(mu_);
  if (std::find(user.groups.begin(), user.groups.end(), "system:authenticated") ==
      user.groups.end()) {
    user.groups.push_back("system:authenticated");
  }
  tokens_[token] = std::move(user);
}

ApiOr<bool> Authenticator::LoadTokenFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return BadRequest(absl::StrCat("cannot read token file ", path));
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    std::string trimmed(absl::StripAsciiWhitespace(line));
    if (trimmed.empty() || trimmed[0] == '#') continue;
    std::vector<std::string> f = SplitCsv(trimmed);
    if (f.size() < 3) {
      return BadRequest(absl::StrCat(path, ":", n, ": want token,user,uid[,\"groups\"]"));
    }
    UserInfo u{f[1], f[2], {}, {}};
    if (f.size() > 3) {
      for (absl::string_view g : absl::StrSplit(f[3], ',', absl::SkipEmpty())) {
        u.groups.emplace_back(absl::StripAsciiWhitespace(g));
      }
    }
    AddToken(f[0], u);
  }
  return true;
}

void Authenticator::SetDefaultUser(UserInfo user) {
  std::lock_guard lock(mu_);
  default_user_ = std::move(user);
}

bool Authenticator::has_tokens() const {
  std::lock_guard lock(mu_);
  return !tokens_.empty();
}

ApiOr<UserInfo> Authenticator::Authenticate(const std::string& authorization) const {
  std::lock_guard lock(mu_);
  if (tokens_.empty()) return default_user_;
  if (authorization.empty()) {
    return UserInfo{"system:anonymous", "", {"system:unauthenticated"}, {}};
  }
  absl::string_view value = authorization;
  if (!absl::ConsumePrefix(&value, "Bearer ")) return Unauthorized();
  auto it = tokens_.find(std::string(absl::StripAsciiWhitespace(value)));
  if (it == tokens_.end()) return Unauthorized();
  return it->second;
}

std::optional<UserInfo> Authenticator::LookupToken(const std::string& token) const {
  std::lock_guard lock(mu_);
  if (tokens_.empty()) return default_user_;
  auto it = tokens_.find(token);
  if (it == tokens_.end()) return std::nullopt;
  return it->second;
}

void Authorizer::Enable(bool enabled) {
  std::lock_guard lock(mu_);
  enabled_ = enabled;
}

void Authorizer::AddRule(RbacRule rule) {
  std::lock_guard lock(mu_);
  enabled_ = true;
  rules_.push_back(std::move(rule));
}

void Authorizer::Clear() {
  std::lock_guard lock(mu_);
  rules_.clear();
  enabled_ = false;
}

bool Authorizer::enabled() const {
  std::lock_guard lock(mu_);
  return enabled_;
}

bool Authorizer::Allowed(const UserInfo& user, const AuthzAttributes& a) const {
  return Decide(user, a).allowed;
}

AuthzDecision Authorizer::Decide(const UserInfo& user, const AuthzAttributes& a) const {
  std::lock_guard lock(mu_);
  if (!enabled_) return {true, ""};
  for (const auto& g : user.groups) {
    if (g == "system:masters") return {true, ""};
  }
  std::string resource =
      a.subresource.empty() ? a.resource : absl::StrCat(a.resource, "/", a.subresource);
  for (size_t i = 0; i < rules_.size(); ++i) {
    const RbacRule& r = rules_[i];
    // Which subject the rule matched, for the reason (RBAC names the binding's subject).
    std::string subject;
    if (r.users.empty() && r.groups.empty()) {
      subject = absl::StrCat("User \"", user.username, "\"");
    } else if (std::find(r.users.begin(), r.users.end(), user.username) != r.users.end()) {
      subject = absl::StrCat("User \"", user.username, "\"");
    } else {
      for (const auto& g : user.groups) {
        if (std::find(r.groups.begin(), r.groups.end(), g) != r.groups.end()) {
          subject = absl::StrCat("Group \"", g, "\"");
          break;
        }
      }
    }
    if (subject.empty()) continue;
    if (!AnyOf(r.verbs, a.verb)) continue;
    if (a.non_resource) {
      if (!NonResourceUrlMatches(r.non_resource_urls, a.path)) continue;
    } else {
      if (!r.non_resource_urls.empty() && r.resources.empty()) continue;  // URLs only
      if (!AnyOf(r.api_groups, a.api_group) || !AnyOf(r.resources, resource)) continue;
      if (!r.namespaces.empty() &&
          (a.namespace_.empty() || std::find(r.namespaces.begin(), r.namespaces.end(),
                                             a.namespace_) == r.namespaces.end())) {
        continue;
      }
    }
    return {true, absl::StrCat("RBAC: allowed by kube-sim rule ", i, " to ", subject)};
  }
  if (a.non_resource && a.verb == "get") {
    // The bootstrap ClusterRoleBindings of the same names (kube-apiserver's RBAC bootstrap).
    static const std::vector<std::string> kPublicInfo = {"/healthz", "/livez", "/readyz",
                                                         "/version", "/version/"};
    static const std::vector<std::string> kDiscovery = {
        "/api",     "/api/*",     "/apis",   "/apis/*",  "/healthz", "/livez",
        "/openapi", "/openapi/*", "/readyz", "/version", "/version/"};
    auto in = [&](const char* g) {
      return std::find(user.groups.begin(), user.groups.end(), g) != user.groups.end();
    };
    auto reason = [](const char* role, const char* group) {
      return absl::StrCat("RBAC: allowed by ClusterRoleBinding \"", role, "\" of ClusterRole \"",
                          role, "\" to Group \"", group, "\"");
    };
    if (in("system:authenticated") && NonResourceUrlMatches(kDiscovery, a.path)) {
      return {true, reason("system:discovery", "system:authenticated")};
    }
    if (NonResourceUrlMatches(kPublicInfo, a.path)) {
      if (in("system:authenticated")) {
        return {true, reason("system:public-info-viewer", "system:authenticated")};
      }
      if (in("system:unauthenticated")) {
        return {true, reason("system:public-info-viewer", "system:unauthenticated")};
      }
    }
  }
  return {false, ""};
}

std::string Authorizer::DenyReason(const UserInfo& user, const AuthzAttributes& a) {
  std::string resource =
      a.subresource.empty() ? a.resource : absl::StrCat(a.resource, "/", a.subresource);
  std::string scope = a.namespace_.empty()
                          ? "at the cluster scope"
                          : absl::StrCat("in the namespace \"", a.namespace_, "\"");
  return absl::StrCat("User \"", user.username, "\" cannot ", a.verb, " resource \"", resource,
                      "\" in API group \"", a.api_group, "\" ", scope);
}

}  // namespace reverser::kubesim
