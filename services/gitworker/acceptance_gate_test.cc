// The acceptance gate over in-memory indexes: one test per issue kind with its exact text, the
// GitPathAccepted reason and the message.

#include "services/gitworker/acceptance_gate.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace reverser::gitworker {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

DocumentKey Cm(const std::string& name, const std::string& ns = "demo") {
  return {"", "ConfigMap", ns, name};
}

std::string CmYaml(const std::string& name, const std::string& ns = "demo") {
  return absl::StrCat("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ", name,
                      "\n  namespace: ", ns, "\ndata:\n  k: v\n");
}

IdentityIndex IndexOf(const std::map<std::string, std::string>& files,
                      const std::string& path = "t") {
  git::ChangeSet changes;
  for (const auto& [file, text] : files) changes[file] = text;
  IdentityIndex index = IdentityIndex::Empty(path);
  index.Apply(changes, nullptr);
  return index;
}

std::vector<std::string> Texts(const std::vector<GateIssue>& issues) {
  std::vector<std::string> out;
  for (const GateIssue& issue : issues) out.push_back(issue.text);
  return out;
}

std::vector<GateIssue> Check(const IdentityIndex& index, GateInput input = {}) {
  input.index = &index;
  return CheckPath(input);
}

// A gate input for a target that follows `followed`.
GateInput Following(const std::set<std::pair<std::string, std::string>>* followed) {
  GateInput input;
  input.followed = followed;
  return input;
}

// A gate input whose reader serves the blobs of `files` (as a repository would).
GateInput Reading(const std::map<std::string, std::string>& files) {
  std::map<std::string, std::string> blobs;
  for (const auto& [file, text] : files) blobs[git::BlobIdOf(text)] = text;
  GateInput input;
  input.read_blob = [blobs](const std::string& blob_id) -> absl::StatusOr<std::string> {
    auto it = blobs.find(blob_id);
    if (it == blobs.end()) return absl::NotFoundError(absl::StrCat("no blob ", blob_id));
    return it->second;
  };
  return input;
}

// The issues of a path that holds `files`, its kustomizations readable.
std::vector<GateIssue> CheckFiles(const std::map<std::string, std::string>& files,
                                  const std::string& path = "t") {
  IdentityIndex index = IndexOf(files, path);
  return Check(index, Reading(files));
}

TEST(AcceptanceGateTest, ACleanPathWithBootstrapFilesAndKustomizationHasNoIssues) {
  const std::map<std::string, std::string> files = {
      {"t/demo/configmaps/a.yaml", CmYaml("a")},
      {"t/bundle.yaml", "# head\n---\n" + CmYaml("b") + "--- # c\n" + CmYaml("c") + "...\n"},
      {"t/.sops.yaml", "creation_rules:\n  - age: age1xyz\n"},
      {"t/.gittargetignore", "# nothing\n"},
      {"t/kustomization.yaml", "resources:\n  - demo\n"},
      {"t/README.md", "# not read\n"},
      {"t/demo/README.md", "# a person's notes\n"},
  };
  IdentityIndex index = IndexOf(files);
  GateInput input = Reading(files);
  input.changed_files = {"t/demo/configmaps/a.yaml", "t/demo/configmaps/new.yaml"};
  input.writes = {{Cm("new"), "t/demo/configmaps/new.yaml"}};
  EXPECT_THAT(Check(index, input), IsEmpty());
}

TEST(AcceptanceGateTest, Duplicate) {
  IdentityIndex index = IndexOf({
      {"t/a.yaml", CmYaml("web")},
      {"t/hand/bundle.yaml", CmYaml("other") + "---\n" + CmYaml("web")},
  });
  auto issues = Check(index);
  ASSERT_EQ(issues.size(), 1u);
  EXPECT_EQ(issues[0].kind, IssueKind::kDuplicate);
  EXPECT_EQ(issues[0].text,
            "duplicate: ConfigMap demo/web in t/a.yaml and t/hand/bundle.yaml (document 2)");
  // Twice in one file, cluster-scoped.
  IdentityIndex same = IndexOf({{"t/r.yaml",
                                 "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\n"
                                 "metadata:\n  name: admin\n---\n"
                                 "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\n"
                                 "metadata:\n  name: admin\n"}});
  EXPECT_THAT(Texts(Check(same)),
              ElementsAre("duplicate: ClusterRole admin in t/r.yaml (document 1) and t/r.yaml "
                          "(document 2)"));
}

