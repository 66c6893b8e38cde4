// Parses every CRD in deploy/crds and checks the structure the rest of reverser relies on:
// names, group, version, scope, required fields, enums, CEL immutability rules and their messages,
// printer columns. (crds_reference_test compares every schema node with the reference's.)

#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "yaml-cpp/yaml.h"

namespace {

constexpr char kDir[] = "deploy/crds/";

YAML::Node Load(const std::string& plural) {
  std::string path = std::string(kDir) + "configbutler.ai_" + plural + ".yaml";
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << "cannot open " << path;
  std::stringstream text;
  text << in.rdbuf();
  std::vector<YAML::Node> docs = YAML::LoadAll(text.str());
  EXPECT_EQ(docs.size(), 1u) << path;
  return docs.empty() ? YAML::Node() : docs[0];
}

YAML::Node Version(const YAML::Node& crd) { return crd["spec"]["versions"][0]; }
YAML::Node Schema(const YAML::Node& crd) { return Version(crd)["schema"]["openAPIV3Schema"]; }

// Follows "spec.rules[].resources" style paths through properties / items. (yaml-cpp's
// `node = other` assigns through to the referenced node; reset() rebinds.)
YAML::Node At(const YAML::Node& root, const std::string& path) {
  YAML::Node node;
  node.reset(root);
  std::stringstream parts(path);
  std::string part;
  while (std::getline(parts, part, '.')) {
    bool items = part.size() > 2 && part.substr(part.size() - 2) == "[]";
    if (items) part = part.substr(0, part.size() - 2);
    if (!node.IsMap() || !node["properties"].IsMap() || !node["properties"][part])
      return YAML::Node(YAML::NodeType::Undefined);
    node.reset(node["properties"][part]);
    if (items) node.reset(node["items"]);
  }
  return node;
}

std::set<std::string> Strings(const YAML::Node& seq) {
  std::set<std::string> out;
  for (const auto& item : seq) out.insert(item.as<std::string>());
  return out;
}

std::vector<std::string> ColumnNames(const YAML::Node& crd, bool wide) {
  std::vector<std::string> out;
  for (const auto& col : Version(crd)["additionalPrinterColumns"]) {
    bool is_wide = col["priority"] && col["priority"].as<int>() > 0;
    if (is_wide == wide) out.push_back(col["name"].as<std::string>());
  }
  return out;
}

std::vector<std::string> CelRules(const YAML::Node& node) {
  std::vector<std::string> out;
  for (const auto& rule : node["x-kubernetes-validations"]) {
    out.push_back(rule["rule"].as<std::string>());
  }
  return out;
}

std::vector<std::string> CelMessages(const YAML::Node& node) {
  std::vector<std::string> out;
  for (const auto& rule : node["x-kubernetes-validations"]) {
    out.push_back(rule["message"].as<std::string>());
  }
  return out;
}

struct Expected {
  std::string plural;
  std::string kind;
  std::string scope;
};

const std::vector<Expected> kAll = {
    {"gitproviders", "GitProvider", "Namespaced"},
    {"gittargets", "GitTarget", "Namespaced"},
    {"watchrules", "WatchRule", "Namespaced"},
    {"clusterwatchrules", "ClusterWatchRule", "Cluster"},
    {"commitrequests", "CommitRequest", "Namespaced"},
};

TEST(CrdsTest, EveryCrdHasIdentityVersionAndStatusSubresource) {
  for (const auto& want : kAll) {
    SCOPED_TRACE(want.plural);
    YAML::Node crd = Load(want.plural);
    ASSERT_TRUE(crd.IsMap());
    EXPECT_EQ(crd["apiVersion"].as<std::string>(), "apiextensions.k8s.io/v1");
    EXPECT_EQ(crd["kind"].as<std::string>(), "CustomResourceDefinition");
    EXPECT_EQ(crd["metadata"]["name"].as<std::string>(), want.plural + ".configbutler.ai");
    EXPECT_EQ(crd["spec"]["group"].as<std::string>(), "configbutler.ai");
    EXPECT_EQ(crd["spec"]["scope"].as<std::string>(), want.scope);
    EXPECT_EQ(crd["spec"]["names"]["kind"].as<std::string>(), want.kind);
    EXPECT_EQ(crd["spec"]["names"]["listKind"].as<std::string>(), want.kind + "List");
    EXPECT_EQ(crd["spec"]["names"]["plural"].as<std::string>(), want.plural);
    ASSERT_EQ(crd["spec"]["versions"].size(), 1u);
    EXPECT_EQ(Version(crd)["name"].as<std::string>(), "v1alpha3");
    EXPECT_TRUE(Version(crd)["served"].as<bool>());
    EXPECT_TRUE(Version(crd)["storage"].as<bool>());
    EXPECT_TRUE(Version(crd)["subresources"]["status"].IsMap());
    EXPECT_EQ(Schema(crd)["type"].as<std::string>(), "object");
    EXPECT_TRUE(Strings(Schema(crd)["required"]).count("spec"));
    // kstatus trio, list-map keyed by type.
    YAML::Node conditions = At(Schema(crd), "status.conditions");
    ASSERT_TRUE(conditions) << "status.conditions";
    EXPECT_EQ(conditions["x-kubernetes-list-type"].as<std::string>(), "map");
    EXPECT_EQ(Strings(conditions["items"]["required"]),
              (std::set<std::string>{"lastTransitionTime", "message", "reason", "status", "type"}));
    EXPECT_TRUE(At(Schema(crd), "status.observedGeneration"));
    EXPECT_EQ(ColumnNames(crd, false).back(), "Age");
  }
}

TEST(CrdsTest, GitProvider) {
  YAML::Node crd = Load("gitproviders");
  YAML::Node spec = At(Schema(crd), "spec");
  EXPECT_EQ(Strings(spec["required"]), (std::set<std::string>{"allowedBranches", "url"}));
  EXPECT_EQ(At(spec, "url")["minLength"].as<int>(), 1);
  EXPECT_EQ(At(spec, "allowedBranches")["minItems"].as<int>(), 1);
  EXPECT_EQ(CelRules(spec), (std::vector<std::string>{"self.url == oldSelf.url"}));
  EXPECT_EQ(CelMessages(spec),
            (std::vector<std::string>{"spec.url is immutable; delete and recreate the GitProvider "
                                      "to point at a different repository"}));
  EXPECT_EQ(At(spec, "allowedBranches[]")["minLength"].as<int>(), 1);
  EXPECT_EQ(At(spec, "secretRef.kind")["default"].as<std::string>(), "Secret");
  EXPECT_EQ(Strings(At(spec, "secretRef.kind")["enum"]), (std::set<std::string>{"Secret"}));
  EXPECT_EQ(Strings(At(spec, "knownHostsRef.kind")["enum"]),
            (std::set<std::string>{"ConfigMap", "Secret"}));
  EXPECT_EQ(At(spec, "knownHostsRef.kind")["default"].as<std::string>(), "ConfigMap");
  // No schema default: the catalog applies 5s when the field is absent, as the reference does.
  EXPECT_TRUE(At(spec, "push.commitWindow"));
  EXPECT_FALSE(At(spec, "push.commitWindow")["default"]);
  EXPECT_EQ(At(spec, "commit.committer.name")["default"].as<std::string>(), "GitOps Reverser");
  EXPECT_EQ(At(spec, "commit.committer.email")["default"].as<std::string>(),
            "noreply@configbutler.ai");
  for (const char* field : {"eventTemplate", "reconcileTemplate", "groupTemplate"}) {
    EXPECT_TRUE(At(spec, std::string("commit.message.") + field)) << field;
  }
  EXPECT_EQ(Strings(At(spec, "commit.signing")["required"]), (std::set<std::string>{"secretRef"}));
  EXPECT_FALSE(At(spec, "commit.signing.generateWhenMissing")["default"].as<bool>());
  EXPECT_TRUE(At(Schema(crd), "status.signingPublicKey"));
  EXPECT_EQ(ColumnNames(crd, false), (std::vector<std::string>{"URL", "Ready", "Reason", "Age"}));
  EXPECT_EQ(ColumnNames(crd, true), (std::vector<std::string>{"Status"}));
}

TEST(CrdsTest, GitTarget) {
  YAML::Node crd = Load("gittargets");
  YAML::Node spec = At(Schema(crd), "spec");
  EXPECT_EQ(Strings(spec["required"]), (std::set<std::string>{"branch", "path", "providerRef"}));
  EXPECT_EQ(CelRules(spec), (std::vector<std::string>{"self.providerRef == oldSelf.providerRef",
                                                      "self.branch == oldSelf.branch",
                                                      "self.path == oldSelf.path"}));
  for (const std::string& message : CelMessages(spec)) {
    EXPECT_TRUE(message.find(" is immutable; delete and recreate the GitTarget to change its "
                             "destination") != std::string::npos)
        << message;
  }
  EXPECT_EQ(CelMessages(spec)[0],
            "spec.providerRef is immutable; delete and recreate the GitTarget to change its "
            "destination");
  EXPECT_EQ(At(spec, "providerRef.group")["default"].as<std::string>(), "configbutler.ai");
  EXPECT_EQ(At(spec, "providerRef.kind")["default"].as<std::string>(), "GitProvider");
  EXPECT_EQ(At(spec, "branch")["minLength"].as<int>(), 1);
  EXPECT_EQ(At(spec, "path")["minLength"].as<int>(), 1);
  EXPECT_EQ(At(spec, "encryption.provider")["default"].as<std::string>(), "sops");
  EXPECT_EQ(Strings(At(spec, "encryption")["required"]), (std::set<std::string>{"provider"}));
  // Manifests naming `kind: Secret` (as the reference's quickstart does) pass strict validation.
  EXPECT_EQ(At(spec, "encryption.secretRef.kind")["default"].as<std::string>(), "Secret");
  EXPECT_EQ(Strings(At(spec, "encryption.secretRef.kind")["enum"]),
            (std::set<std::string>{"Secret"}));
  EXPECT_EQ(At(spec, "encryption.secretRef.group")["default"].as<std::string>(), "");
  EXPECT_TRUE(At(spec, "encryption.age.recipients.publicKeys"));
  EXPECT_EQ(At(spec, "placement.byType")["additionalProperties"]["type"].as<std::string>(),
            "string");
  for (const char* field : {"summary", "total", "ready", "replaying", "blocked", "observedTime"}) {
    EXPECT_TRUE(At(Schema(crd), std::string("status.streams.") + field)) << field;
  }
  EXPECT_TRUE(At(Schema(crd), "status.lastPushTime"));
  EXPECT_FALSE(At(Schema(crd), "status.streams.total")["minimum"]);
  EXPECT_EQ(ColumnNames(crd, false),
            (std::vector<std::string>{"Provider", "Branch", "Path", "Ready", "Reason", "Streams",
                                      "Age"}));
  EXPECT_EQ(ColumnNames(crd, true), (std::vector<std::string>{"GitPathAccepted", "StreamsRunning",
                                                              "Status", "Encryption"}));
}

void CheckResourceRule(const YAML::Node& rule) {
  EXPECT_EQ(Strings(At(rule, "operations")["items"]["enum"]),
            (std::set<std::string>{"CREATE", "UPDATE", "DELETE", "*"}));
  EXPECT_EQ(At(rule, "resources")["minItems"].as<int>(), 1);
  EXPECT_EQ(At(rule, "resources")["items"]["pattern"].as<std::string>(), "^[^/]*$");
  EXPECT_EQ(At(rule, "resources")["items"]["minLength"].as<int>(), 1);
  EXPECT_TRUE(At(rule, "apiGroups"));
  EXPECT_TRUE(At(rule, "apiVersions"));
}

TEST(CrdsTest, WatchRule) {
  YAML::Node crd = Load("watchrules");
  YAML::Node spec = At(Schema(crd), "spec");
  EXPECT_EQ(Strings(spec["required"]), (std::set<std::string>{"rules", "targetRef"}));
  EXPECT_EQ(At(spec, "rules")["minItems"].as<int>(), 1);
  EXPECT_EQ(Strings(At(spec, "targetRef.kind")["enum"]), (std::set<std::string>{"GitTarget"}));
  EXPECT_FALSE(At(spec, "targetRef.namespace"));
  CheckResourceRule(At(spec, "rules[]"));
  EXPECT_FALSE(At(spec, "rules[].scope"));
  EXPECT_EQ(At(Schema(crd), "status.streams.pendingSample")["maxItems"].as<int>(), 5);
  EXPECT_EQ(Strings(At(Schema(crd), "status.streams")["required"]),
            (std::set<std::string>{"blocked", "ready", "replaying", "total"}));
  EXPECT_EQ(At(spec, "targetRef.group")["default"].as<std::string>(), "configbutler.ai");
  EXPECT_EQ(Strings(At(spec, "targetRef.group")["enum"]),
            (std::set<std::string>{"configbutler.ai"}));
  EXPECT_EQ(At(spec, "targetRef.kind")["default"].as<std::string>(), "GitTarget");
  EXPECT_FALSE(At(Schema(crd), "status.streams.total")["minimum"]);
  for (const char* plural : {"watchrules", "clusterwatchrules"}) {
    SCOPED_TRACE(plural);
    EXPECT_EQ(ColumnNames(Load(plural), false),
              (std::vector<std::string>{"Target", "Ready", "Reason", "Streams", "Age"}));
    EXPECT_EQ(ColumnNames(Load(plural), true),
              (std::vector<std::string>{"GitTargetReady", "StreamsRunning"}));
  }
}

TEST(CrdsTest, ClusterWatchRule) {
  YAML::Node crd = Load("clusterwatchrules");
  YAML::Node spec = At(Schema(crd), "spec");
  EXPECT_EQ(Strings(At(spec, "targetRef")["required"]),
            (std::set<std::string>{"name", "namespace"}));
  CheckResourceRule(At(spec, "rules[]"));
  // The reference states the enum twice, as an allOf of two equal enums.
  YAML::Node scope = At(spec, "rules[].scope");
  EXPECT_EQ(scope["type"].as<std::string>(), "string");
  ASSERT_EQ(scope["allOf"].size(), 2u);
  for (const auto& part : scope["allOf"]) {
    EXPECT_EQ(Strings(part["enum"]), (std::set<std::string>{"Cluster", "Namespaced"}));
  }
  EXPECT_EQ(Strings(At(spec, "targetRef.group")["enum"]),
            (std::set<std::string>{"configbutler.ai"}));
  EXPECT_TRUE(Strings(At(spec, "rules[]")["required"]).count("scope"));
}

TEST(CrdsTest, CommitRequest) {
  YAML::Node crd = Load("commitrequests");
  YAML::Node spec = At(Schema(crd), "spec");
  EXPECT_EQ(CelRules(spec), (std::vector<std::string>{"self == oldSelf"}));
  EXPECT_EQ(CelMessages(spec),
            (std::vector<std::string>{"CommitRequest spec is immutable after creation"}));
  EXPECT_EQ(Strings(At(spec, "targetRef.group")["enum"]),
            (std::set<std::string>{"configbutler.ai"}));
  EXPECT_EQ(At(spec, "message")["minLength"].as<int>(), 1);
  EXPECT_EQ(At(spec, "message")["maxLength"].as<int>(), 1024);
  // The pattern is regex text (backslash escapes), not raw control characters.
  EXPECT_EQ(At(spec, "message")["pattern"].as<std::string>(), "^[^\\x00-\\x09\\x0B-\\x1F\\x7F]*$");
  EXPECT_EQ(At(spec, "closeDelaySeconds")["minimum"].as<int>(), 0);
  EXPECT_EQ(At(spec, "closeDelaySeconds")["maximum"].as<int>(), 300);
  for (const char* field : {"branch", "sha"}) {
    EXPECT_TRUE(At(Schema(crd), std::string("status.") + field)) << field;
  }
  EXPECT_EQ(ColumnNames(crd, false),
            (std::vector<std::string>{"GitTarget", "Ready", "Reason", "SHA", "Age"}));
  EXPECT_EQ(ColumnNames(crd, true),
            (std::vector<std::string>{"AuthorAttributed", "Pushed", "Branch"}));
}

}  // namespace
