// Unit tests of the pure pieces: patches, selectors, names, YAML typing, store history, request
// parsing.

#include <cmath>
#include <random>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "re2/re2.h"
#include "tools/kube-sim/managed_fields.h"
#include "tools/kube-sim/names.h"
#include "tools/kube-sim/patch.h"
#include "tools/kube-sim/request_info.h"
#include "tools/kube-sim/selectors.h"
#include "tools/kube-sim/store.h"
#include "tools/kube-sim/yaml_json.h"

namespace reverser::kubesim {
namespace {

TEST(PatchTest, MergePatchFollowsRfc7386) {
  Json target = Json::parse(R"({"a":"b","c":{"d":"e","f":"g"}})");
  Json patch = Json::parse(R"({"a":"z","c":{"f":null}})");
  EXPECT_EQ(ApplyMergePatch(target, patch), Json::parse(R"({"a":"z","c":{"d":"e"}})"));
  EXPECT_EQ(ApplyMergePatch(Json::parse(R"({"a":[1,2]})"), Json::parse(R"({"a":[3]})")),
            Json::parse(R"({"a":[3]})"));
}

TEST(PatchTest, JsonPatchOperationsAndErrors) {
  Json doc = Json::parse(R"({"a":{"b":[1,2]}})");
  auto r = ApplyJsonPatch(doc, Json::parse(R"([
    {"op":"add","path":"/a/b/-","value":3},
    {"op":"replace","path":"/a/b/0","value":0},
    {"op":"copy","from":"/a/b","path":"/c"},
    {"op":"move","from":"/c","path":"/d"},
    {"op":"test","path":"/d/2","value":3},
    {"op":"remove","path":"/a/b/1"}])"));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(*r, Json::parse(R"({"a":{"b":[0,3]},"d":[0,2,3]})"));
  auto bad = ApplyJsonPatch(doc, Json::parse(R"([{"op":"test","path":"/a/b/0","value":9}])"));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, 422);
  EXPECT_FALSE(ApplyJsonPatch(doc, Json::object()).ok());
  EXPECT_FALSE(
      ApplyJsonPatch(doc, Json::parse(R"([{"op":"replace","path":"/zz","value":1}])")).ok());
}

TEST(PatchTest, StrategicMergeDirectives) {
  Json pod = Json::parse(
      R"({"spec":{"containers":[{"name":"a","image":"1","env":[{"name":"X","value":"1"}]},{"name":"b","image":"1"}]},
                             "metadata":{"finalizers":["f1"]}})");
  auto r = ApplyStrategicMergePatch(pod, Json::parse(R"({
    "spec":{"containers":[{"name":"a","env":[{"name":"Y","value":"2"}]},{"name":"b","$patch":"delete"}]},
    "metadata":{"finalizers":["f2"],"$deleteFromPrimitiveList/finalizers":["f1"]}})"));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)["spec"]["containers"].size(), 1u);
  EXPECT_EQ((*r)["spec"]["containers"][0]["env"].size(), 2u);
  EXPECT_EQ((*r)["metadata"]["finalizers"], Json({"f2"}));
  auto replaced =
      ApplyStrategicMergePatch(pod, Json::parse(R"({"spec":{"$patch":"replace","x":1}})"));
  EXPECT_EQ((*replaced)["spec"], Json::parse(R"({"x":1})"));
  EXPECT_EQ(MergeKeyFor("ports", Json::parse(R"({"containerPort":80})")), "containerPort");
  EXPECT_EQ(MergeKeyFor("ports", Json::parse(R"({"port":80})")), "port");
  EXPECT_EQ(MergeKeyFor("args", "x"), "");
}

TEST(SelectorTest, LabelAndFieldSelectors) {
  Json o = Json::parse(
      R"({"metadata":{"name":"n","namespace":"ns","labels":{"app":"web","tier":"fe"}}})");
  auto match = [&](const std::string& s) { return Selector::ParseLabels(s)->Matches(o); };
  EXPECT_TRUE(match("app=web"));
  EXPECT_TRUE(match("app==web,tier!=be"));
  EXPECT_TRUE(match("app in (web, api),!missing"));
  EXPECT_FALSE(match("app notin (web)"));
  EXPECT_FALSE(match("missing"));
  EXPECT_TRUE(Selector::ParseFields("metadata.name=n,metadata.namespace!=x")->Matches(o));
  EXPECT_FALSE(Selector::ParseFields("metadata.name=m")->Matches(o));
  EXPECT_FALSE(Selector::ParseFields("garbage").ok());
}