TEST(AcceptanceGateTest, NonKrm) {
  // Beside objects of no followed type, a non-KRM document is non-krm (an empty one is fine).
  IdentityIndex index = IndexOf({
      {"t/values.yaml", "replicas: 3\n"},
      {"t/mixed.yaml",
       "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: d\n"
       "---\n# only a comment\n---\n- a list\n"},
  });
  std::set<std::pair<std::string, std::string>> followed = {{"", "ConfigMap"}};
  auto issues = Check(index, Following(&followed));
  EXPECT_THAT(Texts(issues),
              ElementsAre("non-krm: t/mixed.yaml (document 3) has no apiVersion, kind or "
                          "metadata.name",
                          "non-krm: t/values.yaml has no apiVersion, kind or metadata.name"));
  EXPECT_EQ(issues[0].kind, IssueKind::kNonKrm);
}

TEST(AcceptanceGateTest, ImpureManagedFile) {
  IdentityIndex index = IndexOf({
      {"t/bundle.yaml", "# a preamble is no document\n---\n" + CmYaml("a") +
                            "---\n# only a comment\n---\n" + CmYaml("b") +
                            "---\nreplicas: 3\n---\n"},
      // Objects of no followed type: reverser never edits the file.
      {"t/apps.yaml", "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: d\n---\n"},
      {"t/clean.yaml", "---\n" + CmYaml("c") + "---\n" + CmYaml("d")},
  });
  std::set<std::pair<std::string, std::string>> followed = {{"", "ConfigMap"}};
  auto issues = Check(index, Following(&followed));
  EXPECT_THAT(Texts(issues),
              ElementsAre("impure-managed-file: t/bundle.yaml (document 2) is empty in a file of "
                          "managed objects",
                          "impure-managed-file: t/bundle.yaml (document 4) has no apiVersion, "
                          "kind or metadata.name in a file of managed objects",
                          "impure-managed-file: t/bundle.yaml (document 5) is empty in a file of "
                          "managed objects"));
  EXPECT_EQ(issues[0].kind, IssueKind::kImpureManagedFile);
  EXPECT_EQ(GitPathReason(issues), "UnsupportedContent");
  // Once Deployments are followed, that file is managed too.
  followed.insert({"apps", "Deployment"});
  EXPECT_EQ(Check(index, Following(&followed)).front().text,
            "impure-managed-file: t/apps.yaml (document 2) is empty in a file of managed objects");
}

TEST(AcceptanceGateTest, InvalidYaml) {
  IdentityIndex index = IndexOf({{"t/broken.yml", "key: [unclosed\n"}});
  auto issues = Check(index);
  ASSERT_EQ(issues.size(), 1u);
  EXPECT_EQ(issues[0].kind, IssueKind::kInvalidYaml);
  EXPECT_EQ(issues[0].text, "invalid-yaml: t/broken.yml does not parse as YAML");
}

TEST(AcceptanceGateTest, ForeignSymlinkAndSubmodule) {
  IdentityIndex index = IndexOf({});
  index.RecordForeign("t/link.yaml", git::FileEntry::Kind::kSymlink);
  index.RecordForeign("t/vendor", git::FileEntry::Kind::kSubmodule);
  auto issues = Check(index);
  ASSERT_EQ(issues.size(), 2u);
  EXPECT_EQ(issues[0],
            (GateIssue{IssueKind::kForeignSymlink, "foreign-symlink: t/link.yaml is a symlink"}));
  EXPECT_EQ(issues[1], (GateIssue{IssueKind::kForeignSubmodule,
                                  "foreign-submodule: t/vendor is a submodule"}));
}

