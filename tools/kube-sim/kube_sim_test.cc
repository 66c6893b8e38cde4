#include "tools/kube-sim/kube_sim.h"

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "tools/kube-sim/test_support.h"

namespace reverser::kubesim {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::StreamReader;

class KubeSimTest : public ::testing::Test {
 protected:
  void StartSim(KubeSimOptions options = {}) {
    auto sim = KubeSim::Start(std::move(options));
    ASSERT_TRUE(sim.ok()) << sim.status();
    sim_ = std::move(*sim);
    client_ = std::make_unique<httplib::Client>("127.0.0.1", sim_->port());
  }
  void SetUp() override { StartSim(); }

  httplib::Result Post(const std::string& path, const Json& body,
                       const std::string& type = "application/json") {
    return client_->Post(path.c_str(), body.dump(), type.c_str());
  }
  Json CreateConfigMap(const std::string& name, const Json& data = {{"k", "v"}},
                       const std::string& ns = "default") {
    auto res = Post("/api/v1/namespaces/" + ns + "/configmaps", {{"apiVersion", "v1"},
                                                                 {"kind", "ConfigMap"},
                                                                 {"metadata", {{"name", name}}},
                                                                 {"data", data}});
    EXPECT_EQ(res->status, 201) << res->body;
    return Json::parse(res->body);
  }
  static Json Body(const httplib::Result& res) { return Json::parse(res->body, nullptr, false); }

  std::unique_ptr<KubeSim> sim_;
  std::unique_ptr<httplib::Client> client_;
};

// ----- discovery

TEST_F(KubeSimTest, VersionAndLegacyDiscoveryShapes) {
  Json version = Body(client_->Get("/version"));
  EXPECT_EQ(version["major"], "1");
  EXPECT_EQ(version["minor"], "34");

  Json api = Body(client_->Get("/api"));
  EXPECT_EQ(api["kind"], "APIVersions");
  EXPECT_FALSE(api.contains("apiVersion"));  // real quirk
  EXPECT_EQ(api["versions"], Json({"v1"}));

  Json core = Body(client_->Get("/api/v1"));
  EXPECT_EQ(core["kind"], "APIResourceList");
  EXPECT_FALSE(core.contains("apiVersion"));
  bool found_cm = false;
  for (const auto& r : core["resources"]) {
    if (r["name"] == "configmaps") {
      found_cm = true;
      EXPECT_EQ(r["shortNames"], Json({"cm"}));
      EXPECT_EQ(r["namespaced"], true);
    }
  }
  EXPECT_TRUE(found_cm);

  Json apps = Body(client_->Get("/apis/apps/v1"));
  EXPECT_EQ(apps["apiVersion"], "v1");
  bool found_scale = false;
  for (const auto& r : apps["resources"]) {
    if (r["name"] == "deployments/scale") {
      found_scale = true;
      EXPECT_EQ(r["group"], "autoscaling");
      EXPECT_EQ(r["kind"], "Scale");
      EXPECT_EQ(r["singularName"], "");
    }
  }
  EXPECT_TRUE(found_scale);
  Json group = Body(client_->Get("/apis/apps"));
  EXPECT_EQ(group["kind"], "APIGroup");
  EXPECT_EQ(group["preferredVersion"]["groupVersion"], "apps/v1");
  EXPECT_EQ(client_->Get("/apis/nope.example.com/v1")->status, 404);
}

TEST_F(KubeSimTest, AggregatedDiscoveryByAcceptHeaderWithEtag) {
  const char* accept =
      "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/"
      "json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";
  auto res = client_->Get("/apis", {{"Accept", accept}});
  ASSERT_EQ(res->status, 200);
  EXPECT_EQ(res->get_header_value("Content-Type"),
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList");
  EXPECT_EQ(res->get_header_value("Vary"), "Accept");
  std::string etag = res->get_header_value("ETag");
  EXPECT_EQ(etag.size(), 128u + 2);
  Json list = Body(res);
  EXPECT_EQ(list["kind"], "APIGroupDiscoveryList");
  EXPECT_EQ(list["items"][0]["metadata"]["name"], "apps");
  const Json& deploy = list["items"][0]["versions"][0]["resources"][0];
  EXPECT_EQ(deploy["resource"], "deployments");
  EXPECT_EQ(deploy["responseKind"], Json({{"group", ""}, {"version", ""}, {"kind", "Deployment"}}));
  EXPECT_EQ(client_->Get("/apis", {{"Accept", accept}, {"If-None-Match", etag}})->status, 304);

  Json core = Body(client_->Get("/api", {{"Accept", accept}}));
  EXPECT_EQ(core["items"][0]["metadata"], Json::object());  // >= 1.34: no creationTimestamp
  // Without the aggregated Accept: the legacy document.
  auto legacy = client_->Get("/apis");
  EXPECT_EQ(legacy->get_header_value("Content-Type"), "application/json");
  EXPECT_EQ(Body(legacy)["kind"], "APIGroupList");
}

TEST_F(KubeSimTest, OpenApiV3ServesRealDocumentsAndV2Is404) {
  Json root = Body(client_->Get("/openapi/v3"));
  std::string url = root["paths"]["api/v1"]["serverRelativeURL"];
  EXPECT_THAT(url, HasSubstr("/openapi/v3/api/v1?hash="));
  Json doc = Body(client_->Get(url.c_str()));
  EXPECT_EQ(doc["info"]["version"], "v1.27.0");
  EXPECT_TRUE(doc["paths"].contains("/api/v1/namespaces/{namespace}/configmaps/{name}"));
  std::string rbac = root["paths"]["apis/rbac.authorization.k8s.io/v1"]["serverRelativeURL"];
  Json minimal = Body(client_->Get(rbac.c_str()));
  EXPECT_TRUE(minimal["paths"].contains(
      "/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/roles/{name}"));
  EXPECT_EQ(client_->Get("/openapi/v2")->status, 404);
}

// ----- CRUD and errors

TEST_F(KubeSimTest, CreateFillsServerFieldsAndGetReturnsIt) {
  Json cm = CreateConfigMap("demo");
  EXPECT_EQ(cm["kind"], "ConfigMap");
  EXPECT_EQ(cm["metadata"]["uid"].get<std::string>().size(), 36u);
  EXPECT_FALSE(cm["metadata"]["resourceVersion"].get<std::string>().empty());
  EXPECT_FALSE(cm["metadata"].contains("generation"));  // ConfigMaps have none
  EXPECT_EQ(cm["metadata"]["managedFields"][0]["manager"], "cpp-httplib");
  EXPECT_EQ(cm["metadata"]["managedFields"][0]["fieldsV1"],
            Json::parse(R"({"f:data":{".":{},"f:k":{}}})"));
  Json got = Body(client_->Get("/api/v1/namespaces/default/configmaps/demo"));
  EXPECT_EQ(got, cm);
}

TEST_F(KubeSimTest, GenerateNameAndDeploymentGeneration) {
  auto res = Post("/apis/apps/v1/namespaces/default/deployments",
                  {{"metadata", {{"generateName", "web-"}}},
                   {"spec",
                    {{"selector", {{"matchLabels", {{"app", "web"}}}}},
                     {"template",
                      {{"metadata", {{"labels", {{"app", "web"}}}}},
                       {"spec", {{"containers", {{{"name", "c"}, {"image", "nginx:1"}}}}}}}}}}});
  ASSERT_EQ(res->status, 201) << res->body;
  Json d = Body(res);
  std::string name = d["metadata"]["name"];
  EXPECT_EQ(name.size(), 9u);
  EXPECT_EQ(name.substr(0, 4), "web-");
  EXPECT_EQ(d["metadata"]["generation"], 1);
  EXPECT_EQ(d["spec"]["replicas"], 1);
  // Scale through the subresource: generation moves, Scale is autoscaling/v1.
  auto scaled =
      client_->Patch(("/apis/apps/v1/namespaces/default/deployments/" + name + "/scale").c_str(),
                     R"({"spec":{"replicas":3}})", "application/merge-patch+json");
  ASSERT_EQ(scaled->status, 200) << scaled->body;
  EXPECT_EQ(Body(scaled)["apiVersion"], "autoscaling/v1");
  EXPECT_EQ(Body(scaled)["spec"]["replicas"], 3);
  Json after = Body(client_->Get(("/apis/apps/v1/namespaces/default/deployments/" + name).c_str()));
  EXPECT_EQ(after["spec"]["replicas"], 3);
  EXPECT_EQ(after["metadata"]["generation"], 2);
  // A status write does not move generation.
  Json status = after;
  status["status"] = {{"replicas", 3}};
  auto st =
      client_->Put(("/apis/apps/v1/namespaces/default/deployments/" + name + "/status").c_str(),
                   status.dump(), "application/json");
  ASSERT_EQ(st->status, 200) << st->body;
  EXPECT_EQ(Body(st)["metadata"]["generation"], 2);
  EXPECT_EQ(Body(st)["status"]["replicas"], 3);
}

TEST_F(KubeSimTest, RealErrorBodies) {
  CreateConfigMap("a");
  auto dup = Post("/api/v1/namespaces/default/configmaps", {{"metadata", {{"name", "a"}}}});
  EXPECT_EQ(dup->status, 409);
  EXPECT_EQ(
      dup->body,
      R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"configmaps \"a\" already exists","reason":"AlreadyExists","details":{"name":"a","kind":"configmaps"},"code":409})");
  auto missing = client_->Get("/api/v1/namespaces/default/configmaps/missing");
  EXPECT_EQ(
      missing->body,
      R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"configmaps \"missing\" not found","reason":"NotFound","details":{"name":"missing","kind":"configmaps"},"code":404})");
  auto grouped = client_->Get("/apis/apps/v1/namespaces/default/deployments/missing");
  EXPECT_EQ(
      grouped->body,
      R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"deployments.apps \"missing\" not found","reason":"NotFound","details":{"name":"missing","group":"apps","kind":"deployments"},"code":404})");
  auto path = client_->Get("/api/v1/nothings");
  EXPECT_EQ(
      path->body,
      R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"the server could not find the requested resource","reason":"NotFound","details":{},"code":404})");
  // Optimistic concurrency.
  Json stale = Body(client_->Get("/api/v1/namespaces/default/configmaps/a"));
  Json fresh = stale;
  fresh["data"]["k"] = "v2";
  ASSERT_EQ(
      client_->Put("/api/v1/namespaces/default/configmaps/a", fresh.dump(), "application/json")
          ->status,
      200);
  stale["data"]["k"] = "v3";
  auto conflict =
      client_->Put("/api/v1/namespaces/default/configmaps/a", stale.dump(), "application/json");
  EXPECT_EQ(
      conflict->body,
      R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Operation cannot be fulfilled on configmaps \"a\": the object has been modified; please apply your changes to the latest version and try again","reason":"Conflict","details":{"name":"a","kind":"configmaps"},"code":409})");
}

