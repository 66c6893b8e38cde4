#include "libs/manifest/paths.h"

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace reverser::manifest {
namespace {

using core::GroupVersionResource;
using core::Scope;

ObjectIdentity ConfigMap(std::string ns, std::string name) {
  return {{"", "v1", "configmaps"}, "ConfigMap", Scope::kNamespaced, std::move(ns), std::move(name)};
}
ObjectIdentity Deployment() {
  return {{"apps", "v1", "deployments"}, "Deployment", Scope::kNamespaced, "prod", "web"};
}
ObjectIdentity ClusterRole(std::string name) {
  return {{"rbac.authorization.k8s.io", "v1", "clusterroles"}, "ClusterRole", Scope::kCluster, "",
          std::move(name)};
}
ObjectIdentity Secret() {
  return {{"", "v1", "secrets"}, "Secret", Scope::kNamespaced, "prod", "db", true};
}

TEST(CanonicalPathTest, ReferenceLayout) {
  EXPECT_EQ(*CanonicalPath("clusters/prod", ConfigMap("default", "settings")),
            "clusters/prod/default/configmaps/settings.yaml");
  EXPECT_EQ(*CanonicalPath("clusters/prod", Deployment()),
            "clusters/prod/prod/apps/deployments/web.yaml");
  EXPECT_EQ(*CanonicalPath("base", ClusterRole("system:aggregate-to-admin")),
            "base/_cluster/rbac.authorization.k8s.io/clusterroles/system:aggregate-to-admin.yaml");
  EXPECT_EQ(*CanonicalPath("base", Secret()), "base/prod/secrets/db.sops.yaml");
  // The repository root, however spelled; a trailing slash is tolerated.
  EXPECT_EQ(*CanonicalPath("", Deployment()), "prod/apps/deployments/web.yaml");
  EXPECT_EQ(*CanonicalPath(".", Deployment()), "prod/apps/deployments/web.yaml");
  EXPECT_EQ(*CanonicalPath("a/b/", Deployment()), "a/b/prod/apps/deployments/web.yaml");
}

TEST(CanonicalPathTest, RefusesAnythingThatCouldLeaveTheTarget) {
  for (const char* name : {"..", ".", ""}) {
    SCOPED_TRACE(name);
    EXPECT_FALSE(CanonicalPath("t", ConfigMap("default", name)).ok());
  }
  EXPECT_EQ(CanonicalPath("t", ConfigMap("default", "..")).status().message(),
            "name \"..\" is not a file name");
  // Separators in a name are escaped, never followed.
  EXPECT_EQ(*CanonicalPath("t", ConfigMap("default", "../../etc/passwd")),
            "t/default/configmaps/..%2F..%2Fetc%2Fpasswd.yaml");
  EXPECT_FALSE(CanonicalPath("t", ConfigMap("_cluster", "x")).ok());   // not a namespace
  EXPECT_FALSE(CanonicalPath("t", ConfigMap("", "x")).ok());           // namespaced needs one
  EXPECT_FALSE(CanonicalPath("t", ConfigMap("Default", "x")).ok());    // not a DNS label
  ObjectIdentity scoped = ClusterRole("r");
  scoped.namespace_ = "ns";
  EXPECT_EQ(CanonicalPath("t", scoped).status().message(),
            "cluster-scoped object \"r\" must not have a namespace (got \"ns\")");
  for (const char* target : {"/abs", "../up", "a/../b", "a//b", "a\\b", "./a"}) {
    SCOPED_TRACE(target);
    EXPECT_FALSE(CanonicalPath(target, Deployment()).ok());
  }
  ObjectIdentity bad_group = Deployment();
  bad_group.gvr.group = "../x";
  EXPECT_FALSE(CanonicalPath("t", bad_group).ok());
}

std::string FileOf(const ObjectIdentity& id) {
  auto path = CanonicalPath("", id);
  EXPECT_TRUE(path.ok()) << path.status();
  if (!path.ok()) return "";
  EXPECT_TRUE(ValidateRelativePath(*path).ok()) << *path;
  return path->substr(path->rfind('/') + 1);
}

TEST(FileNameTest, SafeNamesKeepTheReferenceLayout) {
  for (const std::string& name :
       {std::string("web"), std::string("a.b-c"), std::string("system:controller:x"),
        std::string("with space"), std::string("UPPER"), std::string("caf\xC3\xA9"),
        std::string(".hidden"), std::string("x.sops.extra"), std::string("kustomization2"),
        std::string(245, 'n'), std::string(250, 'n')}) {
    SCOPED_TRACE(name);
    EXPECT_EQ(FileOf(ClusterRole(name)), name + ".yaml");
  }
  EXPECT_EQ(FileOf(Secret()), "db.sops.yaml");
}

TEST(FileNameTest, HostileRbacNamesAreEscapedReversibly) {
  EXPECT_EQ(FileOf(ClusterRole("a\\b")), "a%5Cb.yaml");
  EXPECT_EQ(FileOf(ClusterRole("tab\there\n")), "tab%09here%0A.yaml");
  EXPECT_EQ(FileOf(ClusterRole(std::string("nul\0x", 5))), "nul%00x.yaml");
  EXPECT_EQ(FileOf(ClusterRole("del\x7F")), "del%7F.yaml");
  EXPECT_EQ(FileOf(ClusterRole("100%")), "100%25.yaml");
  // Distinct names, distinct files: the escape of a byte is never a name of its own.
  EXPECT_NE(FileOf(ClusterRole("a\\b")), FileOf(ClusterRole("a%5Cb")));
}

TEST(FileNameTest, NamesThatWouldPassForOurOwnFilesAreEscaped) {
  EXPECT_EQ(FileOf(ClusterRole(".sops")), "%2Esops.yaml");
  EXPECT_EQ(FileOf(ConfigMap("default", "x.sops")), "x%2Esops.yaml");
  EXPECT_EQ(FileOf(ConfigMap("default", "kustomization")), "%6Bustomization.yaml");
  // Sensitive files are meant to look encrypted; nothing to escape.
  ObjectIdentity secret = Secret();
  secret.name = "x.sops";
  EXPECT_EQ(FileOf(secret), "x.sops.sops.yaml");
  secret.name = "kustomization";
  EXPECT_EQ(FileOf(secret), "kustomization.sops.yaml");
}

TEST(FileNameTest, LongNamesAreShortenedStablyWithAHash) {
  // 253 bytes (the DNS-subdomain maximum) no longer fit with ".yaml" plus 1.
  const std::string longest_dns(253, 'a');
  EXPECT_EQ(FileOf(ConfigMap("default", longest_dns)),
            std::string(232, 'a') + "%-32859a3ab65ac529.yaml");
  ObjectIdentity secret = Secret();
  secret.name = std::string(250, 'a');
  const std::string sensitive = FileOf(secret);
  EXPECT_EQ(sensitive.size(), 255u);
  EXPECT_TRUE(absl::EndsWith(sensitive, ".sops.yaml")) << sensitive;
  // RBAC names have no length limit.
  const std::string huge = FileOf(ClusterRole(std::string(10000, 'x')));
  EXPECT_EQ(huge, std::string(232, 'x') + "%-e4ee97ec252749d2.yaml");
  EXPECT_EQ(FileOf(ClusterRole(std::string(10000, 'x'))), huge) << "stable";
  EXPECT_NE(FileOf(ClusterRole(std::string(10001, 'x'))), huge);
  // The prefix never ends inside an escape or a UTF-8 sequence.
  EXPECT_EQ(FileOf(ClusterRole(std::string(200, '\\'))), [] {
    std::string out;
    for (int i = 0; i < 77; ++i) out += "%5C";
    return out;
  }() + "%-f277d97f234cb05e.yaml");
  std::string euros;
  for (int i = 0; i < 100; ++i) euros += "\xE2\x82\xAC";
  const std::string cut = FileOf(ClusterRole(euros));
  EXPECT_EQ(cut.substr(0, 231), euros.substr(0, 231));
  EXPECT_EQ(cut.substr(231, 2), "%-");
}

TEST(PlacementTemplateTest, EveryVariable) {
  const std::string all =
      "{group}|{groupPath}|{version}|{apiVersion}|{resource}|{kind}|{scope}|{namespace}|"
      "{namespaceOrCluster}|{name}/x{sensitiveSuffix}";
  EXPECT_EQ(*RenderPlacementTemplate(all, Deployment()),
            "apps|apps|v1|apps%2Fv1|deployments|Deployment|namespaced|prod|prod|web/x.yaml");
  EXPECT_EQ(*RenderPlacementTemplate(all, Secret()),
            "||v1|v1|secrets|Secret|namespaced|prod|prod|db/x.sops.yaml");
  EXPECT_EQ(*RenderPlacementTemplate(all, ClusterRole("admin")),
            "rbac.authorization.k8s.io|rbac.authorization.k8s.io|v1|rbac.authorization.k8s.io%2Fv1|"
            "clusterroles|ClusterRole|cluster||_cluster|admin/x.yaml");
}

TEST(PlacementTemplateTest, CollapsesEmptySegments) {
  constexpr char kTmpl[] = "{namespace}/{groupPath}/{resource}/{name}{sensitiveSuffix}";
  EXPECT_EQ(*RenderPlacementTemplate(kTmpl, ConfigMap("default", "a")), "default/configmaps/a.yaml");
  EXPECT_EQ(*RenderPlacementTemplate(kTmpl, Deployment()), "prod/apps/deployments/web.yaml");
  EXPECT_EQ(*RenderPlacementTemplate(kTmpl, ClusterRole("r")),
            "rbac.authorization.k8s.io/clusterroles/r.yaml");
  EXPECT_EQ(*RenderPlacementTemplate("apps/{namespaceOrCluster}/all.yaml", ClusterRole("r")),
            "apps/_cluster/all.yaml");
}

TEST(PlacementTemplateTest, UnknownVariablesAndStrayBracesAreErrors) {
  EXPECT_EQ(RenderPlacementTemplate("{namespace}/{nmae}/{Kind}.yaml", Deployment()).status().message(),
            "placement template \"{namespace}/{nmae}/{Kind}.yaml\" references unknown "
            "variable(s): {nmae}, {Kind}");
  EXPECT_EQ(RenderPlacementTemplate("{namespace/{name}.yaml", Deployment()).status().message(),
            "placement template \"{namespace/{name}.yaml\" has a \"{\" that opens no complete "
            "variable");
  EXPECT_EQ(RenderPlacementTemplate("ns}/{name}.yaml", Deployment()).status().message(),
            "placement template \"ns}/{name}.yaml\" has a \"}\" that closes no variable");
  EXPECT_FALSE(RenderPlacementTemplate("{}/x.yaml", Deployment()).ok());
}

TEST(PlacementTemplateTest, RenderedPathsAreJailed) {
  EXPECT_EQ(RenderPlacementTemplate("../{name}.yaml", Deployment()).status().message(),
            "placement template \"../{name}.yaml\" for apps/v1/deployments web: path "
            "\"../web.yaml\" must be a clean relative path that stays under spec.path");
  EXPECT_FALSE(RenderPlacementTemplate("/{name}.yaml", Deployment()).ok() &&
               RenderPlacementTemplate("/{name}.yaml", Deployment())->front() == '/');
  EXPECT_FALSE(RenderPlacementTemplate("{name}.json", Deployment()).ok());
  EXPECT_FALSE(RenderPlacementTemplate("a\\{name}.yaml", Deployment()).ok());
  EXPECT_FALSE(RenderPlacementTemplate("{groupPath}{sensitiveSuffix}", ConfigMap("d", "x")).ok());
  // A value can never add a directory: {apiVersion} carries a "/" and is encoded.
  EXPECT_EQ(*RenderPlacementTemplate("{apiVersion}-{name}.yaml", Deployment()),
            "apps%2Fv1-web.yaml");
}

// Rendering stops once the path can only be refused: a template repeating a 200-byte name
// 100,000 times fails after a few KB instead of building 20 MB.
TEST(PlacementTemplateTest, RenderingIsBoundedByThePathLimit) {
  std::string tmpl;
  for (int i = 0; i < 100000; ++i) tmpl += "{name}";
  tmpl += ".yaml";
  EXPECT_TRUE(ValidatePlacementTemplate(tmpl).ok());
  auto rendered = RenderPlacementTemplate(tmpl, ConfigMap("default", std::string(200, 'n')));
  ASSERT_FALSE(rendered.ok());
  EXPECT_NE(rendered.status().message().find("renders more than 4096 bytes"), std::string::npos)
      << rendered.status();
  // Empty values collapse: many {groupPath}/ segments still render a short, valid path.
  std::string collapsing;
  for (int i = 0; i < 3000; ++i) collapsing += "{groupPath}/";
  EXPECT_EQ(*RenderPlacementTemplate(collapsing + "{name}.yaml", ConfigMap("default", "a")),
            "a.yaml");
}

TEST(PlacementTemplateTest, NamesFollowTheFileNameRules) {
  EXPECT_EQ(*RenderPlacementTemplate("{namespaceOrCluster}/{name}.yaml", ClusterRole("a\\b\x01")),
            "_cluster/a%5Cb%01.yaml");
  EXPECT_EQ(*RenderPlacementTemplate("{name}.yml", ClusterRole(".sops")), "%2Esops.yml");
  EXPECT_EQ(*RenderPlacementTemplate("{name}{sensitiveSuffix}", ConfigMap("d", "kustomization")),
            "%6Bustomization.yaml");
  const std::string rendered = *RenderPlacementTemplate("{namespace}/{name}{sensitiveSuffix}",
                                                        ConfigMap("d", std::string(400, 'z')));
  EXPECT_EQ(rendered.substr(0, 2), "d/");
  EXPECT_EQ(rendered.size(), 2u + 255u);
  EXPECT_TRUE(absl::EndsWith(rendered, ".yaml")) << rendered;
  EXPECT_NE(rendered.find("%-"), std::string::npos) << rendered;
  // A long name in a directory segment is shortened too.
  const std::string dir =
      *RenderPlacementTemplate("{name}/all.yaml", ConfigMap("d", std::string(400, 'z')));
  EXPECT_EQ(dir.find('/'), 255u);
  EXPECT_TRUE(absl::EndsWith(dir, "/all.yaml"));
}

TEST(PlacementTemplateTest, StaticValidation) {
  EXPECT_TRUE(ValidatePlacementTemplate("{namespace}/{groupPath}/{resource}/{name}{sensitiveSuffix}").ok());
  EXPECT_TRUE(ValidatePlacementTemplate("apps/{namespaceOrCluster}/bundle.yml").ok());
  EXPECT_EQ(ValidatePlacementTemplate("").message(), "placement template is empty");
  EXPECT_EQ(ValidatePlacementTemplate("/{name}.yaml").message(),
            "placement template \"/{name}.yaml\" must be relative, not absolute");
  EXPECT_EQ(ValidatePlacementTemplate("a/../{name}.yaml").message(),
            "placement template \"a/../{name}.yaml\" must not contain a \"..\" segment");
  EXPECT_EQ(ValidatePlacementTemplate("{name}.txt").message(),
            "placement template \"{name}.txt\" must end in .yaml, .yml or {sensitiveSuffix}");
  EXPECT_FALSE(ValidatePlacementTemplate("a\\{name}.yaml").ok());
  EXPECT_FALSE(ValidatePlacementTemplate("{bogus}.yaml").ok());
  EXPECT_FALSE(ValidatePlacementTemplate(std::string("a\0b.yaml", 8)).ok());
}

TEST(PlacementTemplateTest, IdentityCompleteness) {
  EXPECT_TRUE(IsIdentityComplete("{namespace}/{groupPath}/{resource}/{name}.yaml", false));
  EXPECT_TRUE(IsIdentityComplete("{namespaceOrCluster}/{name}.sops.yaml", true));
  EXPECT_FALSE(IsIdentityComplete("{namespaceOrCluster}/{name}.sops.yaml", false));
  EXPECT_FALSE(IsIdentityComplete("{namespace}/all.yaml", true));
  EXPECT_FALSE(IsIdentityComplete("{name}.yaml", true));
}

TEST(PathsTest, ValidateRelativePathRejectsHostilePaths) {
  for (const char* ok : {"a.yaml", "a/b/c.yml", "ns/x.sops.yaml", "system:x.yaml"}) {
    EXPECT_TRUE(ValidateRelativePath(ok).ok()) << ok;
  }
  for (const std::string& bad :
       {std::string(""), std::string("/etc/passwd.yaml"), std::string("../x.yaml"),
        std::string("a/../../x.yaml"), std::string("a/./x.yaml"), std::string("a//x.yaml"),
        std::string("a\\x.yaml"), std::string("a/x.txt"), std::string("a/.yaml"),
        std::string("a/"), std::string("x\0.yaml", 7), std::string("a\nb.yaml"),
        std::string(300, 'x') + ".yaml", std::string(".."), std::string("a/.sops.yaml")}) {
    EXPECT_FALSE(ValidateRelativePath(bad).ok()) << bad;
  }
  EXPECT_EQ(ValidateRelativePath(std::string("x\0.yaml", 7)).message(),
            "path \"x\\x00.yaml\" contains NUL or control characters");
}

TEST(PathsTest, JoinAndNormalize) {
  EXPECT_EQ(*NormalizeTargetPath(""), "");
  EXPECT_EQ(*NormalizeTargetPath("./"), "");
  EXPECT_EQ(*NormalizeTargetPath("clusters/prod//"), "clusters/prod");
  EXPECT_FALSE(NormalizeTargetPath("/").ok());
  EXPECT_FALSE(NormalizeTargetPath("a/../b").ok());
  EXPECT_EQ(*JoinTargetPath("base", "ns/x.yaml"), "base/ns/x.yaml");
  EXPECT_FALSE(JoinTargetPath("base", "../x.yaml").ok());
}

TEST(PathsTest, IdentityOfAnObject) {
  const auto object = nlohmann::json::parse(
      R"({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "prod"}})");
  auto id = IdentityOf(object, {"apps", "v1", "deployments"}, Scope::kNamespaced, false);
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(id->kind, "Deployment");
  EXPECT_EQ(*CanonicalPath("base", *id), "base/prod/apps/deployments/web.yaml");
  EXPECT_FALSE(IdentityOf(object, {"apps", "v1", "deployments"}, Scope::kCluster, false).ok());
  EXPECT_FALSE(IdentityOf(nlohmann::json::array(), {"", "v1", "x"}, Scope::kCluster, false).ok());
  EXPECT_EQ(IdentityOf(nlohmann::json::parse(R"({"metadata": {"namespace": "a"}})"),
                       {"", "v1", "configmaps"}, Scope::kNamespaced, false)
                .status()
                .message(),
            "name must not be empty");
}

TEST(PathsTest, TypeKeys) {
  EXPECT_EQ(PlacementTypeKey({"", "v1", "secrets"}), "v1/secrets");
  EXPECT_EQ(PlacementTypeKey({"apps", "v1", "deployments"}), "apps/v1/deployments");
}

}  // namespace
}  // namespace reverser::manifest
