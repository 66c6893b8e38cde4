#include "tools/kube-sim/managed_fields.h"

#include <algorithm>
#include <map>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "tools/kube-sim/patch.h"

namespace reverser::kubesim {
namespace {

constexpr char kSep = '\x1f';
constexpr char kSelf[] = ".";

// Maps whose keys are data, not schema: the map node itself is owned ("." marker).
bool IsDataMap(const std::string& field) {
  static const std::set<std::string> kMaps = {
      "labels", "annotations", "data", "stringData", "binaryData", "matchLabels", "nodeSelector"};
  return kMaps.count(field) > 0;
}

// Flattens to path -> leaf value. Paths are FieldsV1 keys joined with kSep; markers end in ".".
void Flatten(const Json& node, const std::string& field, const std::string& prefix,
             std::map<std::string, Json>& out) {
  auto child = [&](const std::string& key) {
    return prefix.empty() ? key : absl::StrCat(prefix, std::string(1, kSep), key);
  };
  if (node.is_object() && !node.empty()) {
    if (IsDataMap(field)) out[child(kSelf)] = kSelf;
    for (const auto& [k, v] : node.items()) Flatten(v, k, child(absl::StrCat("f:", k)), out);
    return;
  }
  if (node.is_array() && !node.empty()) {
    if (field == "finalizers") {
      out[child(kSelf)] = kSelf;
      for (const auto& v : node) out[child(absl::StrCat("v:", v.dump()))] = v;
      return;
    }
    std::string key = MergeKeyFor(field, node[0]);
    if (!key.empty()) {
      for (const auto& e : node) {
        if (!e.is_object() || !e.contains(key)) continue;
        std::string k = child(absl::StrCat("k:", Json{{key, e[key]}}.dump()));
        out[absl::StrCat(k, std::string(1, kSep), kSelf)] = kSelf;
        for (const auto& [ek, ev] : e.items()) {
          Flatten(ev, ek, absl::StrCat(k, std::string(1, kSep), "f:", ek), out);
        }
      }
      return;
    }
  }
  out[prefix] = node;  // leaf (scalar, empty container, or atomic list)
}

std::map<std::string, Json> FlattenObject(const Json& object, bool include_status) {
  std::map<std::string, Json> out;
  if (!object.is_object()) return out;
  for (const auto& [k, v] : object.items()) {
    if (k == "apiVersion" || k == "kind") continue;
    if (k == "status" && !include_status) continue;
    if (k == "metadata") {
      if (!v.is_object()) continue;
      for (const auto& [mk, mv] : v.items()) {
        if (mk == "labels" || mk == "annotations" || mk == "finalizers" || mk == "generateName" ||
            mk == "ownerReferences") {
          Flatten(mv, mk, absl::StrCat("f:metadata", std::string(1, kSep), "f:", mk), out);
        }
      }
      continue;
    }
    Flatten(v, k, absl::StrCat("f:", k), out);
  }
  return out;
}

Json ToFieldsV1(const std::set<std::string>& paths) {
  Json root = Json::object();
  for (const auto& path : paths) {
    Json* cur = &root;
    for (absl::string_view part : absl::StrSplit(path, kSep)) {
      Json& next = (*cur)[std::string(part)];
      if (next.is_null()) next = Json::object();
      cur = &next;
    }
  }
  return root;
}

void FromFieldsV1(const Json& node, const std::string& prefix, std::set<std::string>& out) {
  if (!node.is_object()) return;
  if (node.empty() && !prefix.empty()) {
    out.insert(prefix);
    return;
  }
  for (const auto& [k, v] : node.items()) {
    FromFieldsV1(v, prefix.empty() ? k : absl::StrCat(prefix, std::string(1, kSep), k), out);
  }
}

std::set<std::string> Keys(const std::map<std::string, Json>& m) {
  std::set<std::string> s;
  for (const auto& [k, v] : m) s.insert(k);
  return s;
}

// Removes the field a FieldsV1 path names ("f:spec", "k:{...}", "v:...") from `node`.
void RemovePath(Json& node, const std::vector<std::string>& parts, size_t i) {
  if (i >= parts.size() || parts[i] == kSelf) return;
  const std::string& p = parts[i];
  bool last = i + 1 == parts.size() || (i + 2 == parts.size() && parts[i + 1] == kSelf);
  if (p.rfind("f:", 0) == 0 && node.is_object()) {
    std::string key = p.substr(2);
    if (!node.contains(key)) return;
    if (last) {
      node.erase(key);
    } else {
      RemovePath(node[key], parts, i + 1);
    }
  } else if ((p.rfind("k:", 0) == 0 || p.rfind("v:", 0) == 0) && node.is_array()) {
    Json want = Json::parse(p.substr(2), nullptr, false);
    for (auto it = node.begin(); it != node.end(); ++it) {
      bool match = p[0] == 'v' ? *it == want : (it->is_object() && want.is_object() && [&] {
        for (const auto& [k, v] : want.items()) {
          if (!it->contains(k) || (*it)[k] != v) return false;
        }
        return true;
      }());
      if (!match) continue;
      if (last) {
        node.erase(it);
      } else {
        RemovePath(*it, parts, i + 1);
      }
      return;
    }
  }
}

}  // namespace

Json PruneUnapplied(const Json& current, Json merged, const std::string& manager,
                    const Json& applied) {
  std::set<std::string> before, others;
  for (const auto& e :
       current.value("metadata", Json::object()).value("managedFields", Json::array())) {
    if (!e.is_object()) continue;
    bool mine = e.value("manager", "") == manager && e.value("operation", "") == "Apply";
    FromFieldsV1(e.value("fieldsV1", Json::object()), "", mine ? before : others);
  }
  std::set<std::string> now = Keys(FlattenObject(applied, false));
  for (const auto& path : before) {
    if (now.count(path) || others.count(path)) continue;
    std::vector<std::string> parts = absl::StrSplit(path, kSep);
    RemovePath(merged, parts, 0);
  }
  return merged;
}

namespace {

// structured-merge-diff's Path.String(): .data.key, .spec.containers[name="c"].image, [="v"].
std::string HumanPath(const std::string& path) {
  std::string out;
  for (absl::string_view part : absl::StrSplit(path, kSep)) {
    if (part == kSelf) continue;
    if (absl::ConsumePrefix(&part, "f:")) {
      absl::StrAppend(&out, ".", part);
    } else if (absl::ConsumePrefix(&part, "k:")) {
      Json key = Json::parse(std::string(part), nullptr, false);
      std::vector<std::string> terms;
      if (key.is_object()) {
        for (const auto& [k, v] : key.items()) terms.push_back(absl::StrCat(k, "=", v.dump()));
      }
      absl::StrAppend(&out, "[", absl::StrJoin(terms, ","), "]");
    } else if (absl::ConsumePrefix(&part, "v:")) {
      absl::StrAppend(&out, "[=", part, "]");
    }
  }
  return out;
}

}  // namespace

std::optional<ApiError> ApplyConflicts(const Json& current, const Json& applied,
                                       const std::string& manager) {
  std::map<std::string, Json> live = FlattenObject(current, false);
  std::map<std::string, Json> want = FlattenObject(applied, false);
  std::vector<std::pair<std::string, std::string>> conflicts;  // (printed manager, path)
  for (const auto& e :
       current.value("metadata", Json::object()).value("managedFields", Json::array())) {
    if (!e.is_object()) continue;
    std::string name = e.value("manager", "");
    std::string op = e.value("operation", "");
    if (name == manager && op == "Apply") continue;
    if (!e.value("subresource", "").empty()) continue;
    std::set<std::string> owned;
    FromFieldsV1(e.value("fieldsV1", Json::object()), "", owned);
    std::string printed = Json(name).dump();
    if (op == "Update") absl::StrAppend(&printed, " using ", e.value("apiVersion", ""));
    for (const auto& [path, value] : want) {
      if (value == kSelf || !owned.count(path)) continue;
      auto l = live.find(path);
      if (l != live.end() && l->second != value) conflicts.emplace_back(printed, path);
    }
  }
  if (conflicts.empty()) return std::nullopt;
  std::sort(conflicts.begin(), conflicts.end());
  Json causes = Json::array();
  for (const auto& [m, p] : conflicts) {
    causes.push_back({{"reason", "FieldManagerConflict"},
                      {"message", absl::StrCat("conflict with ", m)},
                      {"field", HumanPath(p)}});
  }
  std::string message;
  if (conflicts.size() == 1) {
    message = absl::StrCat("Apply failed with 1 conflict: conflict with ", conflicts[0].first, ": ",
                           HumanPath(conflicts[0].second));
  } else {
    std::vector<std::string> lines;
    std::string last;
    for (const auto& [m, p] : conflicts) {
      if (m != last) lines.push_back(absl::StrCat("conflicts with ", m, ":"));
      last = m;
      lines.push_back(absl::StrCat("- ", HumanPath(p)));
    }
    message = absl::StrCat("Apply failed with ", conflicts.size(),
                           " conflicts: ", absl::StrJoin(lines, "\n"));
  }
  ApiError e;
  e.code = 409;
  e.reason = "Conflict";
  e.message = message;
  e.details = {{"causes", causes}};
  return e;
}

std::string Rfc3339(absl::Time t) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", t, absl::UTCTimeZone());
}
std::string Rfc3339Micro(absl::Time t) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E6SZ", t, absl::UTCTimeZone());
}