TEST_F(KubeSimTest, BadInputGetsStatusAndServerKeepsServing) {
  auto malformed =
      client_->Post("/api/v1/namespaces/default/configmaps", "{not json", "application/json");
  EXPECT_EQ(malformed->status, 400);
  EXPECT_EQ(Body(malformed)["reason"], "BadRequest");
  auto wrong_type = client_->Post("/api/v1/namespaces/default/configmaps", "a=b", "text/plain");
  EXPECT_EQ(wrong_type->status, 415);
  EXPECT_EQ(Body(wrong_type)["reason"], "UnsupportedMediaType");
  EXPECT_EQ(Body(wrong_type)["message"],
            "the body of the request was in an unknown format - accepted media types include: "
            "application/json, application/yaml, application/vnd.kubernetes.protobuf");
  std::string huge(4 * 1024 * 1024, 'x');
  auto too_big = client_->Post("/api/v1/namespaces/default/configmaps", huge, "application/json");
  ASSERT_TRUE(too_big);
  EXPECT_EQ(too_big->status, 413);
  EXPECT_EQ(Body(too_big)["reason"], "RequestEntityTooLarge");
  auto bad_name =
      Post("/api/v1/namespaces/default/configmaps", {{"metadata", {{"name", "Bad_Name"}}}});
  EXPECT_EQ(bad_name->status, 422);
  EXPECT_EQ(
      Body(bad_name)["message"],
      "ConfigMap \"Bad_Name\" is invalid: metadata.name: Invalid value: \"Bad_Name\": a lowercase "
      "RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and "
      "must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
      "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')");
  EXPECT_EQ(Body(bad_name)["details"]["causes"][0]["field"], "metadata.name");
  auto bad_ns = Post("/api/v1/namespaces", {{"metadata", {{"name", "a.b"}}}});
  EXPECT_EQ(bad_ns->status, 422);
  EXPECT_THAT(Body(bad_ns)["message"].get<std::string>(), HasSubstr("RFC 1123 label"));
  auto patch_type = client_->Patch("/api/v1/namespaces/default/configmaps/x", "{}", "text/plain");
  EXPECT_EQ(patch_type->status, 415);
  auto no_ns = Post("/api/v1/namespaces/nope/configmaps", {{"metadata", {{"name", "a"}}}});
  EXPECT_EQ(no_ns->status, 404);
  EXPECT_EQ(Body(no_ns)["message"], "namespaces \"nope\" not found");
  // Still serving.
  CreateConfigMap("after-errors");
}

TEST_F(KubeSimTest, OddlyTypedBodiesNeverTakeTheServerDown) {
  CreateConfigMap("target");
  const std::vector<std::string> bodies = {R"({"metadata":"x"})",
                                           R"({"metadata":{"name":5}})",
                                           R"({"metadata":{"name":"n","labels":[]}})",
                                           R"({"metadata":{"name":"n2","finalizers":"x"}})",
                                           R"({"metadata":{"name":"n3"},"data":5})",
                                           R"([])",
                                           R"("str")",
                                           R"(null)",
                                           R"({"kind":5})",
                                           R"({"metadata":{"generateName":7}})",
                                           R"({"metadata":{"name":"n4","resourceVersion":12}})"};
  for (const auto& b : bodies) {
    auto post = client_->Post("/api/v1/namespaces/default/configmaps", b, "application/json");
    ASSERT_TRUE(post) << b;
    EXPECT_GE(post->status, 400) << b;
    EXPECT_LT(post->status, 500) << b << " " << post->body;
    auto put = client_->Put("/api/v1/namespaces/default/configmaps/target", b, "application/json");
    ASSERT_TRUE(put) << b;
    auto patch = client_->Patch("/api/v1/namespaces/default/configmaps/target", b,
                                "application/merge-patch+json");
    ASSERT_TRUE(patch) << b;
    auto smp = client_->Patch("/api/v1/namespaces/default/configmaps/target", b,
                              "application/strategic-merge-patch+json");
    ASSERT_TRUE(smp) << b;
    auto apply = client_->Patch("/api/v1/namespaces/default/configmaps/target?fieldManager=x", b,
                                "application/apply-patch+yaml");
    ASSERT_TRUE(apply) << b;
    auto del = client_->Delete("/api/v1/namespaces/default/configmaps/none", b, "application/json");
    ASSERT_TRUE(del) << b;
    auto deployments =
        client_->Post("/apis/apps/v1/namespaces/default/deployments", b, "application/json");
    ASSERT_TRUE(deployments) << b;
  }
  for (const char* q :
       {"?limit=abc", "?continue=%%%", "?labelSelector=a%20in%20x", "?resourceVersion=abc",
        "?watch=1&resourceVersion=abc", "?fieldSelector=bad",
        "?timeoutSeconds=-5&watch=1&resourceVersion=0&sendInitialEvents=false"}) {
    auto res = client_->Get((std::string("/api/v1/namespaces/default/configmaps") + q).c_str());
    ASSERT_TRUE(res) << q;
  }
  EXPECT_EQ(client_->Get("/api/v1/namespaces/default/configmaps/target")->status, 200);
}

// Bodies that would overflow the stack (deep nesting, alias cycles) or take it forever (alias
// bombs, megabyte names) are 4xx answers, and the server keeps serving.
TEST_F(KubeSimTest, DeepAliasedAndHugeBodiesNeverTakeTheServerDown) {
  const auto nested = [](const std::string& name, int depth) {
    std::string extra;
    for (int i = 0; i < depth; ++i) extra += "{\"a\":";
    extra += "1" + std::string(depth, '}');
    return absl::StrCat(R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":")", name,
                        R"("},"data":{"k":"v"},"extra":)", extra, "}");
  };
  const std::string path = "/api/v1/namespaces/default/configmaps";
  auto within = client_->Post(path.c_str(), nested("deep-ok", 1990), "application/json");
  ASSERT_TRUE(within);
  EXPECT_EQ(within->status, 201) << within->body.substr(0, 300);
  EXPECT_EQ(client_->Get((path + "/deep-ok").c_str())->status, 200);

  const std::string too_deep = nested("deep-ok", 100000);
  for (const char* type : {"application/json", "application/yaml"}) {
    auto post = client_->Post(path.c_str(), too_deep, type);
    ASSERT_TRUE(post) << type;
    EXPECT_EQ(post->status, 400) << type;
    EXPECT_THAT(Body(post)["message"].get<std::string>(), HasSubstr("exceeded max depth"));
  }
  auto put = client_->Put((path + "/deep-ok").c_str(), too_deep, "application/json");
  ASSERT_TRUE(put);
  EXPECT_EQ(put->status, 400);
  for (const char* type : {"application/merge-patch+json", "application/strategic-merge-patch+json",
                           "application/json-patch+json", "application/apply-patch+yaml"}) {
    auto patch = client_->Patch((path + "/deep-ok?fieldManager=m").c_str(), too_deep, type);
    ASSERT_TRUE(patch) << type;
    EXPECT_EQ(patch->status, 400) << type;
  }
  auto del = client_->Delete((path + "/deep-ok").c_str(), too_deep, "application/json");
  ASSERT_TRUE(del);
  EXPECT_EQ(del->status, 400);

  auto cycle = client_->Post(path.c_str(),
                             "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\nx: &x [*x]\n",
                             "application/yaml");
  ASSERT_TRUE(cycle);
  EXPECT_EQ(cycle->status, 400);
  std::string bomb = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\na: &a [x, x, x, x]\n";
  for (char c = 'b'; c <= 'm'; ++c) {
    const char prev = static_cast<char>(c - 1);
    bomb += absl::StrFormat("%c: &%c [*%c, *%c, *%c, *%c]\n", c, c, prev, prev, prev, prev);
  }
  auto bombed = client_->Post(path.c_str(), bomb, "application/yaml");
  ASSERT_TRUE(bombed);
  EXPECT_EQ(bombed->status, 400);
  EXPECT_THAT(Body(bombed)["message"].get<std::string>(), HasSubstr("excessive aliasing"));

  auto huge_name = Post(path, {{"metadata", {{"name", std::string(1 << 20, 'a')}}}});
  ASSERT_TRUE(huge_name);
  EXPECT_EQ(huge_name->status, 422);
  auto huge_ns = Post("/api/v1/namespaces", {{"metadata", {{"name", std::string(1 << 20, 'a')}}}});
  ASSERT_TRUE(huge_ns);
  EXPECT_EQ(huge_ns->status, 422);
  CreateConfigMap("still-serving");
}

