// Reproduces real k3s v1.36.1 ConfigMap watch captures (placeholders for volatile values) from
// tests/testdata/k8s/captured/gitops-reverser-mutationlab-k3s-v1.36.1/configmap/ by driving the
// same operations through kube-sim and comparing whole events.

#include <set>

#include "absl/strings/ascii.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "tests/fixtures/runfiles.h"
#include "tools/kube-sim/kube_sim.h"
#include "tools/kube-sim/test_support.h"
#include "tools/kube-sim/yaml_json.h"

namespace reverser::kubesim {
namespace {

using testing::StreamReader;

// Replaces every `<rv-N>` and every run of digits with `<rv>` (resource versions in messages).
std::string NumbersAsRv(const std::string& text) {
  std::string out;
  for (size_t i = 0; i < text.size();) {
    if (text.compare(i, 4, "<rv-") == 0) {
      size_t j = i + 4;
      while (j < text.size() && absl::ascii_isdigit(text[j])) ++j;
      if (j > i + 4 && j < text.size() && text[j] == '>') {
        out += "<rv>";
        i = j + 1;
        continue;
      }
    }
    if (absl::ascii_isdigit(text[i])) {
      while (i < text.size() && absl::ascii_isdigit(text[i])) ++i;
      out += "<rv>";
      continue;
    }
    out += text[i++];
  }
  return out;
}

// Replaces volatile values with fixed placeholders, in captures and in live events alike.
Json Normalize(Json j) {
  if (j.is_object()) {
    for (auto& [k, v] : j.items()) {
      if (k == "creationTimestamp" || k == "deletionTimestamp" || k == "time") {
        v = "<ts>";
      } else if (k == "uid") {
        v = "<uid>";
      } else if (k == "resourceVersion") {
        v = "<rv>";
      } else if (k == "namespace") {
        v = "<ns>";
      } else if (k == "message" && v.is_string()) {
        v = NumbersAsRv(v.get<std::string>());
      } else if (k == "name" && v.is_string() && v.get<std::string>().rfind("cm-gen-", 0) == 0) {
        v = "cm-gen-<suffix>";
      } else {
        v = Normalize(v);
      }
    }
  } else if (j.is_array()) {
    for (auto& e : j) e = Normalize(e);
  }
  return j;
}

Json Capture(const std::string& path) {
  ApiOr<Json> j = ParseYamlOrJson(reverser::testing::ReadTestdata(
      "k8s/captured/gitops-reverser-mutationlab-k3s-v1.36.1/configmap/" + path));
  EXPECT_TRUE(j.ok()) << path;
  return Normalize(j.ok() ? *j : Json());
}

class CapturedShapesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto sim = KubeSim::Start({});
    ASSERT_TRUE(sim.ok());
    sim_ = std::move(*sim);
    client_ = std::make_unique<httplib::Client>("127.0.0.1", sim_->port());
    client_->set_default_headers(
        {{"User-Agent", "e2e.test/v0.0.0 (linux/amd64) kubernetes/$Format"}});
    ASSERT_EQ(client_
                  ->Post("/api/v1/namespaces", R"({"metadata":{"name":"mutationlab"}})",
                         "application/json")
                  ->status,
              201);
  }
  std::unique_ptr<StreamReader> WatchFromNow() {
    auto w = std::make_unique<StreamReader>(
        sim_->port(), "/api/v1/namespaces/mutationlab/configmaps?watch=1&resourceVersion=" +
                          std::to_string(sim_->CurrentResourceVersion()));
    EXPECT_EQ(w->status(), 200);
    return w;
  }
  int Create(const Json& cm) {
    return client_->Post("/api/v1/namespaces/mutationlab/configmaps", cm.dump(), "application/json")
        ->status;
  }
  static Json Cm(const std::string& name, const std::string& scenario) {
    return {{"apiVersion", "v1"},
            {"kind", "ConfigMap"},
            {"metadata",
             {{"name", name}, {"labels", {{"mutationlab.configbutler.ai/scenario", scenario}}}}},
            {"data", {{"key", "value"}}}};
  }

  std::unique_ptr<KubeSim> sim_;
  std::unique_ptr<httplib::Client> client_;
};

TEST_F(CapturedShapesTest, Create) {
  auto watch = WatchFromNow();
  ASSERT_EQ(Create(Cm("cm-a", "create-succeeds")), 201);
  EXPECT_EQ(Normalize(watch->NextJson()), Capture("create-succeeds/watch.added.yaml"));
}

TEST_F(CapturedShapesTest, GenerateNameCreate) {
  Json cm = Cm("", "generate-name-create");
  cm["metadata"].erase("name");
  cm["metadata"]["generateName"] = "cm-gen-";
  auto watch = WatchFromNow();
  ASSERT_EQ(Create(cm), 201);
  EXPECT_EQ(Normalize(watch->NextJson()), Capture("generate-name-create/watch.added.yaml"));
}

TEST_F(CapturedShapesTest, Update) {
  ASSERT_EQ(Create(Cm("cm-a", "update")), 201);
  Json live = Json::parse(client_->Get("/api/v1/namespaces/mutationlab/configmaps/cm-a")->body);
  live["data"]["key"] = "updated";
  auto watch = WatchFromNow();
  ASSERT_EQ(
      client_
          ->Put("/api/v1/namespaces/mutationlab/configmaps/cm-a", live.dump(), "application/json")
          ->status,
      200);
  EXPECT_EQ(Normalize(watch->NextJson()), Capture("update/watch.modified.yaml"));
}

