#include "libs/manifest/yaml_writer.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "gtest/gtest.h"

namespace reverser::manifest {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

std::string MustRender(const json& object, RenderOptions options = {}) {
  auto out = RenderManifest(object, options);
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? *out : "";
}

TEST(RenderManifestTest, ReferenceKeyOrder) {
  const json object = json::parse(R"({
    "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}}},
    "data": {"b": "2", "a": "1"},
    "metadata": {"name": "web", "namespace": "prod", "labels": {"app": "web"},
                 "annotations": {"team": "a"}},
    "kind": "Deployment", "apiVersion": "apps/v1", "status": {"ready": 1}})");
  // What v0.36.0 writes: apiVersion, kind, metadata (a Go map, so go-yaml sorts it like every
  // other map), then the payload sorted — `data` after `metadata` although it sorts before.
  EXPECT_EQ(MustRender(object),
            "apiVersion: apps/v1\n"
            "kind: Deployment\n"
            "metadata:\n"
            "  annotations:\n"
            "    team: a\n"
            "  labels:\n"
            "    app: web\n"
            "  name: web\n"
            "  namespace: prod\n"
            "data:\n"
            "  a: \"1\"\n"
            "  b: \"2\"\n"
            "spec:\n"
            "  replicas: 3\n"
            "  selector:\n"
            "    matchLabels:\n"
            "      app: web\n");
  // The order the reference's documentation claims, on request only.
  EXPECT_EQ(MustRender(object, {MetadataOrder::kIdentityFirst}),
            "apiVersion: apps/v1\n"
            "kind: Deployment\n"
            "metadata:\n"
            "  name: web\n"
            "  namespace: prod\n"
            "  labels:\n"
            "    app: web\n"
            "  annotations:\n"
            "    team: a\n"
            "data:\n"
            "  a: \"1\"\n"
            "  b: \"2\"\n"
            "spec:\n"
            "  replicas: 3\n"
            "  selector:\n"
            "    matchLabels:\n"
            "      app: web\n");
}

TEST(RenderManifestTest, RenderingIsDeterministicWhateverTheInputKeyOrder) {
  // Re-delivered objects must give the same bytes (no-op detection compares blob ids), however
  // the JSON they arrive in orders its keys.
  const json a = json::parse(R"({"apiVersion": "v1", "kind": "ConfigMap",
    "metadata": {"namespace": "n", "annotations": {"z": "1", "a": "2"}, "name": "x",
                 "labels": {"b": "c", "a": "d"}}, "data": {"k2": "v", "k10": "w"}})");
  const json b = json::parse(R"({"data": {"k10": "w", "k2": "v"},
    "metadata": {"labels": {"a": "d", "b": "c"}, "name": "x", "annotations": {"a": "2", "z": "1"},
                 "namespace": "n"}, "kind": "ConfigMap", "apiVersion": "v1"})");
  EXPECT_EQ(MustRender(a), MustRender(b));
  EXPECT_EQ(MustRender(a),
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  annotations:\n    a: \"2\"\n"
            "    z: \"1\"\n  labels:\n    a: d\n    b: c\n  name: x\n  namespace: \"n\"\n"
            "data:\n  k2: v\n  k10: w\n");
}

