// CRD schema handling (prune, default, validate) and the CEL subset, with kube-apiserver's
// error texts.

#include "tools/kube-sim/crd_schema.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "tools/kube-sim/cel.h"

namespace reverser::kubesim {
namespace {

// ----- CEL

Json Eval(const std::string& rule, const Json& self, const Json* old = nullptr) {
  auto program = cel::Program::Compile(rule);
  EXPECT_TRUE(program.ok()) << rule << ": " << program.status();
  if (!program.ok()) return nullptr;
  auto v = (*program)->Evaluate(self, old);
  EXPECT_TRUE(v.ok()) << rule << ": " << v.status();
  return v.ok() ? *v : Json(nullptr);
}

std::string EvalError(const std::string& rule, const Json& self) {
  auto program = cel::Program::Compile(rule);
  EXPECT_TRUE(program.ok()) << rule << ": " << program.status();
  if (!program.ok()) return "";
  auto v = (*program)->Evaluate(self, nullptr);
  EXPECT_FALSE(v.ok()) << rule << " = " << v->dump();
  return v.ok() ? "" : std::string(v.status().message());
}

std::string CompileError(const std::string& rule) {
  auto program = cel::Program::Compile(rule);
  EXPECT_FALSE(program.ok()) << rule;
  return program.ok() ? "" : std::string(program.status().message());
}

TEST(CelTest, EqualityOfFieldsAndWholeValues) {
  Json self = Json::parse(R"({"url":"a","ref":{"name":"x","kind":"K"}})");
  Json old = Json::parse(R"({"url":"a","ref":{"kind":"K","name":"y"}})");
  EXPECT_EQ(Eval("self.url == oldSelf.url", self, &old), true);
  EXPECT_EQ(Eval("self.ref == oldSelf.ref", self, &old), false);
  EXPECT_EQ(Eval("self == oldSelf", self, &self), true);
  EXPECT_EQ(Eval("self != oldSelf", self, &old), true);
  EXPECT_TRUE(cel::Program::Compile("self == oldSelf").value()->uses_old_self());
  EXPECT_FALSE(cel::Program::Compile("self.url == 'a'").value()->uses_old_self());
}

TEST(CelTest, OperatorsFunctionsAndMacros) {
  Json self = Json::parse(R"({"n":3,"s":"héllo","l":[1,2,3],"m":{"a":1},"d":1.5})");
  EXPECT_EQ(Eval("self.n + 2 * 3 == 9 && self.n % 2 == 1", self), true);
  EXPECT_EQ(Eval("self.n > 2 ? 'big' : 'small'", self), "big");
  EXPECT_EQ(Eval("size(self.s) == 5 && self.s.size() == 5", self), true);
  EXPECT_EQ(Eval("self.s.startsWith('hé') && self.s.endsWith('lo') && self.s.contains('ll')", self),
            true);
  EXPECT_EQ(Eval("self.s.matches('^h.llo$')", self), true);
  EXPECT_EQ(Eval("2 in self.l && 'a' in self.m && !('b' in self.m)", self), true);
  EXPECT_EQ(Eval("has(self.m.a) && !has(self.m.b)", self), true);
  EXPECT_EQ(Eval("self.l.all(x, x > 0) && self.l.exists(x, x == 2)", self), true);
  EXPECT_EQ(Eval("self.l.exists_one(x, x > 1)", self), false);
  EXPECT_EQ(Eval("self.m.all(k, k == 'a')", self), true);
  EXPECT_EQ(Eval("self.l[1] == 2 && self.m['a'] == 1", self), true);
  EXPECT_EQ(Eval("self.d < 2.0 && -self.n == -3", self), true);
  EXPECT_EQ(Eval("'a' + \"b\" == r'ab' && [1] + [2] == [1, 2]", self), true);
  EXPECT_EQ(Eval("'\\x41\\u00e9\\n' == 'A\u00e9\\n'", self), true);
  EXPECT_EQ(Eval("0x10 == 16 && 3u == 3", self), true);
}

TEST(CelTest, ErrorsFollowCelGo) {
  Json self = Json::parse(R"({"n":3,"l":[1]})");
  EXPECT_EQ(EvalError("self.missing == 1", self), "no such key: missing");
  EXPECT_EQ(EvalError("self.l[4] == 1", self), "index out of bounds: 4");
  EXPECT_EQ(EvalError("self.n / 0 == 1", self), "division by zero");
  EXPECT_EQ(EvalError("self.n + 'a' == 1", self), "no such overload");
  EXPECT_EQ(EvalError("self.n.x == 1", self), "type 'int' does not support field selection");
  // && and || absorb an error when the other side decides.
  EXPECT_EQ(Eval("self.missing == 1 || true", self), true);
  EXPECT_EQ(Eval("false && self.missing == 1", self), false);
  EXPECT_EQ(EvalError("true && self.missing == 1", self), "no such key: missing");
}

TEST(CelTest, CompileErrorsRefuseWhatTheSubsetLacks) {
  EXPECT_EQ(CompileError("other == 1"),
            "ERROR: <input>:1:1: undeclared reference to 'other' (in container '')");
  EXPECT_EQ(CompileError("self.a == "),
            "ERROR: <input>:1:11: Syntax error: mismatched input '<EOF>'");
  EXPECT_EQ(CompileError("self # 1"),
            "ERROR: <input>:1:6: Syntax error: token recognition error at: '#'");
  EXPECT_NE(CompileError("{'a': 1} == self").find("map literals are not supported"),
            std::string::npos);
  EXPECT_NE(CompileError("self.lowerAscii() == 'a'").find("undeclared reference to 'lowerAscii'"),
            std::string::npos);
  EXPECT_NE(CompileError("has(self)").find("invalid argument to has() macro"), std::string::npos);
  EXPECT_NE(CompileError("x.all(y, y) == true").find("undeclared reference to 'x'"),
            std::string::npos);
  // Oversized and deeply nested rules are refused, not overflowed.
  std::string chain = "self.a";
  for (int i = 0; i < 5000; ++i) chain += " + 1";
  EXPECT_NE(CompileError(chain).find("more than 2000 terms"), std::string::npos);
  EXPECT_NE(
      CompileError(std::string(5000, '(') + "1" + std::string(5000, ')')).find("nests too deeply"),
      std::string::npos);
  EXPECT_NE(CompileError(std::string(5000, '!') + "true").find("nests too deeply"),
            std::string::npos);
}

// ----- Schema

const char* kSchema = R"({
  "type": "object",
  "required": ["spec"],
  "properties": {
    "apiVersion": {"type": "string"},
    "kind": {"type": "string"},
    "metadata": {"type": "object"},
    "spec": {
      "type": "object",
      "required": ["url", "targetRef"],
      "x-kubernetes-validations": [
        {"rule": "self.url == oldSelf.url", "message": "spec.url is immutable"}],
      "properties": {
        "url": {"type": "string", "minLength": 1},
        "name": {"type": "string", "maxLength": 3, "pattern": "^[a-z]*$"},
        "count": {"type": "integer", "format": "int32", "minimum": 0, "maximum": 300},
        "when": {"type": "string", "format": "date-time"},
        "flag": {"type": "boolean", "default": false},
        "targetRef": {
          "type": "object",
          "required": ["name"],
          "properties": {
            "group": {"type": "string", "default": "example.com", "enum": ["example.com"]},
            "name": {"type": "string", "minLength": 1}
          }
        },
        "items": {"type": "array", "minItems": 1, "maxItems": 2,
                  "items": {"type": "string", "minLength": 1}},
        "scope": {"type": "string",
                  "allOf": [{"enum": ["Cluster", "Namespaced"]}, {"enum": ["Cluster", "Namespaced"]}]},
        "byType": {"type": "object", "additionalProperties": {"type": "string"}},
        "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                 "properties": {"known": {"type": "object", "properties": {"a": {"type": "string"}}}}}
      }
    },
    "status": {
      "type": "object",
      "properties": {
        "conditions": {
          "type": "array",
          "x-kubernetes-list-type": "map",
          "x-kubernetes-list-map-keys": ["type"],
          "items": {"type": "object", "required": ["type", "status"],
                    "properties": {"type": {"type": "string"},
                                   "status": {"type": "string", "enum": ["True", "False"]}}}
        }
      }
    }
  }
})";