TEST(AcceptanceGateTest, IgnoreShadowsAWrittenPathAndAKnownManagedDocument) {
  auto rules = gitignore::IgnoreRules::Parse("demo/configmaps/\n");
  ASSERT_TRUE(rules.ok()) << rules.status();
  IdentityIndex index = IndexOf({});
  index.RecordIgnored("t/legacy/web.yaml", {"blob", {Cm("web")}});
  index.RecordIgnored("t/legacy/unfollowed.yaml", {"blob2", {{"apps", "Deployment", "demo", "d"}}});
  std::set<std::pair<std::string, std::string>> followed = {{"", "ConfigMap"}};
  GateInput input = Following(&followed);
  input.ignore.rules = &*rules;
  input.changed_files = {"t/demo/configmaps/a.yaml"};
  input.writes = {{Cm("a"), "t/demo/configmaps/a.yaml"}};
  auto issues = Check(index, input);
  EXPECT_THAT(Texts(issues),
              ElementsAre("ignore-shadows-managed: t/.gittargetignore hides t/legacy/web.yaml, "
                          "which holds ConfigMap demo/web",
                          "ignore-shadows-managed: t/.gittargetignore hides "
                          "t/demo/configmaps/a.yaml, which reverser writes"));
  EXPECT_EQ(GitPathReason(issues), "IgnoreShadowsManagedPath");
}

TEST(AcceptanceGateTest, InvalidIgnore) {
  auto rules = gitignore::IgnoreRules::Parse("# fine\n*.yaml\n");
  ASSERT_FALSE(rules.ok());
  IdentityIndex index = IndexOf({});
  GateInput input;
  input.ignore.error = std::string(rules.status().message());
  auto issues = Check(index, input);
  ASSERT_EQ(issues.size(), 1u);
  EXPECT_EQ(issues[0].kind, IssueKind::kInvalidIgnore);
  EXPECT_EQ(issues[0].text,
            "invalid-ignore: t/.gittargetignore line 2: \"*.yaml\" would hide every file or "
            "every manifest under the path");
  // The reference reports a catastrophic pattern as an ignore shadowing managed paths.
  EXPECT_EQ(GitPathReason(issues), "IgnoreShadowsManagedPath");
  input.ignore.error = "12 bytes, more than the limit of 10";
  EXPECT_EQ(Check(index, input)[0].text,
            "invalid-ignore: t/.gittargetignore: 12 bytes, more than the limit of 10");
}

TEST(AcceptanceGateTest, WriteEscapesScope) {
  IdentityIndex index = IndexOf({});
  GateInput input;
  input.changed_files = {"t/ok.yaml", "other/x.yaml", "tt/y.yaml"};
  auto issues = Check(index, input);
  EXPECT_THAT(Texts(issues), ElementsAre("write-escapes-scope: other/x.yaml is outside t",
                                         "write-escapes-scope: tt/y.yaml is outside t"));
  EXPECT_EQ(issues[0].kind, IssueKind::kWriteEscapesScope);
  EXPECT_EQ(GitPathReason(issues), "WriteBoundaryRefused");
  // The root holds everything.
  IdentityIndex root = IndexOf({}, "");
  EXPECT_THAT(Check(root, input), IsEmpty());
}

TEST(AcceptanceGateTest, WriteFanInOnlyIntoASingleDocumentFile) {
  IdentityIndex index = IndexOf({{"t/existing.yaml", CmYaml("here")}});
  DocumentKey s1{"", "Secret", "demo", "a"}, s2{"", "Secret", "demo", "b"};
  GateInput input;
  input.writes = {
      {s1, "t/demo/secrets.sops.yaml", false, true},
      {s2, "t/demo/secrets.sops.yaml", false, true},
      // A bundle append is fine, and so is an object that lives elsewhere already.
      {Cm("x"), "t/demo/configmaps.yaml"},
      {Cm("y"), "t/demo/configmaps.yaml"},
      {Cm("here"), "t/demo/configmaps.yaml"},
  };
  auto issues = Check(index, input);
  EXPECT_THAT(Texts(issues),
              ElementsAre("write-fan-in: Secret demo/a and Secret demo/b are both placed at "
                          "t/demo/secrets.sops.yaml, a file of one document"));
  EXPECT_EQ(issues[0].kind, IssueKind::kWriteFanIn);
  EXPECT_EQ(GitPathReason(issues), "WriteBoundaryRefused");
}