Json FieldsV1Of(const Json& object) { return ToFieldsV1(Keys(FlattenObject(object, true))); }

Json UpdateManagedFields(const Json& previous, const Json& updated, const Json& applied,
                         const ManagerWrite& write) {
  bool status = write.subresource == "status";
  std::map<std::string, Json> now = FlattenObject(updated, status);
  std::map<std::string, Json> before =
      previous.is_null() ? std::map<std::string, Json>() : FlattenObject(previous, status);
  if (status) {
    // A status write owns only status fields.
    for (auto it = now.begin(); it != now.end();) {
      it = it->first.rfind("f:status", 0) == 0 ? std::next(it) : now.erase(it);
    }
    for (auto it = before.begin(); it != before.end();) {
      it = it->first.rfind("f:status", 0) == 0 ? std::next(it) : before.erase(it);
    }
  }
  std::set<std::string> changed;
  for (const auto& [k, v] : now) {
    auto b = before.find(k);
    if (b == before.end() || b->second != v) changed.insert(k);
  }
  std::set<std::string> present = Keys(now);
  std::set<std::string> mine;
  if (!applied.is_null()) {
    for (const auto& k : Keys(FlattenObject(applied, status))) {
      if (present.count(k)) mine.insert(k);
    }
  }

  Json entries = Json::array();
  Json old_entries =
      updated.value("metadata", Json::object()).value("managedFields", Json::array());
  bool found = false;
  for (const auto& e : old_entries) {
    if (!e.is_object()) continue;
    std::set<std::string> owned;
    FromFieldsV1(e.value("fieldsV1", Json::object()), "", owned);
    bool same = e.value("manager", "") == write.manager &&
                e.value("operation", "") == write.operation &&
                e.value("subresource", "") == write.subresource;
    std::set<std::string> next;
    Json entry = e;
    if (same) {
      found = true;
      if (applied.is_null()) {
        for (const auto& k : owned) {
          if (present.count(k)) next.insert(k);
        }
        next.insert(changed.begin(), changed.end());
      } else {
        next = mine;
      }
      entry["time"] = Rfc3339(write.time);
    } else {
      for (const auto& k : owned) {
        if (present.count(k) && !changed.count(k) && !mine.count(k)) next.insert(k);
      }
      if (next == owned) {
        entries.push_back(e);
        continue;
      }
    }
    if (next.empty()) continue;
    entry["fieldsV1"] = ToFieldsV1(next);
    entries.push_back(entry);
  }
  if (!found) {
    std::set<std::string> next = applied.is_null() ? changed : mine;
    if (!next.empty()) {
      Json entry = {{"manager", write.manager},        {"operation", write.operation},
                    {"apiVersion", write.api_version}, {"time", Rfc3339(write.time)},
                    {"fieldsType", "FieldsV1"},        {"fieldsV1", ToFieldsV1(next)}};
      if (!write.subresource.empty()) entry["subresource"] = write.subresource;
      entries.push_back(entry);
    }
  }
  Json result = updated;
  if (entries.empty()) {
    result["metadata"].erase("managedFields");
  } else {
    result["metadata"]["managedFields"] = entries;
  }
  return result;
}

}  // namespace reverser::kubesim
