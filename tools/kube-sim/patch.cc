#include "tools/kube-sim/patch.h"

#include <set>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace reverser::kubesim {

Json ApplyMergePatch(const Json& target, const Json& patch) {
  if (!patch.is_object()) return patch;
  Json result = target.is_object() ? target : Json::object();
  for (const auto& [key, value] : patch.items()) {
    if (value.is_null()) {
      result.erase(key);
    } else {
      result[key] = ApplyMergePatch(result.contains(key) ? result[key] : Json(nullptr), value);
    }
  }
  return result;
}

namespace {

// RFC 6901 pointer parsing with the apiserver-style error on bad paths.
ApiOr<std::vector<std::string>> ParsePointer(const std::string& path) {
  std::vector<std::string> parts;
  if (path.empty()) return parts;
  if (path[0] != '/') return BadRequest(absl::StrCat("json patch: invalid path ", path));
  for (absl::string_view p : absl::StrSplit(absl::string_view(path).substr(1), '/')) {
    parts.push_back(absl::StrReplaceAll(p, {{"~1", "/"}, {"~0", "~"}}));
  }
  return parts;
}

ApiError PatchFailure(const std::string& what) {
  // The apiserver wraps jsonpatch failures in a 422 with reason Invalid and the library's text.
  ApiError e;
  e.code = 422;
  e.reason = "Invalid";
  e.message = what;
  return e;
}

// Navigates to the parent container of the pointer target.
ApiOr<Json*> Parent(Json& doc, const std::vector<std::string>& parts) {
  Json* cur = &doc;
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    const std::string& p = parts[i];
    if (cur->is_object()) {
      if (!cur->contains(p)) return PatchFailure(absl::StrCat("doc is missing path: /", p));
      cur = &(*cur)[p];
    } else if (cur->is_array()) {
      size_t idx;
      if (!absl::SimpleAtoi(p, &idx) || idx >= cur->size()) {
        return PatchFailure(absl::StrCat("Unable to access invalid index: ", p));
      }
      cur = &(*cur)[idx];
    } else {
      return PatchFailure(absl::StrCat("doc is missing path: /", p));
    }
  }
  return cur;
}

ApiOr<Json> GetAt(const Json& doc, const std::string& path) {
  ApiOr<std::vector<std::string>> parts = ParsePointer(path);
  if (!parts.ok()) return parts.error();
  const Json* cur = &doc;
  for (const auto& p : *parts) {
    if (cur->is_object() && cur->contains(p)) {
      cur = &(*cur)[p];
    } else if (size_t idx; cur->is_array() && absl::SimpleAtoi(p, &idx) && idx < cur->size()) {
      cur = &(*cur)[idx];
    } else {
      return PatchFailure(absl::StrCat("doc is missing path: ", path));
    }
  }
  return *cur;
}

ApiOr<bool> RemoveAt(Json& doc, const std::string& path) {
  ApiOr<std::vector<std::string>> parts = ParsePointer(path);
  if (!parts.ok()) return parts.error();
  if (parts->empty()) return PatchFailure("cannot remove the document root");
  ApiOr<Json*> parent = Parent(doc, *parts);
  if (!parent.ok()) return parent.error();
  Json& c = **parent;
  const std::string& last = parts->back();
  if (c.is_object()) {
    if (!c.contains(last)) {
      return PatchFailure(
          absl::StrCat("Unable to remove nonexistent key: ", last, ": missing value"));
    }
    c.erase(last);
  } else if (size_t idx; c.is_array() && absl::SimpleAtoi(last, &idx) && idx < c.size()) {
    c.erase(idx);
  } else {
    return PatchFailure(
        absl::StrCat("Unable to remove nonexistent key: ", last, ": missing value"));
  }
  return true;
}

