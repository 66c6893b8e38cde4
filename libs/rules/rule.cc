#include "libs/rules/rule.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "libs/core/status.h"
#include "libs/core/types.h"
#include "nlohmann/json.hpp"

namespace reverser::rules {
namespace {

using nlohmann::json;

constexpr absl::string_view kGroup = "configbutler.ai";

absl::Status FieldError(absl::string_view path, absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": ", message));
}

// Reads an optional string field; wrong types are errors, absence yields "".
absl::StatusOr<std::string> OptString(const json& obj, absl::string_view key,
                                      absl::string_view path) {
  auto it = obj.find(std::string(key));
  if (it == obj.end() || it->is_null()) return std::string();
  if (!it->is_string()) return FieldError(absl::StrCat(path, ".", key), "must be a string");
  return it->get<std::string>();
}

absl::StatusOr<std::string> ReqString(const json& obj, absl::string_view key,
                                      absl::string_view path) {
  ASSIGN_OR_RETURN(std::string value, OptString(obj, key, path));
  if (value.empty()) return FieldError(absl::StrCat(path, ".", key), "is required");
  return value;
}

// Reads an optional list of strings; unset when absent or null.
absl::StatusOr<std::optional<std::vector<std::string>>> OptStrings(const json& obj,
                                                                   absl::string_view key,
                                                                   absl::string_view path) {
  auto it = obj.find(std::string(key));
  if (it == obj.end() || it->is_null()) return std::optional<std::vector<std::string>>();
  std::string field = absl::StrCat(path, ".", key);
  if (!it->is_array()) return FieldError(field, "must be a list of strings");
  std::vector<std::string> out;
  for (size_t i = 0; i < it->size(); ++i) {
    const json& item = (*it)[i];
    if (!item.is_string()) return FieldError(absl::StrCat(field, "[", i, "]"), "must be a string");
    out.push_back(item.get<std::string>());
  }
  return std::optional<std::vector<std::string>>(std::move(out));
}

