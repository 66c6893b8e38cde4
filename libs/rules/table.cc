#include "libs/rules/table.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <optional>
#include <set>
#include <tuple>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace reverser::rules {
namespace {

using typeset::TypeRecord;
using typeset::Verdict;

// (major, stability 2=GA 1=beta 0=alpha, minor) for "v1beta2"; nullopt if not Kubernetes-shaped.
std::optional<std::tuple<int, int, int>> ParseKubeVersion(absl::string_view v) {
  if (v.size() < 2 || v[0] != 'v') return std::nullopt;
  size_t i = 1;
  while (i < v.size() && isdigit(static_cast<unsigned char>(v[i]))) ++i;
  int major = 0;
  if (i == 1 || !absl::SimpleAtoi(v.substr(1, i - 1), &major)) return std::nullopt;
  if (i == v.size()) return std::make_tuple(major, 2, 0);
  absl::string_view rest = v.substr(i);
  int stability;
  if (absl::StartsWith(rest, "beta")) {
    stability = 1;
    rest.remove_prefix(4);
  } else if (absl::StartsWith(rest, "alpha")) {
    stability = 0;
    rest.remove_prefix(5);
  } else {
    return std::nullopt;
  }
  int minor = 0;
  if (rest.empty() || !absl::SimpleAtoi(rest, &minor)) return std::nullopt;
  return std::make_tuple(major, stability, minor);
}

// Settled and still live: new types wait out the settle window once; wobbles never drop them.
bool Eligible(const TypeRecord& r) { return r.Followable() && r.settled && r.scope; }

bool Contains(const std::vector<std::string>& values, absl::string_view v) {
  return std::find(values.begin(), values.end(), v) != values.end();
}

std::string Describe(const TypeRecord& r) {
  return absl::StrCat(r.gvr.ToString(), ": ", r.followability.summary);
}

class Resolver {
 public:
  Resolver(const std::vector<TypeRecord>& records, WatchedTypeTable& table)
      : records_(records), table_(table) {}

  void Resolve(const WatchRuleObject& object) {
    for (size_t i = 0; i < object.rules.size(); ++i) {
      for (const std::string& resource : object.rules[i].resources) {
        ResolveOne(object, i, resource);
      }
    }
  }

 private:
  // The scope a rule entry can reach, and where its watches go.
  struct Reach {
    core::Scope scope;
    std::string namespace_;  // "" = cluster-wide
  };

  static Reach ReachOf(const WatchRuleObject& object, const ResourceRule& rule) {
    if (!object.key.cluster) return {core::Scope::kNamespaced, object.key.namespace_};
    return {
        rule.scope == ClusterRuleScope::kCluster ? core::Scope::kCluster : core::Scope::kNamespaced,
        ""};
  }

  void Unresolved(const WatchRuleObject& object, size_t index, const std::string& resource,
                  std::string message) {
    table_.unresolved.push_back({object.key, index, resource, std::move(message)});
  }

  void Add(const WatchRuleObject& object, const TypeRecord& r, const Reach& reach,
           const OperationSet& ops) {
    table_.selections[object.key].emplace(r.gvr, reach.namespace_);
    auto [it, inserted] = table_.types.try_emplace(r.gvr);
    WatchedType& w = it->second;
    if (inserted) {
      w.gvk = r.gvk;
      w.gvr = r.gvr;
      w.scope = *r.scope;
      w.retained = r.verdict() == Verdict::kRetained;
      w.sensitive = r.sensitive;
    }
    auto [ns, fresh] = w.namespaces.try_emplace(reach.namespace_, ops);
    if (!fresh) ns->second.Merge(ops);
  }