TEST(NamesTest, RealValidationMessages) {
  EXPECT_TRUE(ValidateSubdomain("a.b-c").empty());
  EXPECT_FALSE(ValidateSubdomain("A").empty());
  EXPECT_THAT(ValidateSubdomain(std::string(254, 'a')),
              ::testing::Contains("must be no more than 253 characters"));
  EXPECT_TRUE(ValidateLabel("abc-1").empty());
  EXPECT_FALSE(ValidateLabel("a.b").empty());
  EXPECT_TRUE(ValidatePathSegment("system:controller:x").empty());
  EXPECT_THAT(ValidatePathSegment("a/b"), ::testing::ElementsAre("may not contain '/'"));
}

// The scanners against the patterns apimachinery states (and the old code matched with): edge
// cases, short random strings compared with RE2, and megabyte names answered without a crash.
TEST(NamesTest, ScannersMatchTheValidationPatterns) {
  const RE2 label("[a-z0-9]([-a-z0-9]*[a-z0-9])?");
  const RE2 subdomain("[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*");
  const RE2 dns1035("[a-z]([-a-z0-9]*[a-z0-9])?");
  const auto check = [&](const std::string& s) {
    EXPECT_EQ(IsDns1123Label(s), RE2::FullMatch(s, label)) << s;
    EXPECT_EQ(IsDns1123Subdomain(s), RE2::FullMatch(s, subdomain)) << s;
    EXPECT_EQ(IsDns1035Label(s), RE2::FullMatch(s, dns1035)) << s;
  };
  for (const char* s :
       {"",     "a",  "0",  "-",    "a-",   "-a", "a-b", "a--b", "1a",       "a.b",
        "a..b", ".a", "a.", "a.-b", "a-.b", "A",  "a_b", "a b",  "\xc3\xa9", "9.9.9"}) {
    check(s);
  }
  EXPECT_TRUE(IsDns1123Subdomain("a.b-c.d0"));
  EXPECT_FALSE(IsDns1123Label("a.b"));
  EXPECT_FALSE(IsDns1035Label("1a"));
  std::mt19937 rng(1123);
  const std::string alphabet = "az09-.A_";
  for (int i = 0; i < 20000; ++i) {
    std::string s(rng() % 9, ' ');
    for (char& c : s) c = alphabet[rng() % alphabet.size()];
    check(s);
  }
  const std::string huge(1 << 20, 'a');
  EXPECT_THAT(ValidateSubdomain(huge),
              ::testing::ElementsAre("must be no more than 253 characters"));
  EXPECT_THAT(ValidateLabel(huge), ::testing::ElementsAre("must be no more than 63 characters"));
  EXPECT_EQ(ValidateSubdomain(huge + "-").size(), 2u);
}

// Plain scalars are typed by shape: `[-+]?[0-9]+` as integers, the YAML float shape as floats,
// as the old regular expressions did (compared on short random strings), and in linear time.
TEST(YamlJsonTest, PlainScalarsAreTypedByTheirShape) {
  const RE2 integer("[-+]?[0-9]+");
  const RE2 floating("[-+]?(\\.[0-9]+|[0-9]+(\\.[0-9]*)?)([eE][-+]?[0-9]+)?");
  const auto expected = [&](const std::string& s) -> Json {
    if (s.empty()) return nullptr;
    int64_t i;
    if (RE2::FullMatch(s, integer) && absl::SimpleAtoi(s, &i)) return i;
    double d;
    if (RE2::FullMatch(s, floating) && absl::SimpleAtod(s, &d)) return d;
    return s;
  };
  const auto typed = [](const std::string& s) -> Json {
    ApiOr<Json> doc = ParseYamlOrJson("v: " + s + "\n");
    EXPECT_TRUE(doc.ok()) << s;
    return doc.ok() ? (*doc)["v"] : Json("<error>");
  };
  EXPECT_EQ(typed("017"), Json(17));
  EXPECT_EQ(typed("-5"), Json(-5));
  EXPECT_EQ(typed("1.5e3"), Json(1500.0));
  EXPECT_EQ(typed(".5"), Json(0.5));
  EXPECT_EQ(typed("1."), Json(1.0));
  EXPECT_EQ(typed("1e"), Json("1e"));
  EXPECT_EQ(typed("0x1F"), Json("0x1F"));
  EXPECT_EQ(typed("99999999999999999999"), Json(1e20));
  std::mt19937 rng(12);
  const std::string alphabet = "0189.eE+-x";
  for (int i = 0; i < 4000; ++i) {
    std::string s(1 + rng() % 8, ' ');
    for (char& c : s) c = alphabet[rng() % alphabet.size()];
    if (s[0] == '-' && (s.size() == 1 || s[1] == ' ')) continue;  // a sequence entry, not a scalar
    const Json want = expected(s);
    const Json got = typed(s);
    if (want.is_number_float() && std::isnan(want.get<double>())) continue;
    EXPECT_EQ(got, want) << s;
  }
  for (const std::string& s : {std::string(1 << 20, '7'), "." + std::string(1 << 20, '5'),
                               "-" + std::string(1 << 20, '1') + "e5", std::string(1 << 20, 'x')}) {
    EXPECT_EQ(typed(s), expected(s)) << s.substr(0, 10);
  }
}

