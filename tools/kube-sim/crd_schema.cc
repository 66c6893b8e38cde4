#include "tools/kube-sim/crd_schema.h"

#include <cmath>
#include <set>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "re2/re2.h"
#include "tools/kube-sim/cel.h"

namespace reverser::kubesim {
namespace {

// ---------------------------------------------------------------------------------------------
// Compilation

class Compiler {
 public:
  std::vector<StatusCause> causes;

  // `value_validation`: a node inside allOf/anyOf/oneOf/not, which needs no type.
  std::shared_ptr<const SchemaNode> Compile(const Json& j, const std::string& field, int depth,
                                            bool needs_type, bool value_validation) {
    auto node = std::make_shared<SchemaNode>();
    if (!j.is_object()) {
      causes.push_back(FieldInvalid(field, j, "must be an object"));
      return node;
    }
    if (depth > kMaxSchemaDepth) {
      causes.push_back(FieldForbidden(
          field, absl::StrCat("kube-sim takes schemas up to ", kMaxSchemaDepth, " levels deep")));
      return node;
    }
    auto str = [&](const char* key) -> std::string {
      auto it = j.find(key);
      return it != j.end() && it->is_string() ? it->get<std::string>() : "";
    };
    auto flag = [&](const char* key) {
      auto it = j.find(key);
      return it != j.end() && it->is_boolean() && it->get<bool>();
    };
    auto integer = [&](const char* key) -> std::optional<int64_t> {
      auto it = j.find(key);
      if (it == j.end()) return std::nullopt;
      if (!it->is_number_integer()) {
        causes.push_back(FieldInvalid(absl::StrCat(field, ".", key), *it, "must be an integer"));
        return std::nullopt;
      }
      return it->get<int64_t>();
    };
    auto number = [&](const char* key) -> std::optional<double> {
      auto it = j.find(key);
      if (it == j.end()) return std::nullopt;
      if (!it->is_number()) {
        causes.push_back(FieldInvalid(absl::StrCat(field, ".", key), *it, "must be a number"));
        return std::nullopt;
      }
      return it->get<double>();
    };
    node->type = str("type");
    node->format = str("format");
    node->nullable = flag("nullable");
    node->preserve_unknown_fields = flag("x-kubernetes-preserve-unknown-fields");
    node->int_or_string = flag("x-kubernetes-int-or-string");
    node->embedded_resource = flag("x-kubernetes-embedded-resource");
    if (j.contains("$ref")) {
      causes.push_back(FieldForbidden(absl::StrCat(field, ".$ref"), "$ref is not supported"));
    }
    static const std::set<std::string> kTypes = {"object",  "array",  "string",
                                                 "integer", "number", "boolean"};
    if (!node->type.empty() && !kTypes.count(node->type)) {
      causes.push_back(
          FieldNotSupported(absl::StrCat(field, ".type"), node->type,
                            {"array", "boolean", "integer", "number", "object", "string"}));
    }
    if (needs_type && !value_validation && node->type.empty() && !node->int_or_string &&
        !node->preserve_unknown_fields) {
      causes.push_back(FieldRequired(absl::StrCat(field, ".type"),
                                     "must not be empty for specified object fields"));
    }
    if (j.contains("default")) node->default_value = j["default"];
    if (j.contains("enum")) {
      if (!j["enum"].is_array()) {
        causes.push_back(FieldInvalid(absl::StrCat(field, ".enum"), j["enum"], "must be a list"));
      } else {
        node->enum_values = std::vector<Json>(j["enum"].begin(), j["enum"].end());
      }
    }
    node->min_length = integer("minLength");
    node->max_length = integer("maxLength");
    node->min_items = integer("minItems");
    node->max_items = integer("maxItems");
    node->min_properties = integer("minProperties");
    node->max_properties = integer("maxProperties");
    node->minimum = number("minimum");
    node->maximum = number("maximum");
    node->multiple_of = number("multipleOf");
    node->exclusive_minimum = flag("exclusiveMinimum");
    node->exclusive_maximum = flag("exclusiveMaximum");
    node->unique_items = flag("uniqueItems");
    node->pattern = str("pattern");
    if (!node->pattern.empty()) {
      auto re = std::make_shared<const re2::RE2>(node->pattern, re2::RE2::Quiet);
      if (!re->ok()) {
        causes.push_back(FieldInvalid(absl::StrCat(field, ".pattern"), node->pattern,
                                      absl::StrCat("must be a valid regular expression, but "
                                                   "isn't: ",
                                                   re->error())));
      } else {
        node->pattern_re = std::move(re);
      }
    }
    if (j.contains("required") && j["required"].is_array()) {
      for (const auto& r : j["required"]) {
        if (r.is_string()) node->required.push_back(r.get<std::string>());
      }
    }
    node->list_type = str("x-kubernetes-list-type");
    if (j.contains("x-kubernetes-list-map-keys") && j["x-kubernetes-list-map-keys"].is_array()) {
      for (const auto& k : j["x-kubernetes-list-map-keys"]) {
        if (k.is_string()) node->list_map_keys.push_back(k.get<std::string>());
      }
    }
    if (node->list_type == "map" && node->list_map_keys.empty()) {
      causes.push_back(FieldRequired(absl::StrCat(field, ".x-kubernetes-list-map-keys"),
                                     "must not be empty if x-kubernetes-list-type is map"));
    }
    if (j.contains("properties") && j["properties"].is_object()) {
      for (const auto& [name, child] : j["properties"].items()) {
        node->properties[name] = Compile(child, absl::StrCat(field, ".properties[", name, "]"),
                                         depth + 1, true, value_validation);
      }
    }
    if (j.contains("items")) {
      node->items = Compile(j["items"], field + ".items", depth + 1, true, value_validation);
    }
    if (j.contains("additionalProperties") && j["additionalProperties"].is_object()) {
      node->additional_properties =
          Compile(j["additionalProperties"], field + ".additionalProperties", depth + 1, true,
                  value_validation);
    }
    for (const char* key : {"allOf", "anyOf", "oneOf"}) {
      if (!j.contains(key) || !j[key].is_array()) continue;
      auto& list = std::string(key) == "allOf"   ? node->all_of
                   : std::string(key) == "anyOf" ? node->any_of
                                                 : node->one_of;
      for (size_t i = 0; i < j[key].size(); ++i) {
        list.push_back(
            Compile(j[key][i], absl::StrCat(field, ".", key, "[", i, "]"), depth + 1, false, true));
      }
    }
    if (j.contains("not")) {
      node->not_schema = Compile(j["not"], field + ".not", depth + 1, false, true);
    }
    if (j.contains("x-kubernetes-validations") && j["x-kubernetes-validations"].is_array()) {
      const Json& rules = j["x-kubernetes-validations"];
      for (size_t i = 0; i < rules.size(); ++i) {
        const std::string rule_field = absl::StrCat(field, ".x-kubernetes-validations[", i, "]");
        const Json& r = rules[i];
        if (!r.is_object() || !r.contains("rule") || !r["rule"].is_string()) {
          causes.push_back(FieldRequired(rule_field + ".rule", ""));
          continue;
        }
        SchemaRule rule;
        rule.rule = r["rule"].get<std::string>();
        rule.message = r.value("message", "");
        rule.reason = r.value("reason", "");
        rule.field_path = r.value("fieldPath", "");
        if (r.contains("messageExpression")) {
          causes.push_back(FieldForbidden(rule_field + ".messageExpression",
                                          "messageExpression is not supported by kube-sim"));
        }
        auto program = cel::Program::Compile(rule.rule);
        if (!program.ok()) {
          causes.push_back(
              FieldInvalid(rule_field + ".rule", rule.rule,
                           absl::StrCat("compilation failed: ", program.status().message())));
          continue;
        }
        rule.program = std::move(*program);
        node->rules.push_back(std::move(rule));
      }
    }
    return node;
  }
};

// ---------------------------------------------------------------------------------------------
// Pruning and defaulting

const std::set<std::string>& ObjectMetaFields() {
  static const auto* kFields = new std::set<std::string>{"annotations",
                                                         "creationTimestamp",
                                                         "deletionGracePeriodSeconds",
                                                         "deletionTimestamp",
                                                         "finalizers",
                                                         "generateName",
                                                         "generation",
                                                         "labels",
                                                         "managedFields",
                                                         "name",
                                                         "namespace",
                                                         "ownerReferences",
                                                         "resourceVersion",
                                                         "selfLink",
                                                         "uid"};
  return *kFields;
}

std::string Child(const std::string& path, const std::string& key) {
  return path.empty() ? key : absl::StrCat(path, ".", key);
}

std::string Index(const std::string& path, size_t i) { return absl::StrCat(path, "[", i, "]"); }

void PruneMetadata(Json& meta, const std::string& path, std::vector<std::string>& pruned) {
  if (!meta.is_object()) return;
  for (auto it = meta.begin(); it != meta.end();) {
    if (ObjectMetaFields().count(it.key())) {
      ++it;
    } else {
      pruned.push_back(Child(path, it.key()));
      it = meta.erase(it);
    }
  }
}

void Prune(Json& value, const SchemaNode* node, const std::string& path, bool resource_root,
           std::vector<std::string>& pruned) {
  if (value.is_object()) {
    for (auto it = value.begin(); it != value.end();) {
      const std::string& key = it.key();
      if (resource_root && (key == "apiVersion" || key == "kind")) {
        ++it;
        continue;
      }
      if (resource_root && key == "metadata") {
        PruneMetadata(it.value(), Child(path, key), pruned);
        ++it;
        continue;
      }
      const SchemaNode* child = nullptr;
      if (node) {
        auto prop = node->properties.find(key);
        if (prop != node->properties.end()) {
          child = prop->second.get();
        } else if (node->additional_properties) {
          child = node->additional_properties.get();
        } else if (node->preserve_unknown_fields) {
          ++it;  // kept as is, unknown subtree and all
          continue;
        }
      }
      if (!child) {
        pruned.push_back(Child(path, key));
        it = value.erase(it);
        continue;
      }
      Prune(it.value(), child, Child(path, key), child->embedded_resource, pruned);
      ++it;
    }
    return;
  }
  if (value.is_array() && node && node->items) {
    for (size_t i = 0; i < value.size(); ++i) {
      Prune(value[i], node->items.get(), Index(path, i), node->items->embedded_resource, pruned);
    }
  }
}

bool IsNonNullableNull(const Json& v, const SchemaNode& node) {
  return v.is_null() && !node.nullable;
}

void DropNullsWithoutDefaults(Json& value, const SchemaNode& node) {
  if (value.is_object()) {
    for (auto it = value.begin(); it != value.end();) {
      const SchemaNode* child = nullptr;
      auto prop = node.properties.find(it.key());
      if (prop != node.properties.end()) {
        child = prop->second.get();
      } else if (node.additional_properties) {
        child = node.additional_properties.get();
      }
      if (!child) {
        ++it;
        continue;
      }
      if (IsNonNullableNull(it.value(), *child) && !child->default_value) {
        it = value.erase(it);
        continue;
      }
      DropNullsWithoutDefaults(it.value(), *child);
      ++it;
    }
  } else if (value.is_array() && node.items) {
    for (auto& v : value) DropNullsWithoutDefaults(v, *node.items);
  }
}

void ApplyDefaults(Json& value, const SchemaNode& node) {
  if (value.is_object()) {
    for (const auto& [key, prop] : node.properties) {
      if (!prop->default_value) continue;
      auto it = value.find(key);
      if (it == value.end() || IsNonNullableNull(*it, *prop)) value[key] = *prop->default_value;
    }
    for (auto it = value.begin(); it != value.end(); ++it) {
      auto prop = node.properties.find(it.key());
      if (prop != node.properties.end()) {
        ApplyDefaults(it.value(), *prop->second);
      } else if (node.additional_properties) {
        const SchemaNode& values = *node.additional_properties;
        if (IsNonNullableNull(it.value(), values) && values.default_value) {
          it.value() = *values.default_value;
        }
        ApplyDefaults(it.value(), values);
      }
    }
  } else if (value.is_array() && node.items) {
    for (auto& v : value) {
      if (IsNonNullableNull(v, *node.items) && node.items->default_value) {
        v = *node.items->default_value;
      }
      ApplyDefaults(v, *node.items);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Validation

// Go's %v of a float64: integral values without a fraction, others shortest round-trip.
std::string GoNumber(double d) {
  if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 1e21) {
    return absl::StrCat(static_cast<int64_t>(d));
  }
  return Json(d).dump();
}

// Go's %#v of a map[string]interface{} (list-map duplicate keys).
std::string GoMapLiteral(const Json& keys) {
  std::vector<std::string> parts;
  for (const auto& [k, v] : keys.items()) {
    parts.push_back(absl::StrCat(Json(k).dump(), ":", v.is_string() ? Json(v).dump() : v.dump()));
  }
  return absl::StrCat("map[string]interface {}{", absl::StrJoin(parts, ", "), "}");
}

// The JSON type of `v` as OpenAPI names it.
std::string JsonTypeName(const Json& v) {
  if (v.is_null()) return "null";
  if (v.is_boolean()) return "boolean";
  if (v.is_number_integer()) return "integer";
  if (v.is_number_float()) return "number";
  if (v.is_string()) return "string";
  if (v.is_array()) return "array";
  return "object";
}

bool TypeMatches(const std::string& type, const Json& v) {
  if (type.empty()) return true;
  if (type == "integer") {
    return v.is_number_integer() || (v.is_number_float() && std::isfinite(v.get<double>()) &&
                                     v.get<double>() == std::floor(v.get<double>()));
  }
  if (type == "number") return v.is_number();
  return JsonTypeName(v) == type;
}

bool ValidDateTime(const std::string& s) {
  absl::Time t;
  std::string err;
  return absl::ParseTime(absl::RFC3339_full, s, &t, &err);
}

class Validator {
 public:
  explicit Validator(const SchemaValidationOptions& options) : options_(options) {}

  std::vector<StatusCause> causes;

  // OpenAPI value validation of one node and its subtree (kube-openapi's validator order: type,
  // allOf/anyOf/oneOf/not, string, format, number, array, enum, object).
  void Value(const Json& v, const SchemaNode& node, const std::string& path) {
    const std::string in_body = absl::StrCat(path, " in body");
    if (v.is_null()) {
      if (node.nullable) return;
      if (!node.type.empty()) {
        causes.push_back(FieldTypeInvalid(
            path, "null", absl::StrCat(in_body, " must be of type ", node.type, ": \"null\"")));
      }
      Enum(v, node, path);
      return;
    }
    if (node.int_or_string && !v.is_string() && !TypeMatches("integer", v)) {
      causes.push_back(FieldTypeInvalid(path, JsonTypeName(v),
                                        absl::StrCat(in_body, " must be of type integer,string: ",
                                                     Json(JsonTypeName(v)).dump())));
    } else if (!TypeMatches(node.type, v)) {
      causes.push_back(FieldTypeInvalid(path, JsonTypeName(v),
                                        absl::StrCat(in_body, " must be of type ", node.type, ": ",
                                                     Json(JsonTypeName(v)).dump())));
    }
    Composition(v, node, path);
    if (v.is_string()) {
      const std::string& s = v.get_ref<const std::string&>();
      int64_t runes = cel::CodePointCount(s);
      if (node.max_length && runes > *node.max_length) {
        causes.push_back(FieldTooLong(path, *node.max_length, options_.modern_messages));
      }
      if (node.min_length && runes < *node.min_length) {
        causes.push_back(FieldInvalid(
            path, v,
            absl::StrCat(in_body, " should be at least ", *node.min_length, " chars long")));
      }
      if (node.pattern_re && !re2::RE2::PartialMatch(s, *node.pattern_re)) {
        causes.push_back(
            FieldInvalid(path, v, absl::StrCat(in_body, " should match '", node.pattern, "'")));
      }
      if (node.format == "date-time" && !ValidDateTime(s)) {
        causes.push_back(FieldTypeInvalid(
            path, v, absl::StrCat(in_body, " must be of type date-time: ", Json(s).dump())));
      }
    }
    if (v.is_number()) {
      double d = v.get<double>();
      if (node.multiple_of && *node.multiple_of != 0 && std::fmod(d, *node.multiple_of) != 0) {
        causes.push_back(FieldInvalid(
            path, v,
            absl::StrCat(in_body, " should be a multiple of ", GoNumber(*node.multiple_of))));
      }
      if (node.maximum && (node.exclusive_maximum ? d >= *node.maximum : d > *node.maximum)) {
        causes.push_back(FieldInvalid(
            path, v,
            absl::StrCat(in_body, " should be less than ",
                         node.exclusive_maximum ? "" : "or equal to ", GoNumber(*node.maximum))));
      }
      if (node.minimum && (node.exclusive_minimum ? d <= *node.minimum : d < *node.minimum)) {
        causes.push_back(FieldInvalid(
            path, v,
            absl::StrCat(in_body, " should be greater than ",
                         node.exclusive_minimum ? "" : "or equal to ", GoNumber(*node.minimum))));
      }
    }
    if (v.is_array()) {
      int64_t size = static_cast<int64_t>(v.size());
      if (node.min_items && size < *node.min_items) {
        causes.push_back(FieldInvalid(
            path, size,
            absl::StrCat(in_body, " should have at least ", *node.min_items, " items")));
      }
      if (node.max_items && size > *node.max_items) {
        causes.push_back(FieldTooMany(path, size, *node.max_items));
      }
      if (node.unique_items) {
        for (size_t i = 0; i < v.size(); ++i) {
          bool duplicate = false;
          for (size_t j = 0; j < i && !duplicate; ++j) duplicate = v[i] == v[j];
          if (duplicate) {
            causes.push_back(
                FieldInvalid(path, "", absl::StrCat(in_body, " shouldn't contain duplicates")));
            break;
          }
        }
      }
      if (node.items) {
        for (size_t i = 0; i < v.size(); ++i) Value(v[i], *node.items, Index(path, i));
      }
    }
    Enum(v, node, path);
    if (v.is_object()) {
      int64_t size = static_cast<int64_t>(v.size());
      if (node.max_properties && size > *node.max_properties) {
        causes.push_back(FieldTooMany(path, size, *node.max_properties));
      }
      if (node.min_properties && size < *node.min_properties) {
        causes.push_back(FieldInvalid(
            path, size,
            absl::StrCat(in_body, " should have at least ", *node.min_properties, " properties")));
      }
      for (const std::string& r : node.required) {
        if (!v.contains(r)) causes.push_back(FieldRequired(Child(path, r), ""));
      }
      for (auto it = v.begin(); it != v.end(); ++it) {
        auto prop = node.properties.find(it.key());
        if (prop != node.properties.end()) {
          Value(it.value(), *prop->second, Child(path, it.key()));
        } else if (node.additional_properties) {
          Value(it.value(), *node.additional_properties, Child(path, it.key()));
        }
      }
    }
  }

  // x-kubernetes-list-type set and map invariants.
  void Lists(const Json& v, const SchemaNode& node, const std::string& path) {
    if (v.is_array()) {
      if (node.list_type == "set") {
        for (size_t i = 0; i < v.size(); ++i) {
          for (size_t j = 0; j < i; ++j) {
            if (v[i] == v[j]) {
              causes.push_back(FieldDuplicate(Index(path, i), FieldValueText(v[i])));
              break;
            }
          }
        }
      } else if (node.list_type == "map") {
        std::vector<Json> seen;
        for (size_t i = 0; i < v.size(); ++i) {
          if (!v[i].is_object()) continue;
          Json keys = Json::object();
          bool complete = true;
          for (const std::string& k : node.list_map_keys) {
            if (!v[i].contains(k)) {
              causes.push_back(FieldRequired(Child(Index(path, i), k), ""));
              complete = false;
              continue;
            }
            keys[k] = v[i][k];
          }
          if (!complete) continue;
          bool duplicate = false;
          for (const Json& s : seen) duplicate = duplicate || s == keys;
          if (duplicate) {
            causes.push_back(FieldDuplicate(Index(path, i), GoMapLiteral(keys)));
          } else {
            seen.push_back(keys);
          }
        }
      }
      if (node.items) {
        for (size_t i = 0; i < v.size(); ++i) Lists(v[i], *node.items, Index(path, i));
      }
    } else if (v.is_object()) {
      for (auto it = v.begin(); it != v.end(); ++it) {
        auto prop = node.properties.find(it.key());
        const SchemaNode* child =
            prop != node.properties.end() ? prop->second.get() : node.additional_properties.get();
        if (child) Lists(it.value(), *child, Child(path, it.key()));
      }
    }
  }

  // x-kubernetes-validations, depth first; `old` is the stored value at the same node, when the
  // node correlates (object fields, map values, list-map entries by key).
  void Rules(const Json& v, const SchemaNode& node, const Json* old, const std::string& path) {
    if (v.is_null()) return;
    for (const SchemaRule& rule : node.rules) {
      if (rule.program->uses_old_self() && !old) continue;
      std::string field = path;
      if (!rule.field_path.empty()) {
        field = path + rule.field_path;
        if (path.empty() && !field.empty() && field[0] == '.') field = field.substr(1);
      }
      if (field.empty()) field = "<nil>";
      const std::string trimmed_rule(absl::StripAsciiWhitespace(rule.rule));
      const std::string error_text = rule.message.empty()
                                         ? trimmed_rule
                                         : std::string(absl::StripAsciiWhitespace(rule.message));
      absl::StatusOr<Json> result = rule.program->Evaluate(v, old);
      // Evaluation errors are reported at the rule's node, not at its fieldPath.
      const std::string node_field = path.empty() ? "<nil>" : path;
      const Json type_value = node.type;
      if (!result.ok()) {
        std::string err(result.status().message());
        if (err.rfind("no such overload", 0) == 0) {
          causes.push_back(
              FieldInvalid(node_field, type_value,
                           absl::StrCat("'", err,
                                        "': call arguments did not match a supported operator, "
                                        "function or macro signature for rule: ",
                                        error_text)));
        } else {
          causes.push_back(FieldInvalid(node_field, type_value,
                                        absl::StrCat(err, " evaluating rule: ", error_text)));
        }
        continue;
      }
      if (result->is_boolean() && result->get<bool>()) continue;
      if (!result->is_boolean()) {
        causes.push_back(FieldInvalid(
            field, type_value,
            absl::StrCat("'no such overload': call arguments did not match a supported operator, "
                         "function or macro signature for rule: ",
                         error_text)));
        continue;
      }
      std::string message = rule.message.empty()
                                ? absl::StrCat("failed rule: ", trimmed_rule)
                                : std::string(absl::StripAsciiWhitespace(rule.message));
      StatusCause cause = FieldInvalid(field, type_value, message);
      if (rule.reason == "FieldValueForbidden") {
        cause = FieldForbidden(field, message);
      } else if (rule.reason == "FieldValueRequired") {
        cause = FieldRequired(field, message);
      } else if (rule.reason == "FieldValueDuplicate") {
        cause = FieldDuplicate(field, FieldValueText(type_value));
      }
      causes.push_back(std::move(cause));
    }
    if (v.is_object()) {
      for (auto it = v.begin(); it != v.end(); ++it) {
        auto prop = node.properties.find(it.key());
        const SchemaNode* child =
            prop != node.properties.end() ? prop->second.get() : node.additional_properties.get();
        if (!child) continue;
        const Json* old_child = nullptr;
        if (old && old->is_object()) {
          auto found = old->find(it.key());
          if (found != old->end()) old_child = &*found;
        }
        Rules(it.value(), *child, old_child, Child(path, it.key()));
      }
    } else if (v.is_array() && node.items) {
      for (size_t i = 0; i < v.size(); ++i) {
        const Json* old_item = nullptr;
        if (old && old->is_array() && node.list_type == "map" && v[i].is_object()) {
          for (const auto& candidate : *old) {
            if (!candidate.is_object()) continue;
            bool same = true;
            for (const std::string& k : node.list_map_keys) {
              same = same && candidate.contains(k) && v[i].contains(k) && candidate[k] == v[i][k];
            }
            if (same) {
              old_item = &candidate;
              break;
            }
          }
        } else if (old && old->is_array() && node.list_type == "set") {
          for (const auto& candidate : *old) {
            if (candidate == v[i]) old_item = &candidate;
          }
        }
        Rules(v[i], *node.items, old_item, Index(path, i));
      }
    }
  }

 private:
  void Enum(const Json& v, const SchemaNode& node, const std::string& path) {
    if (!node.enum_values) return;
    for (const Json& allowed : *node.enum_values) {
      if (allowed == v) return;
    }
    std::vector<std::string> values;
    for (const Json& allowed : *node.enum_values) {
      values.push_back(allowed.is_string() ? allowed.get<std::string>() : allowed.dump());
    }
    causes.push_back(FieldNotSupported(path, v, values));
  }

  // allOf / anyOf / oneOf / not: the subschemas' errors, then the composite error, which
  // kube-apiserver reports without a field path ("<nil>").
  void Composition(const Json& v, const SchemaNode& node, const std::string& path) {
    auto run = [&](const SchemaNode& sub) {
      Validator inner(options_);
      inner.Value(v, sub, path);
      return inner.causes;
    };
    auto composite = [&](const std::string& text) {
      causes.push_back(FieldInvalid("<nil>", "", text));
    };
    if (!node.all_of.empty()) {
      size_t valid = 0;
      for (const auto& sub : node.all_of) {
        std::vector<StatusCause> errs = run(*sub);
        if (errs.empty()) ++valid;
        causes.insert(causes.end(), errs.begin(), errs.end());
      }
      if (valid != node.all_of.size()) {
        composite(absl::StrCat(path, " must validate all the schemas (allOf)",
                               valid == 0 ? ". None validated" : ""));
      }
    }
    if (!node.any_of.empty()) {
      std::vector<StatusCause> all;
      bool any = false;
      for (const auto& sub : node.any_of) {
        std::vector<StatusCause> errs = run(*sub);
        if (errs.empty()) any = true;
        all.insert(all.end(), errs.begin(), errs.end());
      }
      if (!any) {
        causes.insert(causes.end(), all.begin(), all.end());
        composite(absl::StrCat(path, " must validate at least one schema (anyOf)"));
      }
    }
    if (!node.one_of.empty()) {
      size_t valid = 0;
      std::vector<StatusCause> all;
      for (const auto& sub : node.one_of) {
        std::vector<StatusCause> errs = run(*sub);
        if (errs.empty()) ++valid;
        all.insert(all.end(), errs.begin(), errs.end());
      }
      if (valid == 0) {
        causes.insert(causes.end(), all.begin(), all.end());
        composite(absl::StrCat(path,
                               " must validate one and only one schema (oneOf). Found none "
                               "valid"));
      } else if (valid > 1) {
        composite(absl::StrCat(path, " must validate one and only one schema (oneOf). Found ",
                               valid, " valid alternatives"));
      }
    }
    if (node.not_schema && run(*node.not_schema).empty()) {
      composite(absl::StrCat(path, " must not validate the schema (not)"));
    }
  }

  SchemaValidationOptions options_;
};

}  // namespace

std::variant<std::shared_ptr<const CrdSchema>, std::vector<StatusCause>> CrdSchema::Compile(
    const Json& open_api_v3_schema, const std::string& field) {
  Compiler compiler;
  auto root = compiler.Compile(open_api_v3_schema, field, 0, true, false);
  if (compiler.causes.empty() && root->type != "object") {
    compiler.causes.push_back(
        root->type.empty()
            ? FieldRequired(field + ".type", "must be object at the root")
            : FieldInvalid(field + ".type", root->type, "must be object at the root"));
  }
  if (!compiler.causes.empty()) return compiler.causes;
  auto schema = std::shared_ptr<CrdSchema>(new CrdSchema());
  schema->root_ = std::move(root);
  return std::shared_ptr<const CrdSchema>(std::move(schema));
}

std::vector<std::string> CrdSchema::Prune(Json& object) const {
  std::vector<std::string> pruned;
  kubesim::Prune(object, root_.get(), "", true, pruned);
  return pruned;
}

void CrdSchema::Default(Json& object) const {
  DropNullsWithoutDefaults(object, *root_);
  ApplyDefaults(object, *root_);
}

std::vector<StatusCause> CrdSchema::Validate(const Json& object, const Json* old,
                                             const SchemaValidationOptions& options) const {
  Validator validator(options);
  validator.Value(object, *root_, "");
  validator.Lists(object, *root_, "");
  bool blocking = false;
  for (const auto& c : validator.causes) {
    blocking =
        blocking || c.reason == "FieldValueTypeInvalid" || c.reason == "FieldValueNotSupported";
  }
  if (blocking) {
    // Rules assume well-typed values (and enum members): kube-apiserver skips them, saying so.
    validator.causes.push_back(
        FieldInvalid("<nil>", "null",
                     "some validation rules were not checked because the object was invalid; "
                     "correct the existing errors to complete validation"));
  } else {
    validator.Rules(object, *root_, old, "");
  }
  return validator.causes;
}

}  // namespace reverser::kubesim