ApiOr<bool> AddAt(Json& doc, const std::string& path, const Json& value, bool replace) {
  ApiOr<std::vector<std::string>> parts = ParsePointer(path);
  if (!parts.ok()) return parts.error();
  if (parts->empty()) {
    doc = value;
    return true;
  }
  ApiOr<Json*> parent = Parent(doc, *parts);
  if (!parent.ok()) return parent.error();
  Json& c = **parent;
  const std::string& last = parts->back();
  if (c.is_object()) {
    if (replace && !c.contains(last)) {
      return PatchFailure(absl::StrCat(
          "replace operation does not apply: doc is missing key: ", path, ": missing value"));
    }
    c[last] = value;
  } else if (c.is_array()) {
    if (last == "-" && !replace) {
      c.push_back(value);
    } else if (size_t idx;
               absl::SimpleAtoi(last, &idx) && idx <= c.size() && (!replace || idx < c.size())) {
      if (replace) {
        c[idx] = value;
      } else {
        c.insert(c.begin() + idx, value);
      }
    } else {
      return PatchFailure(absl::StrCat("Unable to access invalid index: ", last));
    }
  } else {
    return PatchFailure(absl::StrCat("doc is missing path: ", path, ": missing value"));
  }
  return true;
}

}  // namespace

ApiOr<Json> ApplyJsonPatch(const Json& target, const Json& operations) {
  if (!operations.is_array()) {
    return BadRequest("json: cannot unmarshal object into Go value of type jsonpatch.Patch");
  }
  Json doc = target;
  for (const auto& op : operations) {
    if (!op.is_object() || !op.contains("op") || !op["op"].is_string()) {
      return PatchFailure("Unexpected kind: unknown");
    }
    std::string kind = op["op"];
    std::string path = op.value("path", "");
    ApiOr<bool> r = true;
    if (kind == "add" || kind == "replace") {
      if (!op.contains("value"))
        return PatchFailure(absl::StrCat(kind, " operation missing value"));
      r = AddAt(doc, path, op["value"], kind == "replace");
    } else if (kind == "remove") {
      r = RemoveAt(doc, path);
    } else if (kind == "move" || kind == "copy") {
      ApiOr<Json> v = GetAt(doc, op.value("from", ""));
      if (!v.ok()) return v.error();
      if (kind == "move") {
        r = RemoveAt(doc, op.value("from", ""));
        if (!r.ok()) return r.error();
      }
      r = AddAt(doc, path, *v, false);
    } else if (kind == "test") {
      ApiOr<Json> v = GetAt(doc, path);
      if (!v.ok()) return v.error();
      if (*v != op.value("value", Json(nullptr))) {
        return PatchFailure(absl::StrCat("testing value ", path, " failed: test failed"));
      }
    } else {
      return PatchFailure(absl::StrCat("Unexpected kind: ", kind));
    }
    if (!r.ok()) return r.error();
  }
  return doc;
}

std::string MergeKeyFor(const std::string& field, const Json& sample) {
  static const std::map<std::string, std::string> kKeys = {
      {"containers", "name"},
      {"initContainers", "name"},
      {"ephemeralContainers", "name"},
      {"volumes", "name"},
      {"env", "name"},
      {"volumeMounts", "mountPath"},
      {"volumeDevices", "devicePath"},
      {"imagePullSecrets", "name"},
      {"ownerReferences", "uid"},
      {"conditions", "type"},
      {"hostAliases", "ip"},
      {"topologySpreadConstraints", "topologyKey"},
      {"secrets", "name"},
      {"resourceClaims", "name"}};
  if (field == "ports") {
    return sample.is_object() && sample.contains("containerPort") ? "containerPort" : "port";
  }
  auto it = kKeys.find(field);
  return it == kKeys.end() ? "" : it->second;
}