// An alias inside its own anchor names an anchor not defined yet, and aliases multiply a small
// document: both are a 400, as deep nesting and the inputs that broke yaml-cpp 0.7 are.
TEST(YamlJsonTest, AliasCyclesBombsAndDeepNestingAreBadRequests) {
  ApiOr<Json> cycle = ParseYamlOrJson("a: &x [1, *x]\n");
  ASSERT_FALSE(cycle.ok());
  EXPECT_EQ(cycle.error().code, 400);
  EXPECT_THAT(cycle.error().message, ::testing::HasSubstr("unknown anchor"));
  for (const char* text :
       {"  ,   ey: ENCglo[baA", ",|a", ",piVersion: v1\nk: Secret\n{etadata:\n  name> ,est@-se"}) {
    ApiOr<Json> broken = ParseYamlOrJson(text);
    ASSERT_FALSE(broken.ok()) << text;
    EXPECT_EQ(broken.error().code, 400);
  }
  std::string bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n";
  for (int i = 0; i < 8; ++i) {
    const std::string name(1, static_cast<char>('b' + i));
    const std::string previous(1, static_cast<char>('a' + i));
    bomb += absl::StrCat(name, ": &", name, " [*", previous);
    for (int k = 0; k < 9; ++k) bomb += absl::StrCat(", *", previous);
    bomb += "]\n";
  }
  ApiOr<Json> bombed = ParseYamlOrJson(bomb);
  ASSERT_FALSE(bombed.ok());
  EXPECT_THAT(bombed.error().message, ::testing::HasSubstr("excessive aliasing"));
  ApiOr<Json> deep = ParseYamlOrJson("a: " + std::string(100000, '['));
  ASSERT_FALSE(deep.ok());
  EXPECT_EQ(deep.error().code, 400);
  EXPECT_THAT(deep.error().message, ::testing::HasSubstr("exceeded max depth of"));
  std::string nested;
  for (int i = 0; i < 3000; ++i) nested += std::string(i, ' ') + "a:\n";
  EXPECT_FALSE(ParseYamlOrJson(nested).ok());
}

TEST(RequestInfoTest, PathsAndVerbs) {
  std::multimap<std::string, std::string> none, watch{{"watch", "True"}};
  RequestInfo i =
      ParseRequestInfo("GET", "/apis/apps/v1/namespaces/ns/deployments/web/scale", none);
  EXPECT_TRUE(i.is_resource);
  EXPECT_EQ(i.group, "apps");
  EXPECT_EQ(i.namespace_, "ns");
  EXPECT_EQ(i.resource, "deployments");
  EXPECT_EQ(i.name, "web");
  EXPECT_EQ(i.subresource, "scale");
  EXPECT_EQ(i.verb, "get");
  EXPECT_EQ(ParseRequestInfo("GET", "/api/v1/namespaces/ns/configmaps", watch).verb, "watch");
  EXPECT_EQ(ParseRequestInfo("GET", "/api/v1/watch/namespaces/ns/configmaps", none).verb, "watch");
  RequestInfo ns = ParseRequestInfo("PUT", "/api/v1/namespaces/ns/status", none);
  EXPECT_EQ(ns.resource, "namespaces");
  EXPECT_EQ(ns.name, "ns");
  EXPECT_EQ(ns.subresource, "status");
  EXPECT_EQ(ParseRequestInfo("DELETE", "/api/v1/namespaces/ns/configmaps", none).verb,
            "deletecollection");
  EXPECT_FALSE(ParseRequestInfo("GET", "/apis/apps/v1", none).is_resource);
  EXPECT_TRUE(QueryBool({{"w", ""}}, "w"));
  EXPECT_FALSE(QueryBool({{"w", "FALSE"}}, "w"));
  EXPECT_FALSE(QueryBool({{"w", "0"}}, "w"));
}