absl::Status ValidateResources(const std::vector<std::string>& resources, absl::string_view path) {
  if (resources.empty()) return FieldError(path, "must list at least one resource");
  for (size_t i = 0; i < resources.size(); ++i) {
    const std::string& r = resources[i];
    std::string field = absl::StrCat(path, "[", i, "]");
    if (r.empty()) return FieldError(field, "must not be empty");
    if (absl::StrContains(r, "/")) {
      return FieldError(field, absl::StrCat("\"", r,
                                            "\" names a subresource; only top-level "
                                            "resources can be watched"));
    }
    if (r != "*" && absl::StrContains(r, "*")) {
      return FieldError(field, absl::StrCat("\"", r,
                                            "\": only an exact plural or \"*\" is "
                                            "allowed (no prefix or suffix wildcards)"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<ResourceRule> ParseResourceRule(const json& item, absl::string_view path,
                                               bool cluster) {
  if (!item.is_object()) return FieldError(path, "must be an object");
  ResourceRule rule;
  ASSIGN_OR_RETURN(auto operations, OptStrings(item, "operations", path));
  auto ops = OperationSet::Parse(operations.value_or(std::vector<std::string>{}));
  if (!ops.ok()) return core::Annotate(ops.status(), absl::StrCat(path, ".operations"));
  rule.operations = *ops;

  ASSIGN_OR_RETURN(auto groups, OptStrings(item, "apiGroups", path));
  rule.api_groups = groups.value_or(std::vector<std::string>{});
  ASSIGN_OR_RETURN(auto versions, OptStrings(item, "apiVersions", path));
  rule.api_versions = versions.value_or(std::vector<std::string>{});
  for (size_t i = 0; i < rule.api_versions.size(); ++i) {
    if (rule.api_versions[i].empty()) {
      return FieldError(absl::StrCat(path, ".apiVersions[", i, "]"), "must not be empty");
    }
  }
  ASSIGN_OR_RETURN(auto resources, OptStrings(item, "resources", path));
  rule.resources = resources.value_or(std::vector<std::string>{});
  // Resource names match case-insensitively, as in the reference; plurals are lower case.
  for (std::string& r : rule.resources) absl::AsciiStrToLower(&r);
  RETURN_IF_ERROR(ValidateResources(rule.resources, absl::StrCat(path, ".resources")));

  if (cluster) {
    ASSIGN_OR_RETURN(std::string scope, OptString(item, "scope", path));
    if (scope == "Cluster") {
      rule.scope = ClusterRuleScope::kCluster;
    } else if (scope == "Namespaced") {
      rule.scope = ClusterRuleScope::kNamespaced;
    } else {
      return FieldError(absl::StrCat(path, ".scope"),
                        scope.empty()
                            ? "is required (Cluster or Namespaced)"
                            : absl::StrCat("\"", scope, "\" is not Cluster or Namespaced"));
    }
  }
  return rule;
}

absl::StatusOr<WatchRuleObject> Parse(const json& object, bool cluster) {
  absl::string_view kind = cluster ? "ClusterWatchRule" : "WatchRule";
  if (!object.is_object()) return absl::InvalidArgumentError(absl::StrCat(kind, ": not an object"));
  ASSIGN_OR_RETURN(std::string object_kind, OptString(object, "kind", ""));
  if (!object_kind.empty() && object_kind != kind) {
    return FieldError("kind", absl::StrCat("\"", object_kind, "\" is not ", kind));
  }
  auto meta_it = object.find("metadata");
  if (meta_it == object.end() || !meta_it->is_object()) {
    return FieldError("metadata", "is required");
  }
  const json& meta = *meta_it;
  WatchRuleObject out;
  out.key.cluster = cluster;
  ASSIGN_OR_RETURN(out.key.name, ReqString(meta, "name", "metadata"));
  ASSIGN_OR_RETURN(out.key.namespace_, OptString(meta, "namespace", "metadata"));
  if (!cluster && out.key.namespace_.empty())
    return FieldError("metadata.namespace", "is required");
  if (cluster) out.key.namespace_.clear();  // cluster-scoped: a stray namespace means nothing
  ASSIGN_OR_RETURN(out.uid, OptString(meta, "uid", "metadata"));
  if (auto g = meta.find("generation"); g != meta.end() && g->is_number_integer()) {
    out.generation = g->get<int64_t>();
  }

  auto spec_it = object.find("spec");
  if (spec_it == object.end() || !spec_it->is_object()) return FieldError("spec", "is required");
  const json& spec = *spec_it;
  auto ref_it = spec.find("targetRef");
  if (ref_it == spec.end() || !ref_it->is_object()) {
    return FieldError("spec.targetRef", "is required");
  }
  const json& ref = *ref_it;
  ASSIGN_OR_RETURN(std::string group, OptString(ref, "group", "spec.targetRef"));
  if (!group.empty() && group != kGroup) {
    return FieldError("spec.targetRef.group", absl::StrCat("must be ", kGroup));
  }
  ASSIGN_OR_RETURN(std::string ref_kind, OptString(ref, "kind", "spec.targetRef"));
  if (!ref_kind.empty() && ref_kind != "GitTarget") {
    return FieldError("spec.targetRef.kind", "must be GitTarget");
  }
  ASSIGN_OR_RETURN(out.target.name, ReqString(ref, "name", "spec.targetRef"));
  ASSIGN_OR_RETURN(std::string ref_ns, OptString(ref, "namespace", "spec.targetRef"));
  if (cluster) {
    if (ref_ns.empty()) return FieldError("spec.targetRef.namespace", "is required");
    out.target.namespace_ = ref_ns;
  } else {
    // A WatchRule reaches only the GitTargets of its own namespace.
    if (!ref_ns.empty() && ref_ns != out.key.namespace_) {
      return FieldError("spec.targetRef.namespace",
                        "a WatchRule can only target a GitTarget in its own namespace");
    }
    out.target.namespace_ = out.key.namespace_;
  }

  auto rules_it = spec.find("rules");
  if (rules_it == spec.end() || !rules_it->is_array() || rules_it->empty()) {
    return FieldError("spec.rules", "must list at least one rule");
  }
  for (size_t i = 0; i < rules_it->size(); ++i) {
    ASSIGN_OR_RETURN(
        ResourceRule rule,
        ParseResourceRule((*rules_it)[i], absl::StrCat("spec.rules[", i, "]"), cluster));
    out.rules.push_back(std::move(rule));
  }
  return out;
}

}  // namespace

absl::string_view OperationName(Operation op) {
  switch (op) {
    case Operation::kCreate:
      return "CREATE";
    case Operation::kUpdate:
      return "UPDATE";
    case Operation::kDelete:
      return "DELETE";
  }
  return "UNKNOWN";
}

absl::StatusOr<OperationSet> OperationSet::Parse(const std::vector<std::string>& values) {
  OperationSet out;
  if (values.empty()) return All();
  for (const std::string& v : values) {
    if (v == "*") {
      out.all = true;
    } else if (v == "CREATE") {
      out.operations.insert(Operation::kCreate);
    } else if (v == "UPDATE") {
      out.operations.insert(Operation::kUpdate);
    } else if (v == "DELETE") {
      out.operations.insert(Operation::kDelete);
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("\"", v, "\" is not one of CREATE, UPDATE, DELETE, *"));
    }
  }
  if (out.all || out.operations.size() == 3) return All();
  return out;
}

void OperationSet::Merge(const OperationSet& other) {
  if (all) return;
  if (other.all) {
    *this = All();
    return;
  }
  operations.insert(other.operations.begin(), other.operations.end());
  if (operations.size() == 3) *this = All();
}

std::string OperationSet::ToString() const {
  if (all) return "*";
  std::vector<std::string> names;
  for (Operation op : operations) names.emplace_back(OperationName(op));
  return absl::StrJoin(names, ",");
}

std::string RuleKey::ToString() const {
  return cluster ? absl::StrCat("ClusterWatchRule ", name)
                 : absl::StrCat("WatchRule ", namespace_, "/", name);
}

std::string TargetKey::ToString() const { return absl::StrCat(namespace_, "/", name); }

absl::StatusOr<WatchRuleObject> ParseWatchRule(const nlohmann::json& object) {
  return Parse(object, /*cluster=*/false);
}

absl::StatusOr<WatchRuleObject> ParseClusterWatchRule(const nlohmann::json& object) {
  return Parse(object, /*cluster=*/true);
}

absl::StatusOr<WatchRuleObject> ParseRuleObject(absl::string_view json_text) {
  json object =
      json::parse(json_text.begin(), json_text.end(), nullptr, /*allow_exceptions=*/false);
  if (object.is_discarded()) return absl::InvalidArgumentError("rule object is not valid JSON");
  if (!object.is_object()) return absl::InvalidArgumentError("rule object is not a JSON object");
  auto kind = object.find("kind");
  if (kind != object.end() && kind->is_string()) {
    if (*kind == "WatchRule") return ParseWatchRule(object);
    if (*kind == "ClusterWatchRule") return ParseClusterWatchRule(object);
  }
  return FieldError("kind", "must be WatchRule or ClusterWatchRule");
}

}  // namespace reverser::rules
