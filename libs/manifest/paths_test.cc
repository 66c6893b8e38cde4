#include "libs/manifest/paths.h"

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
  for (const char* name : {"..", ".", "a/b", "a\\b", "", "nul\0x"}) {
    SCOPED_TRACE(name);
    EXPECT_FALSE(CanonicalPath("t", ConfigMap("default", std::string(name, name[0] == 'n' ? 5 : strlen(name)))).ok());
  }
  EXPECT_EQ(CanonicalPath("t", ConfigMap("default", "..")).status().message(),
            "name \"..\" is not a file name");
  EXPECT_EQ(CanonicalPath("t", ConfigMap("default", "../../etc/passwd")).status().message(),
            "name \"../../etc/passwd\" must not contain a path separator");
  EXPECT_FALSE(CanonicalPath("t", ConfigMap("_cluster", "x")).ok());   // not a namespace
  EXPECT_FALSE(CanonicalPath("t", ConfigMap("", "x")).ok());           // namespaced needs one
  EXPECT_FALSE(CanonicalPath("t", ConfigMap("Default", "x")).ok());    // not a DNS label
  ObjectIdentity scoped = ClusterRole("r");
  scoped.namespace_ = "ns";
  EXPECT_EQ(CanonicalPath("t", scoped).status().message(),
            "cluster-scoped object \"r\" must not have a namespace (got \"ns\")");
  EXPECT_FALSE(CanonicalPath("t", ConfigMap("default", std::string(300, 'x'))).ok());
  for (const char* target : {"/abs", "../up", "a/../b", "a//b", "a\\b", "./a"}) {
    SCOPED_TRACE(target);
    EXPECT_FALSE(CanonicalPath(target, Deployment()).ok());
  }
  ObjectIdentity bad_group = Deployment();
  bad_group.gvr.group = "../x";
  EXPECT_FALSE(CanonicalPath("t", bad_group).ok());
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

TEST(PathsTest, TypeKeysAndSensitivity) {
  EXPECT_EQ(PlacementTypeKey({"", "v1", "secrets"}), "v1/secrets");
  EXPECT_EQ(PlacementTypeKey({"apps", "v1", "deployments"}), "apps/v1/deployments");
  EXPECT_TRUE(IsSensitiveResource({"", "v1", "secrets"}));
  EXPECT_FALSE(IsSensitiveResource({"example.com", "v1", "secrets"}));
  EXPECT_FALSE(IsSensitiveResource({"", "v1", "configmaps"}));
  EXPECT_TRUE(IsSensitiveResource({"", "v1", "configmaps"}, {"configmaps"}));
  EXPECT_TRUE(IsSensitiveResource({"bitnami.com", "v1alpha1", "sealedsecrets"},
                                  {"bitnami.com/sealedsecrets"}));
  EXPECT_FALSE(IsSensitiveResource({"bitnami.com", "v1alpha1", "sealedsecrets"}, {"sealedsecrets"}));
}

}  // namespace
}  // namespace reverser::manifest