TEST(AcceptanceGateTest, UnsupportedKustomize) {
  // Each kustomization alone under the path, with what the issue names.
  const std::vector<std::pair<std::string, std::string>> refused = {
      {"configMapGenerator:\n  - name: c\n    literals: [a=b]\n", "configMapGenerator"},
      {"secretGenerator:\n  - name: s\n", "secretGenerator"},
      {"generators: [gen.yaml]\n", "generators"},
      {"patches:\n  - path: p.yaml\n", "patches"},
      {"patchesStrategicMerge: [p.yaml]\n", "patchesStrategicMerge"},
      {"patchesJson6902:\n  - path: p.yaml\n", "patchesJson6902"},
      {"components: [../c]\n", "components"},
      {"helmCharts:\n  - name: x\n", "helmCharts"},
      {"helmChartInflationGenerator: [x]\n", "helmChartInflationGenerator"},
      {"replacements:\n  - path: r.yaml\n", "replacements"},
      {"transformers: [t.yaml]\n", "transformers"},
      {"namePrefix: dev-\n", "namePrefix"},
      {"nameSuffix: -dev\n", "nameSuffix"},
      {"commonLabels: {a: b}\n", "commonLabels"},
      {"bases: [../base]\n", "bases"},
      {"apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\n", "kind Component"},
      {"resources:\n  - https://example.com/app.yaml\n",
       "remote resource \"https://example.com/app.yaml\""},
      {"resources:\n  - github.com/org/repo//base?ref=v1\n",
       "remote resource \"github.com/org/repo//base?ref=v1\""},
      {"resources:\n  - github.com/org/repo/base\n",
       "remote resource \"github.com/org/repo/base\""},
      {"resources:\n  - git@github.com:org/repo.git\n",
       "remote resource \"git@github.com:org/repo.git\""},
      {"resources: [a.yaml, {path: b}]\n", "malformed resources"},
      {"resources: a.yaml\n", "malformed resources"},
      {"images:\n  - newTag: v2\n", "malformed images"},
      {"images:\n  - name: nginx\n    tagSuffix: -x\n", "malformed images"},
      {"images:\n  - name: nginx\n    newTag: 1.25\n", "malformed images"},
      {"images: {name: nginx}\n", "malformed images"},
      {"replicas:\n  - name: web\n", "malformed replicas"},
      {"replicas:\n  - name: web\n    count: -1\n", "malformed replicas"},
      {"replicas:\n  - name: web\n    count: \"3\"\n", "malformed replicas"},
      {"namespace: [a]\n", "malformed namespace"},
      {"\"odd key\\n\": 1\n", "\"odd key\\n\""},
  };
  for (const auto& [text, named] : refused) {
    auto issues = CheckFiles({{"t/app/kustomization.yaml", text}});
    ASSERT_EQ(issues.size(), 1u) << text;
    EXPECT_EQ(issues[0].kind, IssueKind::kUnsupportedKustomize) << text;
    EXPECT_EQ(issues[0].text, absl::StrCat("unsupported-kustomize: t/app/kustomization.yaml uses ",
                                           named, ", which reverser does not model"))
        << text;
    EXPECT_EQ(GitPathReason(issues), "UnsupportedContent");
  }
  // What reverser models.
  const std::vector<std::string> accepted = {
      "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nmetadata:\n  name: app\n"
      "namespace: demo\nresources:\n  - deployment.yaml\n  - ../base\n  - ./v1.2\n"
      "images:\n  - name: nginx\n    newName: registry.example/nginx\n    newTag: \"1.25\"\n"
      "  - name: redis\n    digest: sha256:abc\nreplicas:\n  - name: web\n    count: 3\n",
      "resources: []\n",
      "resources:\nnamePrefix:\n",  // null is absent
      "# nothing yet\n",
      "",
  };
  for (const std::string& text : accepted) {
    EXPECT_THAT(CheckFiles({{"t/app/kustomization.yml", text}}), IsEmpty()) << text;
  }
  // A host-like folder of the tree is local.
  EXPECT_THAT(CheckFiles({{"t/kustomization.yaml", "resources: [v1.2/base]\n"},
                          {"t/v1.2/base/cm.yaml", CmYaml("a")}}),
              IsEmpty());
  // Several features in one issue, at most five named; other shapes of file.
  EXPECT_THAT(
      Texts(CheckFiles({
          {"t/a/kustomization.yaml",
           "a: 1\nb: 1\nc: 1\nd: 1\ne: 1\nf: 1\ng: 1\nresources: [https://x.example/y]\n"},
          {"t/b/kustomization.yaml", "- resources\n"},
          {"t/c/kustomization.yaml", "resources: [a.yaml]\n---\nresources: [b.yaml]\n"},
      })),
      ElementsAre("unsupported-kustomize: t/a/kustomization.yaml uses a, b, c, d, e (and 3 more), "
                  "which reverser does not model",
                  "unsupported-kustomize: t/b/kustomization.yaml is not a YAML mapping",
                  "unsupported-kustomize: t/c/kustomization.yaml holds 2 documents, not one "
                  "kustomization"));
}