std::shared_ptr<const CrdSchema> TestSchema() {
  auto compiled =
      CrdSchema::Compile(Json::parse(kSchema), "spec.versions[0].schema.openAPIV3Schema");
  auto* schema = std::get_if<std::shared_ptr<const CrdSchema>>(&compiled);
  EXPECT_NE(schema, nullptr);
  return schema ? *schema : nullptr;
}

std::vector<std::string> Messages(const std::vector<StatusCause>& causes) {
  std::vector<std::string> out;
  for (const auto& c : causes) out.push_back(absl::StrCat(c.field, ": ", c.message));
  return out;
}

Json Valid() {
  return Json::parse(R"({"apiVersion":"example.com/v1","kind":"Widget",
    "metadata":{"name":"w"},"spec":{"url":"u","targetRef":{"name":"t"}}})");
}

std::vector<std::string> Errors(Json object, const Json* old = nullptr, bool modern = true) {
  auto schema = TestSchema();
  schema->Prune(object);
  schema->Default(object);
  return Messages(schema->Validate(object, old, {.modern_messages = modern}));
}

TEST(CrdSchemaTest, PruneReportsAndDropsUndeclaredFields) {
  auto schema = TestSchema();
  Json o = Valid();
  o["metadata"]["bogus"] = 1;
  o["spec"]["extra"] = {{"deep", 1}};
  o["spec"]["targetRef"]["kind"] = "Secret";
  o["spec"]["byType"] = {{"v1/configmaps", "x"}};
  o["spec"]["free"] = {{"anything", {{"goes", 1}}}, {"known", {{"a", "x"}, {"b", "y"}}}};
  o["status"] = {{"conditions", {{{"type", "Ready"}, {"status", "True"}, {"x", 1}}}}};
  EXPECT_EQ(schema->Prune(o),
            (std::vector<std::string>{"metadata.bogus", "spec.extra", "spec.free.known.b",
                                      "spec.targetRef.kind", "status.conditions[0].x"}));
  EXPECT_FALSE(o["spec"].contains("extra"));
  EXPECT_EQ(o["spec"]["byType"]["v1/configmaps"], "x");
  EXPECT_EQ(o["spec"]["free"]["anything"]["goes"], 1);
  EXPECT_EQ(o["metadata"], Json({{"name", "w"}}));
}