  void ResolveOne(const WatchRuleObject& object, size_t index, const std::string& resource) {
    const ResourceRule& rule = object.rules[index];
    const Reach reach = ReachOf(object, rule);
    const bool any_resource = resource == "*";
    const bool groups_omitted = rule.api_groups.empty();
    const bool any_group = groups_omitted || Contains(rule.api_groups, "*");
    const bool any_version = Contains(rule.api_versions, "*");

    // Fully specified: one group, one version, one resource. Taken without a settle wait.
    if (rule.api_groups.size() == 1 && !any_group && !any_resource &&
        rule.api_versions.size() == 1 && !any_version) {
      core::GroupVersionResource gvr{rule.api_groups[0], rule.api_versions[0], resource};
      for (const TypeRecord& r : records_) {
        if (r.gvr != gvr) continue;
        if (!r.Followable() || !r.scope) {
          Unresolved(object, index, resource, Describe(r));
        } else if (*r.scope != reach.scope) {
          Unresolved(object, index, resource, ScopeMismatch(object, r));
        } else {
          Add(object, r, reach, rule.operations);
        }
        return;
      }
      Unresolved(object, index, resource, absl::StrCat(gvr.ToString(), " is not served"));
      return;
    }

    // Candidate records by group and resource (any version).
    std::vector<const TypeRecord*> candidates;
    for (const TypeRecord& r : records_) {
      if (!any_resource && r.gvr.resource != resource) continue;
      if (!any_group && !Contains(rule.api_groups, r.gvr.group)) continue;
      candidates.push_back(&r);
    }
    if (groups_omitted && !any_resource) {
      std::set<std::string> groups;
      for (const TypeRecord* r : candidates) {
        if (Eligible(*r)) groups.insert(r->gvr.group.empty() ? "\"\"" : r->gvr.group);
      }
      if (groups.size() > 1) {
        Unresolved(object, index, resource,
                   absl::StrCat("\"", resource, "\" is served by several groups (",
                                absl::StrJoin(groups, ", "), "); set apiGroups"));
        return;
      }
    }

    // Per group/resource, the versions to follow.
    std::map<std::pair<std::string, std::string>, std::vector<const TypeRecord*>> by_gr;
    for (const TypeRecord* r : candidates) by_gr[{r->gvr.group, r->gvr.resource}].push_back(r);
    bool added = false;
    std::string why_not;
    for (auto& [gr, versions] : by_gr) {
      std::vector<const TypeRecord*> eligible;
      for (const TypeRecord* r : versions) {
        if (Eligible(*r)) {
          eligible.push_back(r);
        } else if (why_not.empty()) {
          why_not = Describe(*r);
        }
      }
      std::vector<const TypeRecord*> chosen;
      if (any_version) {
        chosen = eligible;
      } else if (!rule.api_versions.empty()) {
        for (const TypeRecord* r : eligible) {
          if (Contains(rule.api_versions, r->gvr.version)) chosen.push_back(r);
        }
      } else if (!eligible.empty()) {
        // The preferred served version, else the highest-priority one serving the resource.
        auto preferred = std::find_if(eligible.begin(), eligible.end(),
                                      [](const TypeRecord* r) { return r->preferred; });
        if (preferred == eligible.end()) {
          preferred = std::min_element(eligible.begin(), eligible.end(),
                                       [](const TypeRecord* a, const TypeRecord* b) {
                                         return VersionPreferred(a->gvr.version, b->gvr.version);
                                       });
        }
        chosen.push_back(*preferred);
      }
      for (const TypeRecord* r : chosen) {
        if (*r->scope != reach.scope) {
          if (!any_resource && why_not.empty()) why_not = ScopeMismatch(object, *r);
          continue;
        }
        Add(object, *r, reach, rule.operations);
        added = true;
      }
    }
    if (!added && !any_resource) {
      Unresolved(object, index, resource,
                 why_not.empty() ? absl::StrCat("\"", resource,
                                                "\" is not served by a "
                                                "followable type")
                                 : why_not);
    }
  }