TEST_F(KubeSimTest, PatchFlavoursAndNoOpDoesNotBumpResourceVersion) {
  CreateConfigMap("p", {{"a", "1"}, {"b", "2"}});
  const std::string path = "/api/v1/namespaces/default/configmaps/p";
  auto merge = client_->Patch(path.c_str(), R"({"data":{"b":null,"c":"3"}})",
                              "application/merge-patch+json");
  EXPECT_EQ(Body(merge)["data"], Json({{"a", "1"}, {"c", "3"}}));
  auto json_patch =
      client_->Patch(path.c_str(), R"([{"op":"replace","path":"/data/a","value":"9"}])",
                     "application/json-patch+json");
  EXPECT_EQ(Body(json_patch)["data"]["a"], "9");
  std::string rv = Body(json_patch)["metadata"]["resourceVersion"];
  int64_t global = sim_->CurrentResourceVersion();
  auto noop = client_->Patch(path.c_str(), R"({"data":{"a":"9"}})",
                             "application/strategic-merge-patch+json");
  EXPECT_EQ(Body(noop)["metadata"]["resourceVersion"], rv);
  EXPECT_EQ(sim_->CurrentResourceVersion(), global);
  auto bad = client_->Patch(path.c_str(), R"([{"op":"remove","path":"/data/zzz"}])",
                            "application/json-patch+json");
  EXPECT_EQ(bad->status, 422);
  // Server-side apply creates, then a second manager's apply is a real (ownership) write.
  auto ssa = client_->Patch(
      "/api/v1/namespaces/default/configmaps/s?fieldManager=tool&force=false",
      R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"s"},"data":{"x":"1"}})",
      "application/apply-patch+yaml");
  ASSERT_EQ(ssa->status, 201) << ssa->body;
  EXPECT_EQ(Body(ssa)["metadata"]["managedFields"][0]["operation"], "Apply");
  std::string yaml = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: s\ndata:\n  x: \"1\"\n";
  auto again = client_->Patch("/api/v1/namespaces/default/configmaps/s?fieldManager=tool", yaml,
                              "application/apply-patch+yaml");
  EXPECT_EQ(Body(again)["metadata"]["resourceVersion"], Body(ssa)["metadata"]["resourceVersion"]);
}

TEST_F(KubeSimTest, ServerSideApplyRemovesFieldsTheManagerNoLongerApplies) {
  const char* path = "/api/v1/namespaces/default/configmaps/ssa?fieldManager=tool";
  ASSERT_EQ(
      client_
          ->Patch(
              path,
              R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"ssa","labels":{"a":"1"}},"data":{"x":"1","y":"2"}})",
              "application/apply-patch+yaml")
          ->status,
      201);
  // Another manager owns z; tool drops y and the label.
  client_->Patch("/api/v1/namespaces/default/configmaps/ssa?fieldManager=other",
                 R"({"data":{"z":"3"}})", "application/merge-patch+json");
  auto res = client_->Patch(
      path, R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"ssa"},"data":{"x":"1"}})",
      "application/apply-patch+yaml");
  ASSERT_EQ(res->status, 200) << res->body;
  EXPECT_EQ(Body(res)["data"], Json({{"x", "1"}, {"z", "3"}}));
  EXPECT_FALSE(Body(res)["metadata"].contains("labels"));
}

TEST_F(KubeSimTest, ServerSideApplyConflictsUnlessForced) {
  CreateConfigMap("c", {{"key", "value"}});  // manager cpp-httplib, operation Update
  const std::string body =
      R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"},"data":{"key":"mine"}})";
  auto conflict =
      client_->Patch("/api/v1/namespaces/default/configmaps/c?fieldManager=kubectl&force=false",
                     body, "application/apply-patch+yaml");
  EXPECT_EQ(conflict->status, 409);
  EXPECT_EQ(
      conflict->body,
      R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Apply failed with 1 conflict: conflict with \"cpp-httplib\" using v1: .data.key","reason":"Conflict","details":{"causes":[{"reason":"FieldManagerConflict","message":"conflict with \"cpp-httplib\" using v1","field":".data.key"}]},"code":409})");
  auto forced =
      client_->Patch("/api/v1/namespaces/default/configmaps/c?fieldManager=kubectl&force=true",
                     body, "application/apply-patch+yaml");
  EXPECT_EQ(forced->status, 200);
  EXPECT_EQ(Body(forced)["data"]["key"], "mine");
  // Same value as the other manager's: no conflict.
  auto same = client_->Patch("/api/v1/namespaces/default/configmaps/c?fieldManager=other-tool",
                             body, "application/apply-patch+yaml");
  EXPECT_EQ(same->status, 200) << same->body;
}

TEST_F(KubeSimTest, StrategicMergeOnContainersByName) {
  auto res = Post(
      "/api/v1/namespaces/default/pods",
      {{"metadata", {{"name", "p"}}},
       {"spec",
        {{"containers", {{{"name", "a"}, {"image", "x:1"}}, {{"name", "b"}, {"image", "y:1"}}}}}}});
  ASSERT_EQ(res->status, 201) << res->body;
  auto patched = client_->Patch(
      "/api/v1/namespaces/default/pods/p",
      R"({"spec":{"$setElementOrder/containers":[{"name":"a"},{"name":"b"}],"containers":[{"name":"b","image":"y:2"}]}})",
      "application/strategic-merge-patch+json");
  Json containers = Body(patched)["spec"]["containers"];
  ASSERT_EQ(containers.size(), 2u);
  EXPECT_EQ(containers[0]["image"], "x:1");
  EXPECT_EQ(containers[1]["image"], "y:2");
}

TEST_F(KubeSimTest, DryRunStoresNothing) {
  int64_t rv = sim_->CurrentResourceVersion();
  auto res =
      Post("/api/v1/namespaces/default/configmaps?dryRun=All", {{"metadata", {{"name", "dry"}}}});
  EXPECT_EQ(res->status, 201);
  EXPECT_EQ(Body(res)["metadata"]["name"], "dry");
  EXPECT_EQ(sim_->CurrentResourceVersion(), rv);
  EXPECT_EQ(client_->Get("/api/v1/namespaces/default/configmaps/dry")->status, 404);
}

// ----- lists

TEST_F(KubeSimTest, PagingWithContinueSharesTheFirstPageResourceVersion) {
  for (const char* n : {"a", "b", "c"}) CreateConfigMap(n);
  Json page1 = Body(client_->Get("/api/v1/namespaces/default/configmaps?limit=2"));
  ASSERT_EQ(page1["items"].size(), 2u);
  EXPECT_FALSE(page1["items"][0].contains("kind"));  // items carry no kind
  EXPECT_EQ(page1["metadata"]["remainingItemCount"], 1);
  std::string token = page1["metadata"]["continue"];
  CreateConfigMap("d");  // after the first page: not in the paginated result
  Json page2 = Body(
      client_->Get(("/api/v1/namespaces/default/configmaps?limit=2&continue=" + token).c_str()));
  ASSERT_EQ(page2["items"].size(), 1u);
  EXPECT_EQ(page2["items"][0]["metadata"]["name"], "c");
  EXPECT_EQ(page2["metadata"]["resourceVersion"], page1["metadata"]["resourceVersion"]);
  EXPECT_FALSE(page2["metadata"].contains("continue"));
  // Once compacted, the token is too old: 410 with an inconsistent-continue token.
  sim_->Compact();
  auto expired =
      client_->Get(("/api/v1/namespaces/default/configmaps?limit=2&continue=" + token).c_str());
  EXPECT_EQ(expired->status, 410);
  EXPECT_EQ(Body(expired)["reason"], "Expired");
  EXPECT_TRUE(Body(expired)["metadata"].contains("continue"));
}

// List bodies are written from the stored objects' text: byte for byte what dumping the list
// object gives (items without kind/apiVersion, keys in order, strings escaped alike).
TEST_F(KubeSimTest, ListBodyIsTheCanonicalDumpOfTheList) {
  CreateConfigMap("plain");
  CreateConfigMap("odd", {{"quote\"key", "tab\there"}, {"\u00e9t\u00e9", "\u2603 \\ /"}});
  CreateConfigMap("nested", {{"k", "v"}});
  client_->Patch("/api/v1/namespaces/default/configmaps/nested",
                 R"({"metadata":{"labels":{"a":"b"},"annotations":{"x":"{\"y\":[1,2]}"}}})",
                 "application/merge-patch+json");
  Post("/api/v1/namespaces", {{"metadata", {{"name", "elsewhere"}}}});
  CreateConfigMap("other-ns", {{"k", "v"}}, "elsewhere");
  for (const std::string page : {"", "?limit=2"}) {
    auto list = client_->Get(("/api/v1/namespaces/default/configmaps" + page).c_str());
    ASSERT_EQ(list->status, 200);
    Json parsed = Body(list);
    Json expected = {{"kind", "ConfigMapList"},
                     {"apiVersion", "v1"},
                     {"metadata", parsed["metadata"]},
                     {"items", Json::array()}};
    for (const auto& item : parsed["items"]) {
      std::string name = item["metadata"]["name"];
      Json full = Body(client_->Get(("/api/v1/namespaces/default/configmaps/" + name).c_str()));
      full.erase("kind");
      full.erase("apiVersion");
      expected["items"].push_back(full);
    }
    EXPECT_EQ(parsed["items"].size(), page.empty() ? 3u : 2u);
    EXPECT_EQ(list->body, expected.dump()) << page;
  }
}

TEST_F(KubeSimTest, ListOptionValidationAndTooLargeResourceVersion) {
  auto res = client_->Get("/api/v1/configmaps?resourceVersionMatch=NotOlderThan");
  EXPECT_EQ(res->status, 422);
  EXPECT_EQ(Body(res)["details"]["kind"], "ListOptions");
  sim_->Compact();
  auto old = client_->Get("/api/v1/configmaps?resourceVersion=1&resourceVersionMatch=Exact");
  EXPECT_EQ(old->status, 410);
  EXPECT_EQ(Body(old)["message"], "The resourceVersion for the provided list is too old.");
}

// ----- watch

TEST_F(KubeSimTest, WatchStreamsIncrementallyFromResourceVersion) {
  Json first = CreateConfigMap("w1");
  std::string rv = first["metadata"]["resourceVersion"];
  StreamReader watch(sim_->port(),
                     "/api/v1/namespaces/default/configmaps?watch=1&resourceVersion=" + rv);
  ASSERT_EQ(watch.status(), 200);
  EXPECT_EQ(watch.content_type(), "application/json");
  CreateConfigMap("w2");
  Json added = watch.NextJson();
  EXPECT_EQ(added["type"], "ADDED");
  EXPECT_EQ(added["object"]["metadata"]["name"], "w2");
  EXPECT_EQ(added["object"]["kind"], "ConfigMap");
  client_->Patch("/api/v1/namespaces/default/configmaps/w2", R"({"data":{"k":"new"}})",
                 "application/merge-patch+json");
  Json modified = watch.NextJson();
  EXPECT_EQ(modified["type"], "MODIFIED");
  EXPECT_EQ(modified["object"]["data"]["k"], "new");
  auto del = client_->Delete("/api/v1/namespaces/default/configmaps/w2");
  EXPECT_EQ(Body(del)["status"], "Success");
  Json deleted = watch.NextJson();
  EXPECT_EQ(deleted["type"], "DELETED");
  // The DELETED object carries the deletion's own new resourceVersion.
  EXPECT_EQ(deleted["object"]["metadata"]["resourceVersion"],
            std::to_string(sim_->CurrentResourceVersion()));
}