TEST(RenderManifestTest, EmptyMetadataFieldsAreLeftOutAndMetadataAlwaysWritten) {
  EXPECT_EQ(MustRender(json::parse(R"({"apiVersion": "v1", "kind": "Namespace"})")),
            "apiVersion: v1\nkind: Namespace\nmetadata: {}\n");
  EXPECT_EQ(MustRender(json::parse(R"({"apiVersion": "v1", "kind": "ConfigMap",
      "metadata": {"name": "x", "namespace": "", "labels": {}, "annotations": null}})")),
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n");
}

TEST(RenderManifestTest, QuotingBlockLiteralsAndEmptyCollections) {
  const json object = {
      {"apiVersion", "v1"},
      {"kind", "ConfigMap"},
      {"metadata", {{"name", "cfg"}}},
      {"data",
       {{"bool", "true"},
        {"num", "0123"},
        {"empty", ""},
        {"script", "#!/bin/sh\necho hi\n"},
        {"nochomp", "a\nb"},
        {"colon", "a: b"},
        {"date", "2020-01-01"},
        {"plain", "v1.2.3"}}},
      {"spec", {{"list", json::array()}, {"map", json::object()}, {"n", nullptr}}}};
  EXPECT_EQ(MustRender(object),
            "apiVersion: v1\n"
            "kind: ConfigMap\n"
            "metadata:\n"
            "  name: cfg\n"
            "data:\n"
            "  bool: \"true\"\n"
            "  colon: 'a: b'\n"
            "  date: \"2020-01-01\"\n"
            "  empty: \"\"\n"
            "  nochomp: |-\n"
            "    a\n"
            "    b\n"
            "  num: \"0123\"\n"
            "  plain: v1.2.3\n"
            "  script: |\n"
            "    #!/bin/sh\n"
            "    echo hi\n"
            "spec:\n"
            "  list: []\n"
            "  map: {}\n"
            "  \"n\": null\n");  // a plain `n` key would read back as the boolean false
}

TEST(RenderManifestTest, KeepChompedBlockAtTheEndHasNoDocumentEndMarker) {
  const json object = {{"apiVersion", "v1"}, {"kind", "ConfigMap"}, {"data", {{"z", "x\n\n"}}}};
  EXPECT_EQ(MustRender(object),
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {}\ndata:\n  z: |+\n    x\n\n");
  EXPECT_EQ(*MarshalYaml(json("tail\n\n")), "|+\n  tail\n\n");
}

TEST(RenderManifestTest, MatchesMarshalYamlWhenGoOrderAgrees) {
  // With payload keys that sort after "metadata", the ordered document is exactly what plain
  // sigs.k8s.io/yaml marshalling (verified against kubectl) produces.
  const json object = json::parse(R"({"apiVersion": "rbac.authorization.k8s.io/v1",
    "kind": "RoleBinding", "metadata": {"name": "rb", "namespace": "ns", "labels": {"a": "b"}},
    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r"},
    "subjects": [{"kind": "User", "name": "alice@example.com"}]})");
  EXPECT_EQ(MustRender(object), *MarshalYaml(object));
}

TEST(RenderManifestTest, RejectsWhatIsNotAManifest) {
  EXPECT_EQ(RenderManifest(json::array()).status().message(),
            "a manifest must be a map, got array");
  EXPECT_EQ(RenderManifest(json::parse(R"({"kind": "X"})")).status().message(),
            "object apiVersion must be a string");
  EXPECT_EQ(RenderManifest(
                json::parse(R"({"apiVersion": "v1", "kind": "X", "metadata": {"labels": "x"}})"))
                .status()
                .message(),
            "metadata.labels must be a map, got string");
  json deep = "leaf";
  for (int i = 0; i < 600; ++i) deep = json::array({deep});
  EXPECT_FALSE(MarshalYaml(deep).ok());
}

TEST(RenderManifestTest, InvalidUtf8BecomesReplacementCharacter) {
  const json object = {{"apiVersion", "v1"},
                       {"kind", "ConfigMap"},
                       {"data",
                        {{"k", std::string("a\xff"
                                           "b")}}}};
  EXPECT_EQ(MustRender(object),
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {}\ndata:\n  k: a\xEF\xBF\xBD"
            "b\n");
}

// Golden files: the sanitized forms of the real objects (libs/sanitize/testdata/expected) as
// they are written to Git. Regenerate with REVERSER_UPDATE_GOLDENS=1 (files land in the test's
// undeclared outputs) and review the diff by hand.
TEST(RenderManifestTest, GoldenManifestsOfRealObjects) {
  const fs::path inputs = "libs/sanitize/testdata/expected";
  const bool update = std::getenv("REVERSER_UPDATE_GOLDENS") != nullptr;
  int compared = 0;
  for (const auto& entry : fs::directory_iterator(inputs)) {
    if (entry.path().extension() != ".json") continue;
    SCOPED_TRACE(entry.path().filename().string());
    const std::string rendered = MustRender(json::parse(ReadFile(entry.path())));
    const fs::path golden =
        fs::path("libs/manifest/testdata") / entry.path().filename().replace_extension(".yaml");
    if (update) {
      std::ofstream(fs::path(std::getenv("TEST_UNDECLARED_OUTPUTS_DIR")) / golden.filename())
          << rendered;
      continue;
    }
    ASSERT_TRUE(fs::exists(golden)) << golden;
    EXPECT_EQ(rendered, ReadFile(golden));
    ++compared;
  }
  if (!update) {
    EXPECT_GE(compared, 19);
  }
}

}  // namespace
}  // namespace reverser::manifest