  static std::string ScopeMismatch(const WatchRuleObject& object, const TypeRecord& r) {
    if (!object.key.cluster) {
      return absl::StrCat(r.gvr.ToString(),
                          " is cluster-scoped; a WatchRule selects namespaced resources");
    }
    return *r.scope == core::Scope::kCluster
               ? absl::StrCat(r.gvr.ToString(),
                              " is cluster-scoped; a scope: Namespaced rule selects namespaced "
                              "resources")
               : absl::StrCat(r.gvr.ToString(),
                              " is namespaced; a scope: Cluster rule selects cluster-scoped "
                              "resources");
  }

  const std::vector<TypeRecord>& records_;
  WatchedTypeTable& table_;
};

// FNV-1a, 64 bit: stable across processes and builds (absl::Hash is salted per process).
uint64_t Fnv1a(absl::string_view data) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : data) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}

}  // namespace

bool VersionPreferred(absl::string_view a, absl::string_view b) {
  auto pa = ParseKubeVersion(a);
  auto pb = ParseKubeVersion(b);
  if (pa && pb) {
    auto [ma, sa, na] = *pa;
    auto [mb, sb, nb] = *pb;
    if (sa != sb) return sa > sb;
    if (ma != mb) return ma > mb;
    return na > nb;
  }
  if (pa || pb) return pa.has_value();
  return a < b;
}

bool WatchedTypeTable::HasRetained() const {
  return std::any_of(types.begin(), types.end(),
                     [](const auto& entry) { return entry.second.retained; });
}

OperationSet WatchedTypeTable::OperationsFor(const core::GroupVersionResource& gvr,
                                             const std::string& namespace_) const {
  OperationSet out;
  auto it = types.find(gvr);
  if (it == types.end()) return out;
  for (const std::string& key : {std::string(), namespace_}) {
    auto ns = it->second.namespaces.find(key);
    if (ns != it->second.namespaces.end()) out.Merge(ns->second);
  }
  return out;
}

RuleResolution ResolutionOf(const WatchedTypeTable& table, const RuleKey& rule) {
  std::vector<std::string> problems;
  for (const UnresolvedResource& u : table.unresolved) {
    if (u.rule == rule)
      problems.push_back(absl::StrCat("rules[", u.rule_index, "] ", u.resource, ": ", u.message));
  }
  if (problems.empty()) return {true, "Resolved", "all resources resolved"};
  return {false, "UnresolvedResources",
          absl::StrCat(problems.size(), " unresolved: ", absl::StrJoin(problems, "; "))};
}

std::string PlanHash(const WatchedTypeTable& table) {
  const GitDestination& d = table.target.destination;
  std::string canonical = absl::StrCat("dest\x1f", d.provider_namespace, "\x1f", d.provider_name,
                                       "\x1f", d.branch, "\x1f", d.path, "\x1e");
  for (const auto& [gvr, type] : table.types) {
    absl::StrAppend(&canonical, "type\x1f", gvr.ToString(), "\x1f", type.gvk.kind, "\x1f",
                    core::ScopeName(type.scope), type.sensitive ? "\x1fsensitive" : "", "\x1e");
    for (const auto& [ns, ops] : type.namespaces) {
      absl::StrAppend(&canonical, "ns\x1f", ns, "\x1f", ops.ToString(), "\x1e");
    }
  }
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016" PRIx64, Fnv1a(canonical));
  return hex;
}

WatchedTypeTable ResolveTable(const GitTargetInfo& target,
                              const std::vector<const WatchRuleObject*>& rules,
                              const std::vector<typeset::TypeRecord>& records,
                              uint64_t registry_revision) {
  WatchedTypeTable table;
  table.target = target;
  table.registry_revision = registry_revision;
  Resolver resolver(records, table);
  for (const WatchRuleObject* object : rules) {
    if (object != nullptr && object->target == target.key) resolver.Resolve(*object);
  }
  table.plan_hash = PlanHash(table);
  return table;
}

}  // namespace reverser::rules