TEST_F(KubeSimTest, WatchWithoutResourceVersionSendsInitialAdds) {
  CreateConfigMap("x1");
  StreamReader watch(sim_->port(), "/api/v1/namespaces/default/configmaps?watch=true");
  Json e = watch.NextJson();
  EXPECT_EQ(e["type"], "ADDED");
  EXPECT_EQ(e["object"]["metadata"]["name"], "x1");
}

TEST_F(KubeSimTest, WatchListEndsInitialEventsWithAnnotatedBookmark) {
  CreateConfigMap("l1");
  CreateConfigMap("l2");
  std::string rv = std::to_string(sim_->CurrentResourceVersion());
  StreamReader watch(sim_->port(),
                     "/api/v1/namespaces/default/configmaps?watch=1&sendInitialEvents=true&"
                     "resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true");
  EXPECT_EQ(watch.NextJson()["type"], "ADDED");
  EXPECT_EQ(watch.NextJson()["type"], "ADDED");
  Json bookmark = watch.NextJson();
  EXPECT_EQ(
      bookmark,
      Json::parse(
          R"({"type":"BOOKMARK","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"resourceVersion":")" +
          rv + R"(","annotations":{"k8s.io/initial-events-end":"true"}}}})"));
}

// A backlog bigger than one gathered chunk (256 KiB) arrives whole, in order, and each line is
// exactly the object a GET returns, wrapped: the stored rendering is the one every reader sees.
TEST_F(KubeSimTest, WatchBacklogLargerThanOneChunkArrivesWholeAndByteIdentical) {
  constexpr int kObjects = 300;
  const std::string from = std::to_string(sim_->CurrentResourceVersion());
  for (int i = 0; i < kObjects; ++i) {
    Json cm = {{"metadata", {{"name", "big-" + std::to_string(i)}}},
               {"data", {{"payload", std::string(2000, 'a' + i % 26)}}}};
    ASSERT_EQ(sim_->Call("POST", "/api/v1/namespaces/default/configmaps", cm.dump()).status, 201);
  }
  auto line_for = [&](const std::string& type, int i) {
    KubeSim::Response got =
        sim_->Call("GET", "/api/v1/namespaces/default/configmaps/big-" + std::to_string(i));
    return R"({"type":")" + type + R"(","object":)" + got.body + "}";
  };
  StreamReader resumed(sim_->port(),
                       "/api/v1/namespaces/default/configmaps?watch=1&resourceVersion=" + from);
  for (int i = 0; i < kObjects; ++i) ASSERT_EQ(resumed.Next(), line_for("ADDED", i)) << i;

  // The same through the initial events of a WatchList, then its end bookmark.
  StreamReader listed(sim_->port(),
                      "/api/v1/namespaces/default/configmaps?watch=1&sendInitialEvents=true&"
                      "resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true");
  std::vector<std::string> names;
  for (int i = 0; i < kObjects; ++i) names.push_back("big-" + std::to_string(i));
  std::sort(names.begin(), names.end());  // initial events come in key order
  for (const std::string& name : names) {
    ASSERT_EQ(listed.Next(), line_for("ADDED", std::stoi(name.substr(4)))) << name;
  }
  Json end = listed.NextJson();
  EXPECT_EQ(end["type"], "BOOKMARK");
  EXPECT_EQ(end["object"]["metadata"]["resourceVersion"],
            std::to_string(sim_->CurrentResourceVersion()));
}

// A selector watch sees an object enter (ADDED) and leave (DELETED) the selection as its labels
// change, and nothing of objects outside it or in other namespaces.
TEST_F(KubeSimTest, SelectorWatchReportsObjectsEnteringAndLeavingTheSelection) {
  CreateConfigMap("unrelated");
  Post("/api/v1/namespaces", {{"metadata", {{"name", "other"}}}});
  const std::string from = std::to_string(sim_->CurrentResourceVersion());
  StreamReader watch(sim_->port(),
                     "/api/v1/namespaces/default/configmaps?watch=1&labelSelector=app%3Dweb&"
                     "resourceVersion=" +
                         from);
  ASSERT_EQ(watch.status(), 200);
  auto post = [&](const std::string& ns, const std::string& name, const std::string& app) {
    Json cm = {{"metadata", {{"name", name}, {"labels", {{"app", app}}}}}, {"data", {{"k", "v"}}}};
    EXPECT_EQ(Post("/api/v1/namespaces/" + ns + "/configmaps", cm)->status, 201);
  };
  auto relabel = [&](const std::string& name, const std::string& app) {
    client_->Patch(("/api/v1/namespaces/default/configmaps/" + name).c_str(),
                   R"({"metadata":{"labels":{"app":")" + app + R"("}}})",
                   "application/merge-patch+json");
  };
  auto next = [&] {
    Json e = watch.NextJson();
    return e.is_null()
               ? std::string("(none)")
               : std::string(e["type"]) + " " + std::string(e["object"]["metadata"]["name"]) + " " +
                     e["object"]["metadata"]["labels"].value("app", "");
  };
  post("other", "elsewhere", "web");  // another namespace
  post("default", "db", "db");        // not selected
  post("default", "site", "web");
  EXPECT_EQ(next(), "ADDED site web");
  relabel("site", "db");
  EXPECT_EQ(next(), "DELETED site db");  // the object as it is now, no longer selected
  relabel("unrelated", "other");         // never selected
  relabel("db", "web");
  EXPECT_EQ(next(), "ADDED db web");
  client_->Patch("/api/v1/namespaces/default/configmaps/db", R"({"data":{"k":"new"}})",
                 "application/merge-patch+json");
  EXPECT_EQ(next(), "MODIFIED db web");
  client_->Delete("/api/v1/namespaces/default/configmaps/site");  // not selected when deleted
  client_->Delete("/api/v1/namespaces/default/configmaps/db");
  EXPECT_EQ(next(), "DELETED db web");
}

TEST_F(KubeSimTest, LegacyProfileRejectsWatchListWithReal422) {
  StartSim(KubeSimOptions{.profile = Profile::kLegacy});
  auto res = client_->Get(
      "/api/v1/namespaces/default/"
      "configmaps?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&"
      "allowWatchBookmarks=true");
  EXPECT_EQ(res->status, 422);
  EXPECT_EQ(
      res->body,
      R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"ListOptions.meta.k8s.io \"\" is invalid: sendInitialEvents: Forbidden: sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled","reason":"Invalid","details":{"group":"meta.k8s.io","kind":"ListOptions","causes":[{"reason":"FieldValueForbidden","message":"Forbidden: sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled","field":"sendInitialEvents"}]},"code":422})");
}

TEST_F(KubeSimTest, LegacyProfileShapes) {
  StartSim(
      KubeSimOptions{.profile = Profile::kLegacy, .bookmark_interval = absl::Milliseconds(50)});
  EXPECT_EQ(Body(client_->Get("/version"))["minor"], "33");
  // kubectl 1.27 asks for v2beta1 first; servers before 1.35 answer it.
  auto beta = client_->Get(
      "/api", {{"Accept",
                "application/"
                "json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json"}});
  EXPECT_EQ(beta->get_header_value("Content-Type"),
            "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList");
  Json core = Body(beta);
  EXPECT_EQ(core["apiVersion"], "apidiscovery.k8s.io/v2beta1");
  EXPECT_EQ(core["items"][0]["metadata"], Json::parse(R"({"creationTimestamp":null})"));
  std::string rv = std::to_string(sim_->CurrentResourceVersion());
  StreamReader watch(
      sim_->port(),
      "/api/v1/namespaces/default/configmaps?watch=1&allowWatchBookmarks=true&resourceVersion=" +
          rv);
  EXPECT_EQ(
      watch.NextJson(),
      Json::parse(
          R"({"type":"BOOKMARK","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"resourceVersion":")" +
          rv + R"(","creationTimestamp":null}}})"));
}

TEST_F(KubeSimTest, ModernRejectsSendInitialEventsWithoutMatch) {
  auto res = client_->Get("/api/v1/namespaces/default/configmaps?watch=1&sendInitialEvents=true");
  EXPECT_EQ(res->status, 422);
  EXPECT_EQ(Body(res)["message"],
            "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: "
            "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan");
}

TEST_F(KubeSimTest, WatchFromCompactedResourceVersionGets410ErrorEvent) {
  Json cm = CreateConfigMap("old");
  std::string rv = cm["metadata"]["resourceVersion"];
  CreateConfigMap("newer");
  sim_->Compact();
  StreamReader watch(sim_->port(),
                     "/api/v1/namespaces/default/configmaps?watch=1&resourceVersion=" + rv);
  EXPECT_EQ(watch.status(), 200);
  Json e = watch.NextJson();
  EXPECT_EQ(e["type"], "ERROR");
  EXPECT_EQ(e["object"]["code"], 410);
  EXPECT_EQ(e["object"]["reason"], "Expired");
  EXPECT_EQ(e["object"]["message"], "too old resource version: " + rv + " (" +
                                        std::to_string(sim_->CurrentResourceVersion()) + ")");
  EXPECT_TRUE(watch.WaitEnd());
}

TEST_F(KubeSimTest, HistoryWindowExpiresOldResourceVersions) {
  StartSim(KubeSimOptions{.history_limit = 2});
  Json cm = CreateConfigMap("h0");
  std::string rv = cm["metadata"]["resourceVersion"];
  for (const char* n : {"h1", "h2", "h3"}) CreateConfigMap(n);
  StreamReader watch(sim_->port(),
                     "/api/v1/namespaces/default/configmaps?watch=1&resourceVersion=" + rv);
  EXPECT_EQ(watch.NextJson()["object"]["code"], 410);
}