TEST(AcceptanceGateTest, AHostileKustomizationGivesOneShortLine) {
  std::string keys;
  for (int i = 0; i < 10000; ++i) absl::StrAppend(&keys, "k", i, ": 1\n");
  const std::string long_key(5000, 'x');
  auto issues = CheckFiles({
      {"t/a/kustomization.yaml", keys},
      {"t/b/kustomization.yaml", absl::StrCat("\"\\xff\\u0007 ", long_key, "\": 1\n")},
      {"t/c/kustomization.yaml", "resources: [" + std::string(300, '[') + "]\n"},
  });
  ASSERT_EQ(issues.size(), 3u);
  EXPECT_EQ(issues[0].text,
            "unsupported-kustomize: t/a/kustomization.yaml uses k0, k1, k10, k100, k1000 (and "
            "9995 more), which reverser does not model");
  EXPECT_LT(issues[1].text.size(), 250u) << issues[1].text;
  EXPECT_EQ(issues[1].text.find_first_of("\n\x07\xff"), std::string::npos) << issues[1].text;
  EXPECT_EQ(issues[2].kind, IssueKind::kInvalidYaml) << issues[2].text;
}

TEST(AcceptanceGateTest, UnsupportedKustomizeWithoutASuffixIgnoredOrUnread) {
  // `Kustomization` is read by the gate itself (the index reads only .yaml/.yml files).
  EXPECT_THAT(Texts(CheckFiles(
                  {{"t/Kustomization", "namePrefix: x-\n"}, {"t/other/Kustomization", "a: [\n"}})),
              ElementsAre("unsupported-kustomize: t/Kustomization uses namePrefix, which reverser "
                          "does not model",
                          "invalid-yaml: t/other/Kustomization does not parse as YAML"));
  // A reader that fails (a blob over the limit, a missing reader) refuses it.
  IdentityIndex index = IndexOf({{"t/Kustomization", "resources: []\n"}});
  GateInput input;
  input.read_blob = [](const std::string&) -> absl::StatusOr<std::string> {
    return absl::ResourceExhaustedError("9 bytes, more than the limit of 8");
  };
  EXPECT_THAT(Texts(Check(index, input)),
              ElementsAre("unsupported-kustomize: t/Kustomization could not be read: 9 bytes, "
                          "more than the limit of 8"));
  EXPECT_THAT(Texts(Check(index)),
              ElementsAre("unsupported-kustomize: t/Kustomization could not be read: no reader "
                          "for blobs"));
  // Beyond the YAML limits.
  input = Reading({{"t/Kustomization", "resources: []\n"}});
  input.yaml_limits.max_nodes = 2;
  EXPECT_THAT(Texts(Check(index, input)),
              ElementsAre(testing::StartsWith("unsupported-kustomize: t/Kustomization could not "
                                              "be read: ")));
  // One the index refused on a limit renders what nobody checked.
  IndexLimits small;
  small.max_file_bytes = 8;
  IdentityIndex limited = IdentityIndex::Empty("t", small);
  limited.Apply({{"t/kustomization.yaml", std::string("resources: []\n")}}, nullptr);
  EXPECT_THAT(
      Texts(Check(limited)),
      ElementsAre("unsupported-kustomize: t/kustomization.yaml is over a read limit, not read"));
  // .gittargetignore does not hide a kustomization from the check.
  const std::string generator = "configMapGenerator: [{name: x}]\n";
  IdentityIndex ignoring = IndexOf({});
  ignoring.RecordIgnored("t/legacy/kustomization.yaml", {git::BlobIdOf(generator), {}});
  EXPECT_THAT(Texts(Check(ignoring, Reading({{"x", generator}}))),
              ElementsAre("unsupported-kustomize: t/legacy/kustomization.yaml uses "
                          "configMapGenerator, which reverser does not model"));
  // Named by a pattern it is still checked; in an ignored folder it is out of the path.
  for (const auto& [patterns, refused] :
       std::vector<std::pair<std::string, bool>>{{"kustomization.yaml\n", true},
                                                 {"legacy/kustomization.yaml\n", true},
                                                 {"legacy/\n", false},
                                                 {"leg*/\n", false}}) {
    auto rules = gitignore::IgnoreRules::Parse(patterns);
    ASSERT_TRUE(rules.ok()) << rules.status();
    GateInput input = Reading({{"x", generator}});
    input.ignore.rules = &*rules;
    EXPECT_EQ(Check(ignoring, input).size(), refused ? 1u : 0u) << patterns;
  }
}