namespace {

bool IsPrimitiveSetList(const std::string& field) {
  return field == "finalizers";  // metadata.finalizers: patchStrategy=merge on a []string
}

Json SmpMerge(const Json& target, const Json& patch);

Json MergeList(const std::string& field, const Json& target, const Json& patch) {
  if (!target.is_array()) {
    // Strip directives from a fresh list.
    Json out = Json::array();
    for (const auto& e : patch) {
      if (e.is_object() && e.value("$patch", "") == "delete") continue;
      out.push_back(e.is_object() ? SmpMerge(Json::object(), e) : e);
    }
    return out;
  }
  if (IsPrimitiveSetList(field)) {
    Json out = target;
    for (const auto& e : patch) {
      if (std::find(out.begin(), out.end(), e) == out.end()) out.push_back(e);
    }
    return out;
  }
  Json sample = patch.empty() ? (target.empty() ? Json() : target[0]) : patch[0];
  std::string key = MergeKeyFor(field, sample);
  if (key.empty()) {
    Json out = Json::array();
    for (const auto& e : patch) out.push_back(e.is_object() ? SmpMerge(Json::object(), e) : e);
    return out;
  }
  Json out = target;
  for (const auto& e : patch) {
    if (e.is_object() && e.value("$patch", "") == "replace") return MergeList(field, Json(), patch);
  }
  for (const auto& e : patch) {
    if (!e.is_object() || !e.contains(key)) {
      out.push_back(e);
      continue;
    }
    auto found = std::find_if(out.begin(), out.end(), [&](const Json& t) {
      return t.is_object() && t.contains(key) && t[key] == e[key];
    });
    bool remove = e.value("$patch", "") == "delete";
    if (found == out.end()) {
      if (!remove) out.push_back(SmpMerge(Json::object(), e));
    } else if (remove) {
      out.erase(found);
    } else {
      *found = SmpMerge(*found, e);
    }
  }
  return out;
}

Json SmpMerge(const Json& target, const Json& patch) {
  if (!patch.is_object()) return patch;
  Json result = target.is_object() ? target : Json::object();
  if (patch.value("$patch", "") == "replace") {
    Json copy = patch;
    copy.erase("$patch");
    return SmpMerge(Json::object(), copy);
  }
  if (patch.value("$patch", "") == "delete") return Json(nullptr);
  if (patch.contains("$retainKeys") && patch["$retainKeys"].is_array()) {
    std::set<std::string> keep;
    for (const auto& k : patch["$retainKeys"]) {
      if (k.is_string()) keep.insert(k.get<std::string>());
    }
    for (auto it = result.begin(); it != result.end();) {
      if (!keep.count(it.key())) {
        it = result.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (const auto& [key, value] : patch.items()) {
    if (absl::StartsWith(key, "$setElementOrder/") || key == "$retainKeys" || key == "$patch") {
      continue;
    }
    if (absl::StartsWith(key, "$deleteFromPrimitiveList/")) {
      std::string field(absl::StripPrefix(key, "$deleteFromPrimitiveList/"));
      if (result.contains(field) && result[field].is_array() && value.is_array()) {
        Json kept = Json::array();
        for (const auto& e : result[field]) {
          if (std::find(value.begin(), value.end(), e) == value.end()) kept.push_back(e);
        }
        result[field] = kept;
      }
      continue;
    }
    if (value.is_null()) {
      result.erase(key);
    } else if (value.is_array()) {
      result[key] = MergeList(key, result.contains(key) ? result[key] : Json(), value);
    } else if (value.is_object()) {
      Json merged = SmpMerge(result.contains(key) ? result[key] : Json(), value);
      if (merged.is_null()) {
        result.erase(key);
      } else {
        result[key] = merged;
      }
    } else {
      result[key] = value;
    }
  }
  return result;
}

}  // namespace

ApiOr<Json> ApplyStrategicMergePatch(const Json& target, const Json& patch) {
  if (!patch.is_object()) {
    return BadRequest("json: cannot unmarshal array into Go value of type map[string]interface {}");
  }
  return SmpMerge(target, patch);
}

}  // namespace reverser::kubesim