TEST_F(KubeSimTest, BookmarksAndTimeoutSeconds) {
  StartSim(KubeSimOptions{.bookmark_interval = absl::Milliseconds(100)});
  std::string rv = std::to_string(sim_->CurrentResourceVersion());
  StreamReader watch(
      sim_->port(),
      "/api/v1/namespaces/default/"
      "configmaps?watch=True&allowWatchBookmarks=True&timeoutSeconds=1&resourceVersion=" +
          rv);
  Json b = watch.NextJson();
  EXPECT_EQ(
      b,
      Json::parse(
          R"({"type":"BOOKMARK","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"resourceVersion":")" +
          rv + R"("}}})"));
  EXPECT_TRUE(watch.WaitEnd());
  EXPECT_TRUE(watch.clean_end());
}

TEST_F(KubeSimTest, FinalizerDeleteShowsModifiedThenDeleted) {
  auto res = Post("/api/v1/namespaces/default/configmaps",
                  {{"metadata", {{"name", "hold"}, {"finalizers", {"example.com/hold"}}}}});
  ASSERT_EQ(res->status, 201);
  std::string rv = Body(res)["metadata"]["resourceVersion"];
  StreamReader watch(sim_->port(),
                     "/api/v1/namespaces/default/configmaps?watch=1&resourceVersion=" + rv);
  auto del = client_->Delete("/api/v1/namespaces/default/configmaps/hold");
  EXPECT_EQ(del->status, 202);
  Json m = watch.NextJson();
  EXPECT_EQ(m["type"], "MODIFIED");
  EXPECT_TRUE(m["object"]["metadata"].contains("deletionTimestamp"));
  EXPECT_EQ(m["object"]["metadata"]["deletionGracePeriodSeconds"], 0);
  client_->Patch("/api/v1/namespaces/default/configmaps/hold",
                 R"({"metadata":{"finalizers":null}})", "application/merge-patch+json");
  Json d = watch.NextJson();
  EXPECT_EQ(d["type"], "DELETED");
  EXPECT_EQ(client_->Get("/api/v1/namespaces/default/configmaps/hold")->status, 404);
}

TEST_F(KubeSimTest, DeleteCollectionEmitsOneDeletedPerObject) {
  for (const char* n : {"a", "b", "c"}) CreateConfigMap(n);
  std::string rv = std::to_string(sim_->CurrentResourceVersion());
  StreamReader watch(sim_->port(),
                     "/api/v1/namespaces/default/configmaps?watch=1&resourceVersion=" + rv);
  auto res = client_->Delete("/api/v1/namespaces/default/configmaps");
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(Body(res)["items"].size(), 3u);
  for (const char* n : {"a", "b", "c"}) {
    Json e = watch.NextJson();
    EXPECT_EQ(e["type"], "DELETED");
    EXPECT_EQ(e["object"]["metadata"]["name"], n);
  }
}

TEST_F(KubeSimTest, DropWatchesCutsTheStream) {
  StreamReader watch(sim_->port(),
                     "/api/v1/namespaces/default/configmaps?watch=1&resourceVersion=" +
                         std::to_string(sim_->CurrentResourceVersion()));
  ASSERT_EQ(watch.status(), 200);
  sim_->DropWatches();
  EXPECT_TRUE(watch.WaitEnd());
  EXPECT_FALSE(watch.clean_end());
}

// ----- CRDs

TEST_F(KubeSimTest, CrdAddsTypeToDiscoveryAndRemovesItOnDelete) {
  Json crd = {{"apiVersion", "apiextensions.k8s.io/v1"},
              {"kind", "CustomResourceDefinition"},
              {"metadata", {{"name", "widgets.example.com"}}},
              {"spec",
               {{"group", "example.com"},
                {"scope", "Namespaced"},
                {"names", {{"plural", "widgets"}, {"singular", "widget"}, {"kind", "Widget"}}},
                {"versions",
                 {{{"name", "v1"},
                   {"served", true},
                   {"storage", true},
                   {"subresources", {{"status", Json::object()}}},
                   {"schema", {{"openAPIV3Schema", {{"type", "object"}}}}}}}}}}};
  ASSERT_EQ(Post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)->status, 201);
  Json list = Body(client_->Get("/apis/example.com/v1"));
  EXPECT_EQ(list["resources"][0]["name"], "widgets");
  auto w =
      Post("/apis/example.com/v1/namespaces/default/widgets", {{"apiVersion", "example.com/v1"},
                                                               {"kind", "Widget"},
                                                               {"metadata", {{"name", "w"}}},
                                                               {"spec", {{"size", 1}}},
                                                               {"status", {{"ok", true}}}});
  ASSERT_EQ(w->status, 201) << w->body;
  EXPECT_FALSE(Body(w).contains("status"));  // status subresource: dropped on create
  EXPECT_EQ(Body(w)["metadata"]["generation"], 1);
  auto smp = client_->Patch("/apis/example.com/v1/namespaces/default/widgets/w", "{}",
                            "application/strategic-merge-patch+json");
  EXPECT_EQ(smp->status, 415);
  ASSERT_EQ(
      client_->Delete("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.example.com")
          ->status,
      200);
  EXPECT_EQ(client_->Get("/apis/example.com/v1")->status, 404);
  EXPECT_EQ(client_->Get("/apis/example.com/v1/namespaces/default/widgets/w")->status, 404);
}

// A CRD whose schema uses what reverser's CRDs use: defaults, enums, bounds, patterns, an allOf,
// a list-map, a status subresource and an immutability rule.
Json GadgetCrd() {
  return Json::parse(R"({
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "gadgets.example.com"},
    "spec": {"group": "example.com", "scope": "Namespaced",
      "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget",
                "listKind": "GadgetList"},
      "versions": [{"name": "v1", "served": true, "storage": true,
        "subresources": {"status": {}},
        "schema": {"openAPIV3Schema": {"type": "object", "required": ["spec"], "properties": {
          "apiVersion": {"type": "string"}, "kind": {"type": "string"},
          "metadata": {"type": "object"},
          "spec": {"type": "object", "required": ["url"],
            "x-kubernetes-validations": [{"rule": "self.url == oldSelf.url",
              "message": "spec.url is immutable; delete and recreate the Gadget"}],
            "properties": {
              "url": {"type": "string", "minLength": 1},
              "ref": {"type": "object", "required": ["name"], "properties": {
                "group": {"type": "string", "default": "example.com", "enum": ["example.com"]},
                "kind": {"type": "string", "default": "Secret", "enum": ["Secret"]},
                "name": {"type": "string", "minLength": 1}}},
              "scope": {"type": "string", "allOf": [{"enum": ["Cluster", "Namespaced"]},
                                                    {"enum": ["Cluster", "Namespaced"]}]},
              "delay": {"type": "integer", "format": "int32", "minimum": 0, "maximum": 300}}},
          "status": {"type": "object", "properties": {
            "conditions": {"type": "array", "x-kubernetes-list-type": "map",
              "x-kubernetes-list-map-keys": ["type"],
              "items": {"type": "object", "required": ["type", "status"], "properties": {
                "type": {"type": "string"},
                "status": {"type": "string", "enum": ["True", "False", "Unknown"]}}}}}}}}}}]}})");
}

class KubeSimCrdSchemaTest : public KubeSimTest {
 protected:
  void SetUp() override {
    KubeSimTest::SetUp();
    auto created = Post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", GadgetCrd());
    ASSERT_EQ(created->status, 201) << created->body;
  }
  static constexpr char kGadgets[] = "/apis/example.com/v1/namespaces/default/gadgets";
  static Json Gadget(const Json& spec) {
    return {{"apiVersion", "example.com/v1"},
            {"kind", "Gadget"},
            {"metadata", {{"name", "g"}}},
            {"spec", spec}};
  }
};

TEST_F(KubeSimCrdSchemaTest, SchemaIsPublishedInOpenApiV3) {
  Json doc = Body(client_->Get("/openapi/v3/apis/example.com/v1"));
  const Json& schema = doc["components"]["schemas"]["com.example.v1.Gadget"];
  EXPECT_EQ(schema["x-kubernetes-group-version-kind"],
            Json::parse(R"([{"group":"example.com","version":"v1","kind":"Gadget"}])"));
  EXPECT_EQ(schema["properties"]["spec"]["properties"]["url"]["minLength"], 1);
}

TEST_F(KubeSimCrdSchemaTest, UnknownFieldsByFieldValidation) {
  Json body = Gadget({{"url", "u"}, {"ref", {{"name", "s"}, {"bogus", 1}}}, {"extra", true}});
  auto strict = Post(std::string(kGadgets) + "?fieldValidation=Strict", body);
  EXPECT_EQ(strict->status, 400);
  EXPECT_EQ(Body(strict)["message"],
            "Gadget in version \"v1\" cannot be handled as a Gadget: strict decoding error: "
            "unknown field \"spec.extra\", unknown field \"spec.ref.bogus\"");
  EXPECT_EQ(Body(strict)["reason"], "BadRequest");

  // Warn (also the default): stored without the fields, one warning header per field.
  auto warned = Post(kGadgets, body);
  ASSERT_EQ(warned->status, 201) << warned->body;
  std::vector<std::string> warnings;
  for (const auto& [k, v] : warned->headers) {
    if (k == "Warning") warnings.push_back(v);
  }
  EXPECT_THAT(warnings, ElementsAre("299 - \"unknown field \\\"spec.extra\\\"\"",
                                    "299 - \"unknown field \\\"spec.ref.bogus\\\"\""));
  Json stored = Body(client_->Get((std::string(kGadgets) + "/g").c_str()));
  EXPECT_FALSE(stored["spec"].contains("extra"));
  EXPECT_EQ(
      stored["spec"]["ref"],
      Json({{"group", "example.com"}, {"kind", "Secret"}, {"name", "s"}}));  // defaults filled in

  auto ignored = client_->Put((std::string(kGadgets) + "/g?fieldValidation=Ignore").c_str(),
                              Gadget({{"url", "u"}, {"x", 1}}).dump(), "application/json");
  EXPECT_EQ(ignored->status, 200) << ignored->body;
  EXPECT_FALSE(ignored->has_header("Warning"));

  // Server-side apply types the patch: an undeclared field fails whatever fieldValidation says.
  auto applied = client_->Patch(
      (std::string(kGadgets) + "/g?fieldManager=tool&fieldValidation=Ignore").c_str(),
      Gadget({{"url", "u"}, {"nope", 1}}).dump(), "application/apply-patch+yaml");
  EXPECT_EQ(applied->status, 500);
  EXPECT_EQ(Body(applied)["message"],
            "failed to create typed patch object (example.com/v1, Kind=Gadget): .spec.nope: field "
            "not declared in schema");
}