TEST(StoreTest, ListAtResourceVersionRollsBackHistory) {
  Store store(100);
  auto put = [&](const std::string& name, const std::string& v) {
    return store.Write(
        "/configmaps", "ns", name,
        [&](const Json*) -> ApiOr<WriteDecision> {
          return WriteDecision{WriteDecision::Kind::kPut,
                               {{"metadata", {{"name", name}, {"namespace", "ns"}}}, {"v", v}}};
        },
        false);
  };
  put("a", "1");
  int64_t at = store.CurrentRv();
  put("a", "2");
  put("b", "1");
  auto then = store.List("/configmaps", "ns", at);
  ASSERT_TRUE(then.ok());
  ASSERT_EQ(then->items.size(), 1u);
  EXPECT_EQ(then->items[0]["v"], "1");
  EXPECT_EQ(store.List("/configmaps", "ns")->items.size(), 2u);
  store.Compact();
  EXPECT_EQ(store.List("/configmaps", "ns", at).error().code, 410);
  Store::WaitResult w = store.WaitForEvents("/configmaps", at, absl::Now(), store.epoch());
  EXPECT_TRUE(w.expired);
}

TEST(StoreTest, StoredObjectsCarryTheirRenderingAndNamespace) {
  Store store(100);
  auto put = [&](const std::string& ns, const std::string& name, const std::string& v) {
    return store.Write(
        "/configmaps", ns, name,
        [&](const Json*) -> ApiOr<WriteDecision> {
          return WriteDecision{WriteDecision::Kind::kPut,
                               {{"metadata", {{"name", name}, {"namespace", ns}}}, {"v", v}}};
        },
        false);
  };
  put("a", "x", "1");
  int64_t at = store.CurrentRv();
  put("a", "x", "2");
  put("b", "y", "1");
  auto now = store.ListStored("/configmaps", "a");
  ASSERT_TRUE(now.ok());
  ASSERT_EQ(now->items.size(), 1u);  // namespace "b" left out
  EXPECT_EQ(now->items[0]->value["v"], "2");
  EXPECT_EQ(now->items[0]->json, now->items[0]->value.dump());
  EXPECT_EQ(now->items[0]->namespace_, "a");
  auto then = store.ListStored("/configmaps", "", at);
  ASSERT_TRUE(then.ok());
  ASSERT_EQ(then->items.size(), 1u);
  EXPECT_EQ(then->items[0]->value["v"], "1");
  EXPECT_EQ(then->rv, at);
  // Watch events share the same stored states: the event's object is the listed one.
  Store::WaitResult w = store.WaitForEvents("/configmaps", at, absl::Now(), store.epoch());
  ASSERT_EQ(w.events.size(), 2u);
  EXPECT_EQ(w.events[0].object, now->items[0]);
  EXPECT_EQ(w.events[0].prev, then->items[0]);
  EXPECT_EQ(w.events[1].object->namespace_, "b");
  // A cluster-scoped object has no namespace.
  StoredObject cluster(Json{{"metadata", {{"name", "n"}}}}, "{}");
  EXPECT_EQ(cluster.namespace_, "");
}

TEST(ManagedFieldsTest, FieldsV1ShapesMatchTheApiserver) {
  Json o = Json::parse(R"({"metadata":{"labels":{"a":"b"},"finalizers":["x"]},"data":{"k":"v"},
                           "spec":{"containers":[{"name":"c","image":"i"}]}})");
  EXPECT_EQ(FieldsV1Of(o), Json::parse(R"({
    "f:data":{".":{},"f:k":{}},
    "f:metadata":{"f:finalizers":{".":{},"v:\"x\"":{}},"f:labels":{".":{},"f:a":{}}},
    "f:spec":{"f:containers":{"k:{\"name\":\"c\"}":{".":{},"f:image":{},"f:name":{}}}}})"));
  EXPECT_EQ(Rfc3339(absl::FromUnixSeconds(0)), "1970-01-01T00:00:00Z");
  EXPECT_EQ(Rfc3339Micro(absl::FromUnixMicros(1)), "1970-01-01T00:00:00.000001Z");
}

}  // namespace
}  // namespace reverser::kubesim