TEST(AcceptanceGateTest, MixedManagedAllowlisted) {
  auto issues = CheckFiles({
      {"t/kustomization.yaml",
       "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nmetadata:\n"
       "  name: app\nresources: [a.yaml]\n---\n" +
           CmYaml("web")},
      {"t/.sops.yaml", CmYaml("cfg")},
      {"t/a.yaml", CmYaml("web")},
  });
  EXPECT_THAT(Texts(issues),
              ElementsAre("mixed-managed-allowlisted: ConfigMap demo/cfg in t/.sops.yaml, a file "
                          "reverser keeps as it is",
                          "mixed-managed-allowlisted: ConfigMap demo/web in t/kustomization.yaml "
                          "(document 2), a file reverser keeps as it is",
                          "unsupported-kustomize: t/kustomization.yaml holds 2 documents, not one "
                          "kustomization"));
  EXPECT_EQ(issues[0].kind, IssueKind::kMixedManagedAllowlisted);
  EXPECT_EQ(GitPathReason(issues), "UnsupportedContent");
  // Kustomizations naming themselves alike in two overlays are no duplicates.
  const std::string named =
      "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nmetadata:\n"
      "  name: app\n";
  EXPECT_THAT(
      CheckFiles({{"t/dev/kustomization.yaml", named}, {"t/prod/kustomization.yaml", named}}),
      IsEmpty());
}