TEST_F(KubeSimCrdSchemaTest, InvalidValuesAre422WithApiextensionsMessages) {
  auto bad =
      Post(kGadgets,
           Gadget({{"url", ""}, {"ref", {{"group", "other.io"}, {"name", "s"}}}, {"delay", 301}}));
  EXPECT_EQ(bad->status, 422);
  Json status = Body(bad);
  EXPECT_EQ(status["reason"], "Invalid");
  EXPECT_EQ(status["message"],
            "Gadget.example.com \"g\" is invalid: [spec.delay: Invalid value: 301: spec.delay in "
            "body should be less than or equal to 300, spec.ref.group: Unsupported value: "
            "\"other.io\": supported values: \"example.com\", spec.url: Invalid value: \"\": "
            "spec.url in body should be at least 1 chars long, <nil>: Invalid value: \"null\": "
            "some validation rules were not checked because the object was invalid; correct the "
            "existing errors to complete validation]");
  EXPECT_EQ(status["details"]["causes"][1],
            Json({{"reason", "FieldValueNotSupported"},
                  {"message",
                   "Unsupported value: \"other.io\": supported values: "
                   "\"example.com\""},
                  {"field", "spec.ref.group"}}));

  // allOf: each failing subschema, then the composite error; the message lists each once.
  auto scope = Post(kGadgets, Gadget({{"url", "u"}, {"scope", "Everywhere"}}));
  EXPECT_EQ(scope->status, 422);
  EXPECT_EQ(Body(scope)["details"]["causes"].size(), 4u);
  EXPECT_THAT(Body(scope)["message"].get<std::string>(),
              HasSubstr("[spec.scope: Unsupported value: \"Everywhere\": supported values: "
                        "\"Cluster\", \"Namespaced\", <nil>: Invalid value: \"\": spec.scope must "
                        "validate all the schemas (allOf). None validated, "));

  auto missing = Post(kGadgets, Gadget(Json::object()));
  EXPECT_EQ(Body(missing)["message"],
            "Gadget.example.com \"g\" is invalid: spec.url: Required value");
  // Nothing was stored by the refused writes.
  EXPECT_EQ(client_->Get((std::string(kGadgets) + "/g").c_str())->status, 404);
}

TEST_F(KubeSimCrdSchemaTest, TransitionRulesAndStatusWrites) {
  ASSERT_EQ(Post(kGadgets, Gadget({{"url", "u"}}))->status, 201);
  const std::string path = std::string(kGadgets) + "/g";
  auto moved =
      client_->Patch(path.c_str(), R"({"spec":{"url":"v"}})", "application/merge-patch+json");
  EXPECT_EQ(moved->status, 422);
  EXPECT_EQ(Body(moved)["message"],
            "Gadget.example.com \"g\" is invalid: spec: Invalid value: \"object\": spec.url is "
            "immutable; delete and recreate the Gadget");
  auto same =
      client_->Patch(path.c_str(), R"({"spec":{"delay":5}})", "application/merge-patch+json");
  EXPECT_EQ(same->status, 200) << same->body;

  // The status subresource is validated too: list-map keys unique, enums.
  auto dup = client_->Patch(
      (path + "/status").c_str(),
      R"({"status":{"conditions":[{"type":"Ready","status":"True"},{"type":"Ready","status":"Maybe"}]}})",
      "application/merge-patch+json");
  EXPECT_EQ(dup->status, 422);
  EXPECT_THAT(Body(dup)["message"].get<std::string>(),
              HasSubstr("status.conditions[1].status: Unsupported value: \"Maybe\""));
  EXPECT_THAT(Body(dup)["message"].get<std::string>(),
              HasSubstr("status.conditions[1]: Duplicate value: map[string]interface "
                        "{}{\"type\":\"Ready\"}"));
  auto ok = client_->Patch((path + "/status").c_str(),
                           R"({"status":{"conditions":[{"type":"Ready","status":"True"}]}})",
                           "application/merge-patch+json");
  EXPECT_EQ(ok->status, 200) << ok->body;
}

TEST_F(KubeSimTest, CrdWithUnsupportedRuleOrNonStructuralSchemaIsRefused) {
  Json crd = GadgetCrd();
  crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
     ["x-kubernetes-validations"][0]["rule"] = "self.url.lowerAscii() == oldSelf.url";
  auto refused = Post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd);
  EXPECT_EQ(refused->status, 422);
  EXPECT_THAT(Body(refused)["message"].get<std::string>(),
              HasSubstr("spec.versions[0].schema.openAPIV3Schema.properties[spec]."
                        "x-kubernetes-validations[0].rule: Invalid value: \"self.url.lowerAscii() "
                        "== oldSelf.url\": compilation failed: "));
  Json untyped = GadgetCrd();
  untyped["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
         ["url"] = Json::object();
  auto non_structural = Post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", untyped);
  EXPECT_EQ(non_structural->status, 422);
  EXPECT_THAT(Body(non_structural)["message"].get<std::string>(),
              HasSubstr("properties[url].type: Required value: must not be empty for specified "
                        "object fields"));
  EXPECT_EQ(client_->Get("/apis/example.com/v1")->status, 404);
}

// ----- auth and faults

TEST_F(KubeSimTest, TokensRbacAndImpersonation) {
  sim_->authenticator().AddToken("admin-token", {"admin", "", {"system:masters"}, {}});
  sim_->authenticator().AddToken("reader-token",
                                 {"system:serviceaccount:mirror:reverser", "", {}, {}});
  sim_->authorizer().AddRule(
      {{"system:serviceaccount:mirror:reverser"}, {}, {"get", "list"}, {""}, {"configmaps"}, {}});
  auto bad =
      client_->Get("/api/v1/namespaces/default/configmaps", {{"Authorization", "Bearer nope"}});
  EXPECT_EQ(bad->status, 401);
  EXPECT_EQ(Body(bad)["message"], "Unauthorized");
  EXPECT_EQ(sim_->Call("GET", "/api/v1/namespaces/default/configmaps").status,
            200);  // in-process: admin
  auto ok = client_->Get("/api/v1/namespaces/default/configmaps",
                         {{"Authorization", "Bearer reader-token"}});
  EXPECT_EQ(ok->status, 200);
  auto forbidden = client_->Get("/api/v1/namespaces/default/configmaps?watch=1",
                                {{"Authorization", "Bearer reader-token"}});
  EXPECT_EQ(forbidden->status, 403);
  EXPECT_EQ(Body(forbidden)["message"],
            "configmaps is forbidden: User \"system:serviceaccount:mirror:reverser\" cannot watch "
            "resource \"configmaps\" in API group \"\" in the namespace \"default\"");
  auto cluster =
      client_->Get("/apis/apps/v1/deployments", {{"Authorization", "Bearer reader-token"}});
  EXPECT_EQ(Body(cluster)["message"],
            "deployments.apps is forbidden: User \"system:serviceaccount:mirror:reverser\" cannot "
            "list resource \"deployments\" in API group \"apps\" at the cluster scope");
  // The admin may impersonate; the result is judged as the impersonated user.
  auto as = client_->Get("/apis/apps/v1/deployments",
                         {{"Authorization", "Bearer admin-token"},
                          {"Impersonate-User", "system:serviceaccount:mirror:reverser"}});
  EXPECT_EQ(as->status, 403);
  auto reader_as =
      client_->Get("/api/v1/namespaces/default/configmaps",
                   {{"Authorization", "Bearer reader-token"}, {"Impersonate-User", "admin"}});
  EXPECT_EQ(reader_as->status, 403);
  EXPECT_THAT(Body(reader_as)["message"].get<std::string>(),
              HasSubstr("cannot impersonate resource \"users\""));
}

// ----- TokenReview and SubjectAccessReview

class KubeSimReviewTest : public KubeSimTest {
 protected:
  void SetUp() override {
    KubeSimTest::SetUp();
    // The reviewing service holds what system:auth-delegator grants.
    sim_->authenticator().AddToken("reviewer-token",
                                   {"system:serviceaccount:mirror:reverser", "sa-uid", {}, {}});
    sim_->authenticator().AddToken("operator-token",
                                   {"alice", "uid-1", {"dev"}, {{"scopes", {"mirror", "read"}}}});
    sim_->authenticator().AddToken("master-token", {"root", "", {"system:masters"}, {}});
    sim_->authorizer().AddRule({{"system:serviceaccount:mirror:reverser"},
                                {},
                                {"create"},
                                {"authentication.k8s.io"},
                                {"tokenreviews"},
                                {}});
    sim_->authorizer().AddRule({{"system:serviceaccount:mirror:reverser"},
                                {},
                                {"create"},
                                {"authorization.k8s.io"},
                                {"subjectaccessreviews"},
                                {}});
  }
  httplib::Result Review(const std::string& resource, const Json& body,
                         const std::string& token = "reviewer-token") {
    const std::string group =
        resource == "tokenreviews" ? "authentication.k8s.io" : "authorization.k8s.io";
    return client_->Post(("/apis/" + group + "/v1/" + resource).c_str(),
                         {{"Authorization", "Bearer " + token}}, body.dump(), "application/json");
  }
  Json TokenReview(const std::string& token, const Json& audiences = nullptr) {
    Json spec = {{"token", token}};
    if (!audiences.is_null()) spec["audiences"] = audiences;
    auto res = Review(
        "tokenreviews",
        {{"apiVersion", "authentication.k8s.io/v1"}, {"kind", "TokenReview"}, {"spec", spec}});
    EXPECT_EQ(res->status, 201) << res->body;
    return Body(res);
  }
  Json AccessReview(const Json& spec) {
    auto res = Review("subjectaccessreviews", {{"apiVersion", "authorization.k8s.io/v1"},
                                               {"kind", "SubjectAccessReview"},
                                               {"spec", spec}});
    EXPECT_EQ(res->status, 201) << res->body;
    return Body(res);
  }
};