TEST_F(CapturedShapesTest, NoOpApplyEmitsNothingAndKeepsResourceVersion) {
  const std::string path =
      "/api/v1/namespaces/mutationlab/configmaps/cm-a?fieldManager=mutationlab-apply&force=true";
  Json cm = Cm("cm-a", "no-op-apply");
  auto first = client_->Patch(path.c_str(), cm.dump(), "application/apply-patch+yaml");
  ASSERT_EQ(first->status, 201);
  int64_t rv = sim_->CurrentResourceVersion();
  auto watch = WatchFromNow();
  auto again = client_->Patch(path.c_str(), cm.dump(), "application/apply-patch+yaml");
  EXPECT_EQ(again->status, 200);
  EXPECT_EQ(Json::parse(again->body)["metadata"]["resourceVersion"], std::to_string(rv));
  EXPECT_EQ(sim_->CurrentResourceVersion(), rv);
  // Nothing arrives: the next event is the marker written after.
  ASSERT_EQ(Create(Cm("marker", "no-op-apply")), 201);
  EXPECT_EQ(watch->NextJson()["object"]["metadata"]["name"], "marker");
}

TEST_F(CapturedShapesTest, FinalizerDelete) {
  Json cm = Cm("cm-hold", "finalizer-delete");
  cm["metadata"]["finalizers"] = {"mutationlab.configbutler.ai/hold"};
  ASSERT_EQ(Create(cm), 201);
  auto watch = WatchFromNow();
  EXPECT_EQ(client_->Delete("/api/v1/namespaces/mutationlab/configmaps/cm-hold")->status, 202);
  EXPECT_EQ(Normalize(watch->NextJson()), Capture("finalizer-delete/watch.modified.yaml"));
  client_->Patch("/api/v1/namespaces/mutationlab/configmaps/cm-hold",
                 R"([{"op":"remove","path":"/metadata/finalizers"}])",
                 "application/json-patch+json");
  EXPECT_EQ(Normalize(watch->NextJson()), Capture("finalizer-delete/watch.deleted.yaml"));
}

TEST_F(CapturedShapesTest, DeleteCollection) {
  for (const char* n : {"cm-a", "cm-b", "cm-c"}) ASSERT_EQ(Create(Cm(n, "deletecollection")), 201);
  auto watch = WatchFromNow();
  auto res = client_->Delete(
      "/api/v1/namespaces/mutationlab/"
      "configmaps?labelSelector=mutationlab.configbutler.ai%2Fscenario%3Ddeletecollection");
  EXPECT_EQ(res->status, 200);
  for (const char* n : {"cm-a", "cm-b", "cm-c"}) {
    EXPECT_EQ(Normalize(watch->NextJson()),
              Capture(std::string("deletecollection/watch.deleted.") + n + ".yaml"));
  }
}

TEST_F(CapturedShapesTest, OwnerReferenceCascade) {
  auto parent = client_->Post("/api/v1/namespaces/mutationlab/configmaps",
                              Cm("cm-parent", "owner-ref-cascade").dump(), "application/json");
  ASSERT_EQ(parent->status, 201);
  Json child = Cm("cm-child", "owner-ref-cascade");
  child["metadata"]["ownerReferences"] = {{{"apiVersion", "v1"},
                                           {"kind", "ConfigMap"},
                                           {"name", "cm-parent"},
                                           {"uid", Json::parse(parent->body)["metadata"]["uid"]}}};
  ASSERT_EQ(Create(child), 201);
  auto watch = WatchFromNow();
  EXPECT_EQ(client_->Delete("/api/v1/namespaces/mutationlab/configmaps/cm-parent")->status, 200);
  Json first = watch->NextJson(), second = watch->NextJson();
  EXPECT_EQ(first["type"], "DELETED");
  EXPECT_EQ(second["type"], "DELETED");
  std::set<std::string> names = {first["object"]["metadata"]["name"],
                                 second["object"]["metadata"]["name"]};
  EXPECT_EQ(names, (std::set<std::string>{"cm-parent", "cm-child"}));
  EXPECT_EQ(client_->Get("/api/v1/namespaces/mutationlab/configmaps/cm-child")->status, 404);
}

TEST_F(CapturedShapesTest, WatchListBookmark) {
  StreamReader watch(sim_->port(),
                     "/api/v1/namespaces/mutationlab/configmaps?watch=1&sendInitialEvents=true&"
                     "resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true");
  EXPECT_EQ(Normalize(watch.NextJson()), Capture("watch-bookmark/watch.bookmark.yaml"));
}

TEST_F(CapturedShapesTest, ExpiredWatch) {
  std::string rv = std::to_string(sim_->CurrentResourceVersion());
  ASSERT_EQ(Create(Cm("cm-a", "watch-resync")), 201);
  sim_->Compact();
  StreamReader watch(sim_->port(),
                     "/api/v1/namespaces/mutationlab/configmaps?watch=1&resourceVersion=" + rv);
  EXPECT_EQ(Normalize(watch.NextJson()), Capture("watch-resync/watch.error.yaml"));
}

}  // namespace
}  // namespace reverser::kubesim
