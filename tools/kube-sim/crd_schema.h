#pragma once

// A CRD version's structural schema (spec.versions[].schema.openAPIV3Schema) and what
// kube-apiserver does with it for every custom resource write, in its order: prune fields the
// schema does not declare (reporting them for fieldValidation Strict/Warn), drop non-nullable
// nulls, apply defaults, then validate (OpenAPI value validations with the apiextensions error
// texts, list-type map/set uniqueness, and x-kubernetes-validations rules in kube-sim's CEL
// subset, transition rules against the stored object).

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "nlohmann/json.hpp"
#include "tools/kube-sim/api_error.h"

namespace re2 {
class RE2;
}

namespace reverser::kubesim {

namespace cel {
class Program;
}

// Deeper schemas are refused on CRD creation (kube-apiserver has no such bound; kube-sim's
// recursive walks need one).
inline constexpr int kMaxSchemaDepth = 64;

struct SchemaRule {
  std::string rule;
  std::string message;
  std::string reason;      // "" = FieldValueInvalid
  std::string field_path;  // ".a.b": reported below the node
  std::shared_ptr<const cel::Program> program;
};

struct SchemaNode {
  std::string type;  // "" = any (int-or-string, preserve-unknown-fields)
  std::string format;
  bool nullable = false;
  bool preserve_unknown_fields = false;
  bool int_or_string = false;
  bool embedded_resource = false;
  std::optional<Json> default_value;
  std::optional<std::vector<Json>> enum_values;
  std::optional<int64_t> min_length, max_length, min_items, max_items, min_properties,
      max_properties;
  std::optional<double> minimum, maximum, multiple_of;
  bool exclusive_minimum = false, exclusive_maximum = false;
  bool unique_items = false;
  std::string pattern;
  std::shared_ptr<const re2::RE2> pattern_re;
  std::vector<std::string> required;
  std::map<std::string, std::shared_ptr<const SchemaNode>> properties;
  std::shared_ptr<const SchemaNode> items;
  std::shared_ptr<const SchemaNode> additional_properties;
  std::vector<std::shared_ptr<const SchemaNode>> all_of, any_of, one_of;
  std::shared_ptr<const SchemaNode> not_schema;
  std::string list_type;  // "", "atomic", "set", "map"
  std::vector<std::string> list_map_keys;
  std::vector<SchemaRule> rules;
};

struct SchemaValidationOptions {
  // Wording of kube-apiserver >= 1.32 ("Too long: may not be more than N bytes") or older
  // ("may not be longer than N").
  bool modern_messages = true;
};

class CrdSchema {
 public:
  // Compiles openAPIV3Schema; `field` is its path in the CRD for error causes
  // ("spec.versions[0].schema.openAPIV3Schema"). Errors: the CRD is invalid (422 causes).
  static std::variant<std::shared_ptr<const CrdSchema>, std::vector<StatusCause>> Compile(
      const Json& open_api_v3_schema, const std::string& field);

  // Removes fields the schema does not declare; returns their paths ("spec.foo",
  // "spec.rules[0].bar") in document order. apiVersion, kind and metadata are kept.
  std::vector<std::string> Prune(Json& object) const;
  // Drops non-nullable nulls, then fills in defaults (kube-apiserver's order).
  void Default(Json& object) const;
  // Field errors of `object`; `old` is the stored object on updates (transition rules).
  std::vector<StatusCause> Validate(const Json& object, const Json* old,
                                    const SchemaValidationOptions& options) const;

  const SchemaNode& root() const { return *root_; }

 private:
  std::shared_ptr<const SchemaNode> root_;
};

}  // namespace reverser::kubesim