TEST_F(KubeSimReviewTest, TokenReviewOfKnownAndUnknownTokens) {
  Json known = TokenReview("operator-token");
  EXPECT_EQ(known["kind"], "TokenReview");
  EXPECT_EQ(known["apiVersion"], "authentication.k8s.io/v1");
  EXPECT_EQ(known["spec"], Json({{"token", "operator-token"}}));  // echoed, as real servers do
  EXPECT_EQ(known["status"], Json::parse(R"({"authenticated":true,
                            "user":{"username":"alice","uid":"uid-1",
                                    "groups":["dev","system:authenticated"],
                                    "extra":{"scopes":["mirror","read"]}},
                            "audiences":["https://kubernetes.default.svc.cluster.local"]})"));
  // The create handler's field manager ran (manager from the User-Agent), nothing was stored.
  EXPECT_EQ(known["metadata"]["managedFields"][0]["fieldsV1"],
            Json::parse(R"({"f:spec":{"f:token":{}}})"));
  EXPECT_FALSE(known["metadata"].contains("creationTimestamp"));  // modern: omitted

  // An unknown token is still a 201: authenticated is omitted (false), user is empty.
  Json unknown = TokenReview("no-such-token");
  EXPECT_EQ(unknown["status"], Json::parse(R"({"user":{},"error":"invalid bearer token"})"));

  // Audiences: the server's that the review asks for; none in common is not authenticated.
  Json both = TokenReview(
      "operator-token", {"https://other.example", "https://kubernetes.default.svc.cluster.local"});
  EXPECT_EQ(both["status"]["audiences"], Json({"https://kubernetes.default.svc.cluster.local"}));
  EXPECT_EQ(both["spec"]["audiences"].size(), 2u);
  Json other = TokenReview("operator-token", {"https://other.example"});
  EXPECT_EQ(other["status"], Json::parse(R"({"user":{},"error":"invalid bearer token"})"));

  auto empty = Review("tokenreviews", {{"spec", Json::object()}});
  EXPECT_EQ(empty->status, 400);
  EXPECT_EQ(Body(empty)["message"], "token is required for TokenReview in authentication");
}

TEST_F(KubeSimReviewTest, SubjectAccessReviewDecidesByRbacRules) {
  sim_->authorizer().AddRule({{"alice"}, {}, {"get", "list"}, {""}, {"configmaps"}, {"default"}});
  sim_->authorizer().AddRule({{}, {"ops"}, {"get"}, {}, {}, {}, {"/metrics", "/debug/*"}});
  Json allowed =
      AccessReview({{"user", "alice"},
                    {"uid", "uid-1"},
                    {"groups", {"dev", "system:authenticated"}},
                    {"resourceAttributes",
                     {{"namespace", "default"}, {"verb", "list"}, {"resource", "configmaps"}}}});
  EXPECT_EQ(
      allowed["status"],
      Json::parse(
          R"({"allowed":true,"reason":"RBAC: allowed by kube-sim rule 2 to User \"alice\""})"));
  EXPECT_EQ(allowed["spec"]["resourceAttributes"],
            Json::parse(R"({"namespace":"default","verb":"list","resource":"configmaps"})"));
  EXPECT_EQ(allowed["spec"]["uid"], "uid-1");

  // Denied: allowed false, no reason, no denied (RBAC only ever has no opinion).
  for (const Json& attrs :
       {Json{{"namespace", "default"}, {"verb", "delete"}, {"resource", "configmaps"}},
        Json{{"namespace", "kube-system"}, {"verb", "get"}, {"resource", "configmaps"}},
        Json{{"verb", "list"}, {"resource", "configmaps"}},  // all namespaces
        Json{{"namespace", "default"},
             {"verb", "get"},
             {"group", "apps"},
             {"resource", "deployments"}}}) {
    Json denied = AccessReview({{"user", "alice"}, {"resourceAttributes", attrs}});
    EXPECT_EQ(denied["status"], Json({{"allowed", false}})) << attrs;
  }
  // system:masters is always allowed, by the privileged-group authorizer (no reason).
  Json master = AccessReview({{"user", "someone"},
                              {"groups", {"system:masters"}},
                              {"resourceAttributes", {{"verb", "*"}, {"resource", "*"}}}});
  EXPECT_EQ(master["status"], Json({{"allowed", true}}));

  // Non-resource attributes: rules with nonResourceURLs, and the discovery bootstrap binding.
  Json metrics =
      AccessReview({{"user", "bob"},
                    {"groups", {"ops"}},
                    {"nonResourceAttributes", {{"path", "/debug/pprof"}, {"verb", "get"}}}});
  EXPECT_EQ(metrics["status"]["allowed"], true);
  EXPECT_EQ(metrics["status"]["reason"], "RBAC: allowed by kube-sim rule 3 to Group \"ops\"");
  EXPECT_EQ(
      AccessReview({{"user", "bob"},
                    {"groups", {"dev"}},
                    {"nonResourceAttributes", {{"path", "/metrics"}, {"verb", "get"}}}})["status"],
      Json({{"allowed", false}}));
  EXPECT_EQ(AccessReview({{"user", "bob"},
                          {"groups", {"system:authenticated"}},
                          {"nonResourceAttributes",
                           {{"path", "/apis/apps/v1"}, {"verb", "get"}}}})["status"]["reason"],
            "RBAC: allowed by ClusterRoleBinding \"system:discovery\" of ClusterRole "
            "\"system:discovery\" to Group \"system:authenticated\"");
  // A URL-only rule grants no resources.
  EXPECT_EQ(AccessReview({{"user", "bob"},
                          {"groups", {"ops"}},
                          {"resourceAttributes",
                           {{"verb", "get"}, {"resource", "pods"}}}})["status"]["allowed"],
            false);

  // With RBAC off everything is allowed.
  sim_->authorizer().Clear();
  EXPECT_EQ(AccessReview(
                {{"user", "nobody"},
                 {"resourceAttributes", {{"verb", "delete"}, {"resource", "secrets"}}}})["status"],
            Json({{"allowed", true}}));
}

TEST_F(KubeSimReviewTest, TheCallerNeedsCreateOnTheReviewAndOtherVerbsAre405) {
  // The operator's own token may not review: the request itself is authorized first.
  auto tr = Review("tokenreviews", {{"spec", {{"token", "reviewer-token"}}}}, "operator-token");
  EXPECT_EQ(tr->status, 403);
  EXPECT_EQ(
      Body(tr)["message"],
      "tokenreviews.authentication.k8s.io is forbidden: User \"alice\" cannot create "
      "resource \"tokenreviews\" in API group \"authentication.k8s.io\" at the cluster scope");
  auto sar = Review("subjectaccessreviews",
                    {{"spec", {{"user", "alice"}, {"resourceAttributes", {{"verb", "get"}}}}}},
                    "operator-token");
  EXPECT_EQ(sar->status, 403);
  EXPECT_EQ(Body(sar)["message"],
            "subjectaccessreviews.authorization.k8s.io is forbidden: User \"alice\" cannot create "
            "resource \"subjectaccessreviews\" in API group \"authorization.k8s.io\" at the "
            "cluster scope");
  auto bad_token = Review("tokenreviews", {{"spec", {{"token", "x"}}}}, "wrong");
  EXPECT_EQ(bad_token->status, 401);

  // Reviews are not stored: list/get/watch are the router's 405 (after authorization), a name
  // is a path it does not serve.
  const httplib::Headers master = {{"Authorization", "Bearer master-token"}};
  const std::string kMethodNotAllowed =
      R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"the server does not allow this method on the requested resource","reason":"MethodNotAllowed","details":{},"code":405})";
  for (const char* path : {"/apis/authentication.k8s.io/v1/tokenreviews",
                           "/apis/authentication.k8s.io/v1/tokenreviews?watch=1",
                           "/apis/authorization.k8s.io/v1/subjectaccessreviews"}) {
    auto res = client_->Get(path, master);
    EXPECT_EQ(res->status, 405) << path;
    EXPECT_EQ(res->body, kMethodNotAllowed) << path;
  }
  EXPECT_EQ(client_->Delete("/apis/authentication.k8s.io/v1/tokenreviews", master)->status, 405);
  EXPECT_EQ(client_->Get("/apis/authentication.k8s.io/v1/tokenreviews/x", master)->status, 404);
  EXPECT_EQ(client_->Get("/apis/authentication.k8s.io/v1/namespaces/default/tokenreviews", master)
                ->status,
            404);
  auto reader = client_->Get("/apis/authentication.k8s.io/v1/tokenreviews",
                             {{"Authorization", "Bearer operator-token"}});
  EXPECT_EQ(reader->status, 403);
  EXPECT_THAT(Body(reader)["message"].get<std::string>(),
              HasSubstr("cannot list resource \"tokenreviews\""));
}

