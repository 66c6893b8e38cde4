// New files are byte-identical to what gitops-reverser v0.36.0 writes for the same live object
// (docs/behaviour.md, Sanitization and YAML rendering). Our path (libs/sanitize, then
// RenderManifest) is compared with three expectations built without it:
//  * the bytes written out by hand from the documented rules;
//  * reference_marshal.py: the sanitize rules restated in Python and the reference's ordered
//    marshal (three one-key maps, then the payload) with PyYAML in go-yaml's scalar style;
//  * kubectl's own printer (sigs.k8s.io/yaml over go-yaml v2, the library the reference
//    marshals with) of the Python-sanitized object, its top-level blocks put in the reference's
//    order (apiVersion, kind, metadata, then the rest as printed: go-yaml marshals each value
//    on its own, so moving whole blocks reproduces the three-part marshal).
// The live object comes from `kubectl create deployment --dry-run=client`, labelled and
// annotated with `kubectl label/annotate --local`, plus the fields a server adds.

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "libs/manifest/yaml_writer.h"
#include "libs/sanitize/sanitize.h"
#include "nlohmann/json.hpp"
#include "tests/fixtures/process.h"

namespace reverser::manifest {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr char kScript[] = "libs/manifest/reference_marshal.py";

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// Runs a command; its stdout, or a failure naming the command and its stderr.
std::string RunTool(const std::vector<std::string>& argv, const std::string& stdin_data = "") {
  auto result = testing::RunCommand(argv, stdin_data);
  if (!result.ok()) {
    ADD_FAILURE() << argv[0] << ": " << result.status();
    return "";
  }
  if (result->exit_code != 0) {
    ADD_FAILURE() << absl::StrJoin(argv, " ") << " exited " << result->exit_code << ": "
                  << result->err;
    return "";
  }
  return result->out;
}

std::string Kubectl(const std::vector<std::string>& args, const std::string& stdin_data = "") {
  std::vector<std::string> argv = {"kubectl"};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunTool(argv, stdin_data);
}

bool HaveTools() {
  return std::system("command -v kubectl >/dev/null 2>&1") == 0 &&
         std::system("python3 -c 'import yaml' >/dev/null 2>&1") == 0;
}

// The reference's file for a (live or sanitized) object, by reference_marshal.py.
std::string PythonReferenceFile(const json& object) {
  return RunTool({"python3", kScript}, object.dump());
}

// kubectl's printer of `sanitized` in the reference's top-level order. `kubectl label --local`
// with a no-op label removal prints the object unchanged, except that it adds `labels: {}` to
// metadata when there were no labels; that line is taken out again.
std::string KubectlReferenceFile(const json& sanitized) {
  const char* tmpdir = std::getenv("TEST_TMPDIR");
  const fs::path file = fs::path(tmpdir != nullptr ? tmpdir : "/tmp") / "sanitized.json";
  // ASCII-only JSON: kubectl's YAML reader refuses some raw characters even inside JSON strings.
  std::ofstream(file) << sanitized.dump(-1, ' ', /*ensure_ascii=*/true);
  const std::string printed =
      Kubectl({"label", "--local", "-o", "yaml", "-f", file.string(), "reverser-noop-"});
  // A top-level block starts at a line in column 0 that is not a sequence item (sequences are
  // not indented under their key, so a top-level list's items sit in column 0 too).
  std::vector<std::string> blocks;
  for (absl::string_view line : absl::StrSplit(printed, '\n', absl::SkipEmpty())) {
    if (line[0] != ' ' && line[0] != '-') blocks.emplace_back();
    if (blocks.empty()) return "unexpected kubectl output: " + printed;
    absl::StrAppend(&blocks.back(), line, "\n");
  }
  auto take = [&](absl::string_view key) {
    for (auto it = blocks.begin(); it != blocks.end(); ++it) {
      if (absl::StartsWith(*it, absl::StrCat(key, ":"))) {
        std::string block = *it;
        blocks.erase(it);
        return block;
      }
    }
    return std::string();
  };
  std::string out = take("apiVersion") + take("kind");
  std::string metadata = take("metadata");
  if (!sanitized.contains("metadata") || !sanitized["metadata"].contains("labels")) {
    metadata = absl::StrReplaceAll(metadata, {{"\n  labels: {}\n", "\n"}});
    if (metadata == "metadata:\n") metadata = "metadata: {}\n";
  }
  out += metadata;
  for (const std::string& block : blocks) out += block;
  return out;
}

// A live Deployment: kubectl's generator output, labelled and annotated (values chosen to need
// every quoting decision: numbers, YAML 1.1 booleans, ": ", several lines), with bookkeeping
// labels and annotations the sanitizer strips, and the fields only a server sets.
json LiveDeployment() {
  const std::string created =
      Kubectl({"create", "deployment", "web", "--image=nginx:1.25", "--replicas=3", "--port=8080",
               "-n", "shop", "--dry-run=client", "-o", "json"});
  const std::string labelled =
      Kubectl({"label", "--local", "-f", "-", "-o", "json", "tier=frontend", "enabled=on",
               "version=0123", "app.kubernetes.io/instance=web-prod",
               "kustomize.toolkit.fluxcd.io/name=apps", "applyset.kubernetes.io/part-of=set"},
              created);
  const std::string annotated =
      Kubectl({"annotate", "--local", "-f", "-", "-o", "json", "argocd.argoproj.io/sync-wave=2",
               "enabled=yes", "team=payments: core", "note=line one\nline two",
               "kubectl.kubernetes.io/last-applied-configuration={\"kind\":\"Deployment\"}",
               "deployment.kubernetes.io/revision=4", "argocd.argoproj.io/tracking-id=shop:apps/x"},
              labelled);
  json live = json::parse(annotated, nullptr, false);
  if (!live.is_object()) {
    ADD_FAILURE() << "kubectl did not print an object: " << annotated;
    return json::object();
  }
  json& metadata = live["metadata"];
  metadata["uid"] = "6f1c2d3e-0000-4000-8000-000000000001";
  metadata["resourceVersion"] = "48213";
  metadata["generation"] = 2;
  metadata["creationTimestamp"] = "2026-06-25T10:00:00Z";
  metadata["finalizers"] = {"example.com/protect"};
  metadata["managedFields"] = json::parse(R"([{"manager": "kubectl-create",
    "operation": "Update", "apiVersion": "apps/v1", "time": "2026-06-25T10:00:00Z",
    "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:replicas": {}}}}])");
  live["status"] = json::parse(R"({"observedGeneration": 2, "replicas": 3,
    "readyReplicas": 3, "conditions": [{"type": "Available", "status": "True"}]})");
  return live;
}