TEST(AcceptanceGateTest, ForeignFile) {
  const std::map<std::string, std::string> files = {
      {"t/notes.txt", "hand-written\n"}, {"t/scripts/deploy.sh", "#!/bin/sh\n"},
      {"t/sub/.gittargetignore", "x\n"},  // only the path's own is read
      {"t/.gitignore", "*.tmp\n"},       {"t/.gittargetignore", "# comments\n"},
      {"t/README.md", "bootstrap\n"},    {"t/docs/README.md", "a person's\n"},
      {"t/a.yaml", CmYaml("a")},
  };
  auto issues = CheckFiles(files);
  EXPECT_THAT(Texts(issues),
              ElementsAre("foreign-file: t/.gitignore is no .yaml/.yml file (to keep it, name it "
                          "in t/.gittargetignore)",
                          "foreign-file: t/notes.txt is no .yaml/.yml file (to keep it, name it in "
                          "t/.gittargetignore)",
                          "foreign-file: t/scripts/deploy.sh is no .yaml/.yml file (to keep it, "
                          "name it in t/.gittargetignore)",
                          "foreign-file: t/sub/.gittargetignore is no .yaml/.yml file (to keep it, "
                          "name it in t/.gittargetignore)"));
  EXPECT_EQ(issues[0].kind, IssueKind::kForeignFile);
  EXPECT_EQ(GitPathReason(issues), "UnsupportedContent");
  // A root target: the repository's own files are foreign too, until named in the ignore file
  // (which keeps them out of the index).
  EXPECT_THAT(Texts(CheckFiles({{"LICENSE", "MIT\n"}, {"README.md", "# repo\n"}}, "")),
              ElementsAre("foreign-file: LICENSE is no .yaml/.yml file (to keep it, name it in "
                          ".gittargetignore)"));
  // A file deleted from the path is gone from the index.
  IdentityIndex index = IndexOf(files);
  index.Apply({{"t/notes.txt", std::nullopt},
               {"t/.gitignore", std::nullopt},
               {"t/scripts/deploy.sh", std::nullopt},
               {"t/sub/.gittargetignore", std::nullopt}},
              nullptr);
  EXPECT_THAT(Check(index, Reading(files)), IsEmpty());
}

TEST(AcceptanceGateTest, ReasonIsUnsupportedContentForAnyMix) {
  std::vector<GateIssue> mixed = {
      {IssueKind::kIgnoreShadowsManaged, "ignore-shadows-managed: x"},
      {IssueKind::kWriteFanIn, "write-fan-in: y"},
  };
  EXPECT_EQ(GitPathReason(mixed), "UnsupportedContent");
  EXPECT_EQ(GitPathReason({{IssueKind::kDuplicate, "duplicate: z"}}), "UnsupportedContent");
  EXPECT_EQ(GitPathReason({{IssueKind::kIgnoreShadowsManaged, "ignore-shadows-managed: x"},
                           {IssueKind::kInvalidIgnore, "invalid-ignore: y"}}),
            "IgnoreShadowsManagedPath");
  for (IssueKind kind : {IssueKind::kImpureManagedFile, IssueKind::kMixedManagedAllowlisted,
                         IssueKind::kUnsupportedKustomize, IssueKind::kForeignFile}) {
    EXPECT_EQ(GitPathReason({{kind, "x"}}), "UnsupportedContent") << IssueKindName(kind);
    EXPECT_EQ(GitPathReason({{kind, "x"}, {IssueKind::kWriteFanIn, "write-fan-in: y"}}),
              "UnsupportedContent");
  }
}

TEST(AcceptanceGateTest, MessageNamesThePathTheFirstIssueAndHowManyMore) {
  std::vector<GateIssue> issues = {
      {IssueKind::kDuplicate, "duplicate: ConfigMap demo/web in t/a.yaml and t/b.yaml"},
      {IssueKind::kNonKrm, "non-krm: t/v.yaml has no apiVersion, kind or metadata.name"},
      {IssueKind::kInvalidYaml, "invalid-yaml: t/x.yaml does not parse as YAML"},
  };
  EXPECT_EQ(GitPathMessage("clusters/a", issues),
            "Git path refused at clusters/a: duplicate: ConfigMap demo/web in t/a.yaml and "
            "t/b.yaml (and 2 more issue(s))");
  EXPECT_EQ(GitPathMessage("", {issues[2]}),
            "Git path refused at /: invalid-yaml: t/x.yaml does not parse as YAML");
}

}  // namespace
}  // namespace reverser::gitworker