TEST_F(KubeSimReviewTest, MalformedReviewsGetTheRealErrors) {
  auto parse =
      client_->Post("/apis/authentication.k8s.io/v1/tokenreviews",
                    {{"Authorization", "Bearer reviewer-token"}}, "{not json", "application/json");
  EXPECT_EQ(parse->status, 400);
  EXPECT_THAT(Body(parse)["message"].get<std::string>(), HasSubstr("json parse error"));
  auto typed = Review("tokenreviews", {{"spec", {{"token", 42}}}});
  EXPECT_EQ(typed->status, 400);
  EXPECT_EQ(Body(typed)["message"],
            "TokenReview in version \"v1\" cannot be handled as a TokenReview: json: cannot "
            "unmarshal number into Go struct field TokenReviewSpec.spec.token of type string");
  auto groups = Review("subjectaccessreviews", {{"spec", {{"groups", "dev"}}}});
  EXPECT_EQ(groups->status, 400);
  EXPECT_EQ(
      Body(groups)["message"],
      "SubjectAccessReview in version \"v1\" cannot be handled as a SubjectAccessReview: "
      "json: cannot unmarshal string into Go struct field SubjectAccessReviewSpec.spec.groups "
      "of type []string");
  auto kind = Review("tokenreviews", {{"kind", "SubjectAccessReview"}, {"spec", Json::object()}});
  EXPECT_EQ(kind->status, 400);
  EXPECT_THAT(Body(kind)["message"].get<std::string>(),
              HasSubstr("cannot be handled as a TokenReview"));

  // Neither attribute set, no subject: the validation's 422. The REST layer names the kind from
  // the decoded internal object, whose TypeMeta is empty (hence ".authorization.k8s.io").
  auto neither = Review("subjectaccessreviews", {{"spec", Json::object()}});
  EXPECT_EQ(neither->status, 422);
  EXPECT_EQ(
      neither->body,
      R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":".authorization.k8s.io \"\" is invalid: [spec.resourceAttributes: Invalid value: null: exactly one of nonResourceAttributes or resourceAttributes must be specified, spec.user: Invalid value: \"\": at least one of user or group must be specified]","reason":"Invalid","details":{"group":"authorization.k8s.io","causes":[{"reason":"FieldValueInvalid","message":"Invalid value: null: exactly one of nonResourceAttributes or resourceAttributes must be specified","field":"spec.resourceAttributes"},{"reason":"FieldValueInvalid","message":"Invalid value: \"\": at least one of user or group must be specified","field":"spec.user"}]},"code":422})");
  auto both = Review("subjectaccessreviews",
                     {{"spec",
                       {{"user", "alice"},
                        {"resourceAttributes", {{"verb", "get"}}},
                        {"nonResourceAttributes", {{"path", "/x"}, {"verb", "get"}}}}}});
  EXPECT_EQ(both->status, 422);
  EXPECT_EQ(Body(both)["message"],
            ".authorization.k8s.io \"\" is invalid: spec.nonResourceAttributes: Invalid value: "
            "authorization.NonResourceAttributes{Path:\"/x\", Verb:\"get\"}: cannot be specified "
            "in combination with resourceAttributes");
  auto named = Review("subjectaccessreviews",
                      {{"metadata", {{"name", "x"}}},
                       {"spec", {{"user", "alice"}, {"resourceAttributes", {{"verb", "get"}}}}}});
  EXPECT_EQ(named->status, 422);
  EXPECT_THAT(Body(named)["message"].get<std::string>(), HasSubstr("metadata: Invalid value: "));
  EXPECT_THAT(Body(named)["message"].get<std::string>(), HasSubstr(": must be empty"));
}

TEST_F(KubeSimTest, ReviewsInDiscoveryAndOpenApi) {
  Json groups = Body(client_->Get("/apis"));
  std::vector<std::string> names;
  for (const auto& g : groups["groups"]) names.push_back(g["name"]);
  EXPECT_THAT(names, ElementsAre("apps", "authentication.k8s.io", "authorization.k8s.io",
                                 "policy", "rbac.authorization.k8s.io",
                                 "admissionregistration.k8s.io", "apiextensions.k8s.io",
                                 "coordination.k8s.io"));
  EXPECT_EQ(
      client_->Get("/apis/authentication.k8s.io/v1")->body,
      R"({"apiVersion":"v1","groupVersion":"authentication.k8s.io/v1","kind":"APIResourceList","resources":[{"kind":"TokenReview","name":"tokenreviews","namespaced":false,"singularName":"tokenreview","verbs":["create"]}]})");
  EXPECT_EQ(
      client_->Get("/apis/authorization.k8s.io/v1")->body,
      R"({"apiVersion":"v1","groupVersion":"authorization.k8s.io/v1","kind":"APIResourceList","resources":[{"kind":"SubjectAccessReview","name":"subjectaccessreviews","namespaced":false,"singularName":"subjectaccessreview","verbs":["create"]}]})");
  const char* accept = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";
  Json aggregated = Body(client_->Get("/apis", {{"Accept", accept}}));
  ASSERT_EQ(aggregated["items"][1]["metadata"]["name"], "authentication.k8s.io");
  // As kube-apiserver's aggregated document (tests/testdata/k8s/discovery).
  EXPECT_EQ(
      aggregated["items"][1]["versions"][0]["resources"][0],
      Json::parse(
          R"({"resource":"tokenreviews","responseKind":{"group":"","kind":"TokenReview","version":""},
                            "scope":"Cluster","singularResource":"tokenreview","verbs":["create"]})"));
  Json root = Body(client_->Get("/openapi/v3"));
  std::string url = root["paths"]["apis/authorization.k8s.io/v1"]["serverRelativeURL"];
  Json doc = Body(client_->Get(url.c_str()));
  const Json& path = doc["paths"]["/apis/authorization.k8s.io/v1/subjectaccessreviews"];
  EXPECT_EQ(path["post"]["x-kubernetes-action"], "post");
  EXPECT_FALSE(path.contains("patch"));
}

TEST_F(KubeSimTest, ReviewsWithoutTokensOrRbacAndInTheLegacyProfile) {
  StartSim({.profile = Profile::kLegacy});
  // No token file: every token is the default user, as every request is.
  auto res =
      Post("/apis/authentication.k8s.io/v1/tokenreviews", {{"spec", {{"token", "anything"}}}});
  ASSERT_EQ(res->status, 201) << res->body;
  Json tr = Body(res);
  EXPECT_EQ(tr["status"]["user"]["username"], "system:admin");
  EXPECT_EQ(tr["metadata"]["creationTimestamp"], nullptr);  // before 1.34: null
  EXPECT_TRUE(tr["metadata"].contains("creationTimestamp"));
  auto neither =
      Post("/apis/authorization.k8s.io/v1/subjectaccessreviews", {{"spec", {{"user", "u"}}}});
  EXPECT_EQ(neither->status, 422);
  EXPECT_EQ(Body(neither)["message"],
            ".authorization.k8s.io \"\" is invalid: spec.resourceAttributes: Invalid value: "
            "\"null\": exactly one of nonResourceAttributes or resourceAttributes must be "
            "specified");
}

TEST_F(KubeSimTest, FaultInjectionViaApiAndAdminEndpoint) {
  sim_->faults().Add({.action = FaultRule::Action::kTooManyRequests,
                      .verb = "list",
                      .retry_after_seconds = 2,
                      .times = 1});
  auto limited = client_->Get("/api/v1/namespaces/default/configmaps");
  EXPECT_EQ(limited->status, 429);
  EXPECT_EQ(limited->get_header_value("Retry-After"), "2");
  EXPECT_EQ(limited->get_header_value("Content-Type"), "text/plain; charset=utf-8");
  EXPECT_EQ(limited->body, "Too many requests, please try again later.\n");
  EXPECT_EQ(client_->Get("/api/v1/namespaces/default/configmaps")->status, 200);  // times=1

  auto added = client_->Post("/_sim/faults",
                             R"({"action":"503","resource":"secrets","retryAfterSeconds":1})",
                             "application/json");
  ASSERT_EQ(added->status, 200) << added->body;
  auto unavailable = client_->Get("/api/v1/namespaces/default/secrets");
  EXPECT_EQ(unavailable->status, 503);
  EXPECT_EQ(unavailable->get_header_value("Retry-After"), "1");
  EXPECT_EQ(Body(unavailable)["reason"], "ServiceUnavailable");
  EXPECT_EQ(client_->Delete("/_sim/faults")->status, 200);
  EXPECT_EQ(client_->Get("/api/v1/namespaces/default/secrets")->status, 200);
  EXPECT_EQ(client_->Post("/_sim/faults", R"({"action":"boom"})", "application/json")->status, 400);
}

TEST_F(KubeSimTest, CutWatchFaultEndsAReplayBeforeItsEndBookmark) {
  CreateConfigMap("one");
  CreateConfigMap("two");
  CreateConfigMap("three");
  auto added = client_->Post(
      "/_sim/faults", R"({"action":"cut-watch","resource":"configmaps","afterEvents":1,"times":1})",
      "application/json");
  ASSERT_EQ(added->status, 200) << added->body;
  // A watch resuming from a resourceVersion sends no initial events: the rule does not match it.
  {
    StreamReader resume(sim_->port(),
                        "/api/v1/namespaces/default/configmaps?watch=1&resourceVersion=" +
                            std::to_string(sim_->CurrentResourceVersion()));
    ASSERT_EQ(resume.status(), 200);
  }
  const std::string watch_list =
      "/api/v1/namespaces/default/configmaps?watch=1&sendInitialEvents=true"
      "&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true";
  StreamReader cut(sim_->port(), watch_list);
  ASSERT_EQ(cut.status(), 200);
  EXPECT_EQ(cut.NextJson()["type"], "ADDED");
  EXPECT_TRUE(cut.WaitEnd());
  EXPECT_EQ(cut.Next(absl::Milliseconds(10)), "");  // no second object, no bookmark
  EXPECT_FALSE(cut.clean_end());                    // the connection dropped mid-stream
  // times=1: the next replay is whole.
  StreamReader whole(sim_->port(), watch_list);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(whole.NextJson()["type"], "ADDED");
  Json end = whole.NextJson();
  EXPECT_EQ(end["type"], "BOOKMARK");
  EXPECT_EQ(end["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"], "true");
  EXPECT_EQ(
      client_
          ->Post("/_sim/faults", R"({"action":"cut-watch","afterEvents":-1})", "application/json")
          ->status,
      400);
}

TEST_F(KubeSimTest, RequestLogOverTheAdminEndpoint) {
  client_->Get("/api/v1/namespaces/default/configmaps?limit=5");
  Json log = Body(client_->Get("/_sim/requests"));
  ASSERT_TRUE(log["requests"].is_array());
  EXPECT_THAT(log["requests"].get<std::vector<std::string>>(),
              ::testing::Contains("GET /api/v1/namespaces/default/configmaps?limit=5"));
}

TEST_F(KubeSimTest, StopEndsOpenWatchesCleanly) {
  StreamReader watch(sim_->port(),
                     "/api/v1/namespaces/default/configmaps?watch=1&resourceVersion=" +
                         std::to_string(sim_->CurrentResourceVersion()));
  ASSERT_EQ(watch.status(), 200);
  sim_->Stop();
  EXPECT_TRUE(watch.WaitEnd());
}

}  // namespace
}  // namespace reverser::kubesim
