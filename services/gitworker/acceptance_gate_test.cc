// The acceptance gate over in-memory indexes: one test per issue kind with its exact text, the
// GitPathAccepted reason and the message.

#include "services/gitworker/acceptance_gate.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

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

TEST(AcceptanceGateTest, ACleanPathWithBootstrapFilesAndKustomizationHasNoIssues) {
  IdentityIndex index = IndexOf({
      {"t/demo/configmaps/a.yaml", CmYaml("a")},
      {"t/bundle.yaml", "# head\n---\n" + CmYaml("b") + "---\n" + CmYaml("c") + "---\n"},
      {"t/.sops.yaml", "creation_rules:\n  - age: age1xyz\n"},
      {"t/kustomization.yaml", "resources:\n  - demo\n"},
      {"t/README.md", "# not read\n"},
  });
  GateInput input;
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
  IdentityIndex index = IndexOf({
      {"t/values.yaml", "replicas: 3\n"},
      {"t/mixed.yaml", CmYaml("a") + "---\n# only a comment\n---\n- a list\n"},
  });
  EXPECT_THAT(Texts(Check(index)),
              ElementsAre("non-krm: t/mixed.yaml (document 3) has no apiVersion, kind or "
                          "metadata.name",
                          "non-krm: t/values.yaml has no apiVersion, kind or metadata.name"));
  EXPECT_EQ(Check(index)[0].kind, IssueKind::kNonKrm);
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
  GateInput input;
  input.followed = &followed;
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
  EXPECT_EQ(GitPathReason(issues), "UnsupportedContent");
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

TEST(AcceptanceGateTest, ReasonIsUnsupportedContentForAnyMix) {
  std::vector<GateIssue> mixed = {
      {IssueKind::kIgnoreShadowsManaged, "ignore-shadows-managed: x"},
      {IssueKind::kWriteFanIn, "write-fan-in: y"},
  };
  EXPECT_EQ(GitPathReason(mixed), "UnsupportedContent");
  EXPECT_EQ(GitPathReason({{IssueKind::kDuplicate, "duplicate: z"}}), "UnsupportedContent");
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