TEST(ReferenceBytesTest, DeploymentWithLabelsAndAnnotationsIsByteIdenticalToTheReference) {
  ASSERT_TRUE(HaveTools()) << "kubectl and python3 with PyYAML are needed (tools/install-deps.sh)";
  const json live = LiveDeployment();
  ASSERT_TRUE(live.contains("spec")) << live.dump();

  auto sanitized = sanitize::Sanitize(live);
  ASSERT_TRUE(sanitized.ok()) << sanitized.status();
  auto ours = RenderManifest(*sanitized);
  ASSERT_TRUE(ours.ok()) << ours.status();

  // Written out from the documented rules: apiVersion, kind, metadata with its keys sorted
  // (annotations, labels, name, namespace), then the payload; bookkeeping labels/annotations,
  // server fields and status gone; strings that would read back as numbers or booleans in
  // double quotes, `a: b` in single quotes, several lines as a `|-` block; sequences at their
  // key's indentation; empty maps `{}`; a null kept as `null`.
  const std::string expected =
      "apiVersion: apps/v1\n"
      "kind: Deployment\n"
      "metadata:\n"
      "  annotations:\n"
      "    argocd.argoproj.io/sync-wave: \"2\"\n"
      "    enabled: \"yes\"\n"
      "    note: |-\n"
      "      line one\n"
      "      line two\n"
      "    team: 'payments: core'\n"
      "  labels:\n"
      "    app: web\n"
      "    app.kubernetes.io/instance: web-prod\n"
      "    enabled: \"on\"\n"
      "    tier: frontend\n"
      "    version: \"0123\"\n"
      "  name: web\n"
      "  namespace: shop\n"
      "spec:\n"
      "  replicas: 3\n"
      "  selector:\n"
      "    matchLabels:\n"
      "      app: web\n"
      "  strategy: {}\n"
      "  template:\n"
      "    metadata:\n"
      "      creationTimestamp: null\n"
      "      labels:\n"
      "        app: web\n"
      "    spec:\n"
      "      containers:\n"
      "      - image: nginx:1.25\n"
      "        name: nginx\n"
      "        ports:\n"
      "        - containerPort: 8080\n"
      "        resources: {}\n";
  EXPECT_EQ(*ours, expected);

  // The Python restatement sanitizes to the same object...
  const json python_sanitized =
      json::parse(RunTool({"python3", kScript, "--sanitize-only"}, live.dump()), nullptr, false);
  EXPECT_EQ(python_sanitized, *sanitized);
  // ...and both independent encoders write the same bytes.
  EXPECT_EQ(PythonReferenceFile(live), expected);
  EXPECT_EQ(KubectlReferenceFile(python_sanitized), expected);
}

// The golden files of libs/manifest/testdata (RenderManifest of the sanitized real objects,
// compared by manifest_test) are what the reference writes, by both independent encoders.
TEST(ReferenceBytesTest, GoldenFilesOfRealObjectsAreTheReferenceBytes) {
  ASSERT_TRUE(HaveTools()) << "kubectl and python3 with PyYAML are needed (tools/install-deps.sh)";
  int compared = 0;
  for (const auto& entry : fs::directory_iterator("libs/sanitize/testdata/expected")) {
    if (entry.path().extension() != ".json") continue;
    SCOPED_TRACE(entry.path().filename().string());
    const json sanitized = json::parse(ReadFile(entry.path()));
    const std::string golden = ReadFile(fs::path("libs/manifest/testdata") /
                                        entry.path().filename().replace_extension(".yaml"));
    ASSERT_FALSE(golden.empty());
    EXPECT_EQ(PythonReferenceFile(sanitized), golden);
    EXPECT_EQ(KubectlReferenceFile(sanitized), golden);
    auto ours = RenderManifest(sanitized);
    ASSERT_TRUE(ours.ok()) << ours.status();
    EXPECT_EQ(*ours, golden);
    ++compared;
  }
  EXPECT_GE(compared, 19);
}

}  // namespace
}  // namespace reverser::manifest