TEST(CrdSchemaTest, DefaultsFillAbsentFieldsAndNonNullableNulls) {
  auto schema = TestSchema();
  Json o = Valid();
  o["spec"]["flag"] = nullptr;
  o["spec"]["name"] = nullptr;  // no default: dropped
  schema->Default(o);
  EXPECT_EQ(o["spec"]["flag"], false);
  EXPECT_FALSE(o["spec"].contains("name"));
  EXPECT_EQ(o["spec"]["targetRef"]["group"], "example.com");
  // Defaults apply only inside objects that exist.
  Json bare = {{"spec", Json::object()}};
  schema->Default(bare);
  EXPECT_FALSE(bare["spec"].contains("targetRef"));
  EXPECT_TRUE(Errors(Valid()).empty()) << absl::StrJoin(Errors(Valid()), "\n");
}

TEST(CrdSchemaTest, ValueValidationsHaveApiextensionsTexts) {
  Json o = Valid();
  o["spec"]["url"] = "";
  o["spec"]["name"] = "ABCD";
  o["spec"]["count"] = 301;
  o["spec"]["when"] = "yesterday";
  o["spec"]["targetRef"]["group"] = "other.io";
  o["spec"]["items"] = Json::array();
  EXPECT_EQ(Errors(o),
            (std::vector<std::string>{
                "spec.count: Invalid value: 301: spec.count in body should be less than or equal "
                "to 300",
                "spec.items: Invalid value: 0: spec.items in body should have at least 1 items",
                "spec.name: Too long: may not be more than 3 bytes",
                "spec.name: Invalid value: \"ABCD\": spec.name in body should match '^[a-z]*$'",
                "spec.targetRef.group: Unsupported value: \"other.io\": supported values: "
                "\"example.com\"",
                "spec.url: Invalid value: \"\": spec.url in body should be at least 1 chars long",
                "spec.when: Invalid value: \"yesterday\": spec.when in body must be of type "
                "date-time: \"yesterday\"",
                "<nil>: Invalid value: \"null\": some validation rules were not checked because "
                "the object was invalid; correct the existing errors to complete validation"}));
  Json legacy = Valid();
  legacy["spec"]["name"] = "abcd";
  EXPECT_EQ(Errors(legacy, nullptr, false),
            (std::vector<std::string>{"spec.name: Too long: may not be longer than 3"}));
}

TEST(CrdSchemaTest, RequiredTypesItemsAndAllOf) {
  Json o = Json::parse(R"({"spec":{"count":"x","items":["a","","c"],"scope":"Sometimes"}})");
  EXPECT_EQ(Errors(o),
            (std::vector<std::string>{
                "spec.url: Required value", "spec.targetRef: Required value",
                "spec.count: Invalid value: \"string\": spec.count in body must be of type "
                "integer: \"string\"",
                "spec.items: Too many: 3: must have at most 2 items",
                "spec.items[1]: Invalid value: \"\": spec.items[1] in body should be at least 1 "
                "chars long",
                "spec.scope: Unsupported value: \"Sometimes\": supported values: \"Cluster\", "
                "\"Namespaced\"",
                "spec.scope: Unsupported value: \"Sometimes\": supported values: \"Cluster\", "
                "\"Namespaced\"",
                "<nil>: Invalid value: \"\": spec.scope must validate all the schemas (allOf). "
                "None validated",

                "<nil>: Invalid value: \"null\": some validation rules were not checked because "
                "the object was invalid; correct the existing errors to complete validation"}));
  EXPECT_EQ(Errors(Json::parse(R"({"metadata":{"name":"w"}})")),
            (std::vector<std::string>{"spec: Required value"}));
}

TEST(CrdSchemaTest, ListMapKeysAreUnique) {
  Json o = Valid();
  o["status"]["conditions"] = Json::parse(
      R"([{"type":"Ready","status":"True"},{"type":"Ready","status":"False"},{"status":"True"}])");
  EXPECT_EQ(
      Errors(o),
      (std::vector<std::string>{
          "status.conditions[2].type: Required value",
          "status.conditions[1]: Duplicate value: map[string]interface {}{\"type\":\"Ready\"}",
          "status.conditions[2].type: Required value"}));
}

TEST(CrdSchemaTest, TransitionRulesRunOnUpdatesOnly) {
  Json stored = Valid();
  Json changed = Valid();
  changed["spec"]["url"] = "v";
  EXPECT_TRUE(Errors(changed).empty());  // create: no oldSelf
  EXPECT_EQ(Errors(changed, &stored),
            (std::vector<std::string>{"spec: Invalid value: \"object\": spec.url is immutable"}));
  EXPECT_TRUE(Errors(stored, &stored).empty());
}

TEST(CrdSchemaTest, RuleWithoutMessageAndEvaluationErrors) {
  auto compiled = CrdSchema::Compile(Json::parse(R"({"type":"object","properties":{
      "spec":{"type":"object","x-kubernetes-validations":[
        {"rule":"self.a == 'x'"},
        {"rule":"self.a.size() > 0", "message":"a must not be empty"},
        {"rule":"self.a == 'y'", "message":"a is y", "reason":"FieldValueForbidden",
         "fieldPath":".a"}],
        "properties":{"a":{"type":"string"},"b":{"type":"string"}}}}})"),
                                     "s");
  auto schema = std::get<std::shared_ptr<const CrdSchema>>(compiled);
  EXPECT_EQ(Messages(schema->Validate(Json::parse(R"({"spec":{"a":"z"}})"), nullptr, {})),
            (std::vector<std::string>{"spec: Invalid value: \"object\": failed rule: self.a == 'x'",
                                      "spec.a: Forbidden: a is y"}));
  EXPECT_EQ(Messages(schema->Validate(Json::parse(R"({"spec":{"b":"z"}})"), nullptr, {})),
            (std::vector<std::string>{
                "spec: Invalid value: \"object\": no such key: a evaluating rule: self.a == 'x'",
                "spec: Invalid value: \"object\": no such key: a evaluating rule: a must not be "
                "empty",
                "spec: Invalid value: \"object\": no such key: a evaluating rule: a is y"}));
}

TEST(CrdSchemaTest, CompileRefusesNonStructuralAndBrokenSchemas) {
  auto causes = [](const char* schema) {
    auto compiled = CrdSchema::Compile(Json::parse(schema), "s");
    auto* errs = std::get_if<std::vector<StatusCause>>(&compiled);
    return errs ? Messages(*errs) : std::vector<std::string>{};
  };
  EXPECT_EQ(causes(R"({"type":"object","properties":{"a":{}}})"),
            (std::vector<std::string>{"s.properties[a].type: Required value: must not be empty for "
                                      "specified object fields"}));
  EXPECT_EQ(causes(R"({"type":"string"})"),
            (std::vector<std::string>{"s.type: Invalid value: \"string\": must be object at the "
                                      "root"}));
  EXPECT_EQ(
      causes(R"({"type":"object","properties":{"a":{"type":"string","pattern":"("}}})").size(), 1u);
  auto cel = causes(R"({"type":"object","x-kubernetes-validations":[{"rule":"nope == 1"}]})");
  ASSERT_EQ(cel.size(), 1u);
  EXPECT_EQ(cel[0],
            "s.x-kubernetes-validations[0].rule: Invalid value: \"nope == 1\": compilation failed: "
            "ERROR: <input>:1:1: undeclared reference to 'nope' (in container '')");
  // Value validations inside allOf need no type; int-or-string and preserve-unknown-fields
  // nodes need none either.
  EXPECT_TRUE(causes(R"({"type":"object","properties":{"a":{"x-kubernetes-int-or-string":true},
      "b":{"x-kubernetes-preserve-unknown-fields":true},
      "c":{"type":"string","allOf":[{"enum":["x"]}]}}})")
                  .empty());
  std::string deep = R"({"type":"object"})";
  for (int i = 0; i < 100; ++i) {
    deep = absl::StrCat(R"({"type":"object","properties":{"a":)", deep, "}}");
  }
  EXPECT_EQ(causes(deep.c_str()).size(), 1u);
}

}  // namespace
}  // namespace reverser::kubesim
