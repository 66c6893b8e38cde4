// Installs the CRDs on the project's test API server (tools/kube-sim) with the real kubectl,
// creates one object of each kind, then runs the catalog's domain logic over what the server
// serves: discovery -> catalog -> registry, rules read back from the server -> tables -> claims.

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "libs/kube/config.h"
#include "libs/kube/discovery.h"
#include "libs/kube/httplib_transport.h"
#include "libs/kube/rest_client.h"
#include "libs/rules/claims.h"
#include "libs/rules/table_store.h"
#include "libs/typeset/catalog.h"
#include "libs/typeset/kube_scan.h"
#include "libs/typeset/registry.h"
#include "nlohmann/json.hpp"
#include "tests/fixtures/process.h"
#include "tests/fixtures/temp_dir.h"
#include "tools/kube-sim/kube_sim.h"

namespace reverser {
namespace {

using nlohmann::json;

const std::vector<std::string> kCrdFiles = {
    "deploy/crds/configbutler.ai_gitproviders.yaml",
    "deploy/crds/configbutler.ai_gittargets.yaml",
    "deploy/crds/configbutler.ai_watchrules.yaml",
    "deploy/crds/configbutler.ai_clusterwatchrules.yaml",
    "deploy/crds/configbutler.ai_commitrequests.yaml",
};

constexpr char kObjects[] = R"(apiVersion: v1
kind: Namespace
metadata:
  name: team-a
---
apiVersion: configbutler.ai/v1alpha3
kind: GitProvider
metadata:
  name: repo
  namespace: team-a
spec:
  url: https://git.example.com/org/repo.git
  allowedBranches: ["main", "release/*"]
  secretRef:
    name: git-credentials
---
apiVersion: configbutler.ai/v1alpha3
kind: GitTarget
metadata:
  name: mirror
  namespace: team-a
spec:
  providerRef:
    name: repo
  branch: main
  path: clusters/dev
---
apiVersion: configbutler.ai/v1alpha3
kind: WatchRule
metadata:
  name: configs
  namespace: team-a
spec:
  targetRef:
    name: mirror
  rules:
  - operations: ["CREATE", "UPDATE"]
    apiGroups: [""]
    resources: ["configmaps"]
---
apiVersion: configbutler.ai/v1alpha3
kind: ClusterWatchRule
metadata:
  name: all-targets
spec:
  targetRef:
    name: mirror
    namespace: team-a
  rules:
  - apiGroups: ["configbutler.ai"]
    resources: ["gittargets"]
    scope: Namespaced
  - resources: ["namespaces"]
    scope: Cluster
---
apiVersion: configbutler.ai/v1alpha3
kind: CommitRequest
metadata:
  name: release-notes
  namespace: team-a
spec:
  targetRef:
    name: mirror
  message: "Release 1.2\n\nNotes."
  closeDelaySeconds: 5
)";

class CrdsInstallTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto sim = kubesim::KubeSim::Start({});
    ASSERT_TRUE(sim.ok()) << sim.status();
    sim_ = std::move(*sim);
    kubeconfig_ = tmp_.path() + "/kubeconfig";
    ASSERT_TRUE(sim_->WriteKubeconfig(kubeconfig_).ok());
  }
  void TearDown() override {
    client_.reset();
    if (sim_) sim_->Stop();
  }

  testing::CommandResult Kubectl(std::vector<std::string> args,
                                 const std::string& stdin_data = "") {
    std::vector<std::string> argv = {"kubectl", "--kubeconfig", kubeconfig_};
    argv.insert(argv.end(), args.begin(), args.end());
    auto result = testing::RunCommand(argv, stdin_data);
    EXPECT_TRUE(result.ok()) << result.status();
    return result.ok() ? *result : testing::CommandResult{};
  }
  json Get(const std::string& path) {
    auto r = sim_->Call("GET", path);
    EXPECT_EQ(r.status, 200) << path << ": " << r.body;
    return json::parse(r.body, nullptr, false);
  }
  kube::RestClient& Client() {
    if (!client_) {
      auto config = kube::ParseKubeconfig(sim_->Kubeconfig(), "");
      EXPECT_TRUE(config.ok()) << config.status();
      auto client = kube::NewHttplibRestClient(*config);
      EXPECT_TRUE(client.ok()) << client.status();
      client_ = *client;
    }
    return *client_;
  }
  void InstallCrds() {
    std::vector<std::string> args = {"apply"};
    for (const auto& f : kCrdFiles) {
      args.push_back("-f");
      args.push_back(f);
    }
    testing::CommandResult applied = Kubectl(args);
    ASSERT_EQ(applied.exit_code, 0) << applied.out << applied.err;
    for (const char* name :
         {"gitproviders", "gittargets", "watchrules", "clusterwatchrules", "commitrequests"}) {
      EXPECT_TRUE(
          absl::StrContains(applied.out, std::string("customresourcedefinition.apiextensions"
                                                     ".k8s.io/") +
                                             name + ".configbutler.ai created"))
          << applied.out;
    }
  }

  testing::ScopedTempDir tmp_{"crds-install"};
  std::string kubeconfig_;
  std::unique_ptr<kubesim::KubeSim> sim_;
  std::shared_ptr<kube::RestClient> client_;
};

TEST_F(CrdsInstallTest, KubectlInstallsTheCrdsAndServesTheirKinds) {
  InstallCrds();
  testing::CommandResult resources =
      Kubectl({"api-resources", "--api-group=configbutler.ai", "--no-headers"});
  ASSERT_EQ(resources.exit_code, 0) << resources.err;
  std::vector<std::string> lines = absl::StrSplit(resources.out, '\n', absl::SkipEmpty());
  EXPECT_EQ(lines.size(), 5u) << resources.out;
  for (const std::string& line : lines) {
    std::vector<std::string> cols = absl::StrSplit(line, ' ', absl::SkipEmpty());
    ASSERT_GE(cols.size(), 4u) << line;
    EXPECT_EQ(cols[1], "configbutler.ai/v1alpha3") << line;
    EXPECT_EQ(cols[2], cols[0] == "clusterwatchrules" ? "false" : "true") << line;
  }

  testing::CommandResult created = Kubectl({"apply", "-f", "-"}, kObjects);
  ASSERT_EQ(created.exit_code, 0) << created.out << created.err;
  EXPECT_TRUE(absl::StrContains(created.out, "gittarget.configbutler.ai/mirror created"))
      << created.out;
  testing::CommandResult listed = Kubectl({"get", "watchrules", "-n", "team-a", "-o", "name"});
  EXPECT_EQ(listed.out, "watchrule.configbutler.ai/configs\n");
}

// The reference's quickstart shape: a Secret-kind encryption secretRef, generated age
// recipients, a commit window. kubectl validates strictly by default (server-side
// fieldValidation=Strict), so any field our schema lacked would fail the apply.
constexpr char kQuickstart[] = R"(apiVersion: v1
kind: Namespace
metadata:
  name: quickstart
---
apiVersion: configbutler.ai/v1alpha3
kind: GitProvider
metadata:
  name: example-provider
  namespace: quickstart
spec:
  url: git@github.com:owner/repo.git
  allowedBranches: ["*"]
  secretRef:
    name: git-creds
    kind: Secret
  push:
    commitWindow: 5s
---
apiVersion: configbutler.ai/v1alpha3
kind: GitTarget
metadata:
  name: example-target
  namespace: quickstart
spec:
  providerRef:
    kind: GitProvider
    name: example-provider
  branch: main
  path: live-cluster
  encryption:
    provider: sops
    secretRef:
      name: sops-age-key
      kind: Secret
    age:
      enabled: true
      recipients:
        generateWhenMissing: true
---
apiVersion: configbutler.ai/v1alpha3
kind: WatchRule
metadata:
  name: example-rule
  namespace: quickstart
spec:
  targetRef:
    name: example-target
  rules:
  - operations: ["CREATE", "UPDATE", "DELETE"]
    apiGroups: [""]
    apiVersions: ["v1"]
    resources: ["configmaps"]
)";

TEST_F(CrdsInstallTest, QuickstartManifestsPassStrictValidationAndGetDefaults) {
  InstallCrds();
  testing::CommandResult applied = Kubectl({"apply", "-f", "-"}, kQuickstart);
  ASSERT_EQ(applied.exit_code, 0) << applied.out << applied.err;
  EXPECT_FALSE(absl::StrContains(applied.err, "unknown field")) << applied.err;

  json target =
      Get("/apis/configbutler.ai/v1alpha3/namespaces/quickstart/gittargets/example-target");
  EXPECT_EQ(target["spec"]["providerRef"]["group"], "configbutler.ai");
  EXPECT_EQ(target["spec"]["encryption"]["secretRef"],
            json({{"group", ""}, {"kind", "Secret"}, {"name", "sops-age-key"}}));
  EXPECT_EQ(target["spec"]["encryption"]["age"]["recipients"]["extractFromSecret"], false);
  json rule = Get("/apis/configbutler.ai/v1alpha3/namespaces/quickstart/watchrules/example-rule");
  EXPECT_EQ(
      rule["spec"]["targetRef"],
      json({{"group", "configbutler.ai"}, {"kind", "GitTarget"}, {"name", "example-target"}}));
  // A provider without a commit window keeps it absent (the reference's schema has no default;
  // the catalog applies 5s).
  ASSERT_EQ(Kubectl({"apply", "-f", "-"}, R"(apiVersion: configbutler.ai/v1alpha3
kind: GitProvider
metadata:
  name: no-window
  namespace: quickstart
spec:
  url: https://git.example.com/org/repo.git
  allowedBranches: ["main"]
)")
                .exit_code,
            0);
  json provider =
      Get("/apis/configbutler.ai/v1alpha3/namespaces/quickstart/gitproviders/no-window");
  EXPECT_FALSE(provider["spec"].contains("push")) << provider.dump();
  EXPECT_EQ(provider["spec"]["commit"], nullptr);

  // Strictness is real: a misspelt field is refused, naming it.
  testing::CommandResult typo =
      Kubectl({"apply", "-f", "-"}, R"(apiVersion: configbutler.ai/v1alpha3
kind: GitTarget
metadata:
  name: typo
  namespace: quickstart
spec:
  providerRef:
    name: example-provider
  branch: main
  path: typo
  encryption:
    secretRef:
      name: sops-age-key
      knd: Secret
)");
  EXPECT_NE(typo.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(typo.err,
                                "strict decoding error: unknown field "
                                "\"spec.encryption.secretRef.knd\""))
      << typo.err;
}

// The schemas reach kubectl explain (kube-sim publishes them in /openapi/v3, as a server does),
// with reverser's own descriptions.
TEST_F(CrdsInstallTest, KubectlExplainShowsTheFields) {
  InstallCrds();
  testing::CommandResult ref = Kubectl({"explain", "gittarget.spec.encryption.secretRef"});
  ASSERT_EQ(ref.exit_code, 0) << ref.err;
  EXPECT_TRUE(absl::StrContains(ref.out, "KIND:       GitTarget")) << ref.out;
  EXPECT_TRUE(absl::StrContains(ref.out, "Secret holding age identities")) << ref.out;
  EXPECT_TRUE(absl::StrContains(ref.out, "  kind\t<string>\n  enum: Secret\n")) << ref.out;
  EXPECT_TRUE(absl::StrContains(ref.out, "  name\t<string> -required-\n")) << ref.out;
  testing::CommandResult window = Kubectl({"explain", "gitprovider.spec.push.commitWindow"});
  ASSERT_EQ(window.exit_code, 0) << window.err;
  EXPECT_TRUE(absl::StrContains(window.out, "When\n    unset, 5s.")) << window.out;
}

// The reference's validations, as kubectl users see them.
TEST_F(CrdsInstallTest, ReferenceValidationsRefuseWhatTheyRefuse) {
  InstallCrds();
  ASSERT_EQ(Kubectl({"apply", "-f", "-"}, kObjects).exit_code, 0);
  auto refused = [&](const std::string& manifest, const std::string& message) {
    testing::CommandResult r = Kubectl({"apply", "-f", "-"}, manifest);
    EXPECT_NE(r.exit_code, 0) << manifest;
    EXPECT_TRUE(absl::StrContains(r.err, message)) << "want: " << message << "\ngot: " << r.err;
  };
  // A foreign targetRef.group (WatchRule, ClusterWatchRule, CommitRequest).
  refused(R"(apiVersion: configbutler.ai/v1alpha3
kind: WatchRule
metadata:
  name: foreign
  namespace: team-a
spec:
  targetRef:
    group: example.com
    name: mirror
  rules:
  - resources: ["configmaps"]
)",
          "spec.targetRef.group: Unsupported value: \"example.com\": supported values: "
          "\"configbutler.ai\"");
  refused(R"(apiVersion: configbutler.ai/v1alpha3
kind: CommitRequest
metadata:
  name: foreign
  namespace: team-a
spec:
  targetRef:
    group: example.com
    name: mirror
)",
          "spec.targetRef.group: Unsupported value: \"example.com\"");
  // Empty resource names and branch patterns.
  refused(R"(apiVersion: configbutler.ai/v1alpha3
kind: WatchRule
metadata:
  name: empty
  namespace: team-a
spec:
  targetRef:
    name: mirror
  rules:
  - resources: [""]
)",
          "spec.rules[0].resources[0]: Invalid value: \"\": spec.rules[0].resources[0] in body "
          "should be at least 1 chars long");
  refused(R"(apiVersion: configbutler.ai/v1alpha3
kind: GitProvider
metadata:
  name: empty-branch
  namespace: team-a
spec:
  url: https://git.example.com/org/repo.git
  allowedBranches: [""]
)",
          "spec.allowedBranches[0] in body should be at least 1 chars long");
  refused(R"(apiVersion: configbutler.ai/v1alpha3
kind: ClusterWatchRule
metadata:
  name: bad-scope
spec:
  targetRef:
    name: mirror
    namespace: team-a
  rules:
  - resources: ["namespaces"]
    scope: Everywhere
)",
          "spec.rules[0].scope: Unsupported value: \"Everywhere\": supported values: "
          "\"Cluster\", \"Namespaced\"");

  // Immutability, with the reference's messages.
  auto patch_refused = [&](const std::string& resource, const std::string& patch,
                           const std::string& message) {
    testing::CommandResult r =
        Kubectl({"patch", resource, "-n", "team-a", "--type=merge", "-p", patch});
    EXPECT_NE(r.exit_code, 0) << resource << " " << patch;
    EXPECT_TRUE(absl::StrContains(r.err, message)) << "want: " << message << "\ngot: " << r.err;
  };
  patch_refused("gittarget/mirror", R"({"spec":{"branch":"release/1"}})",
                "spec: Invalid value: \"object\": spec.branch is immutable; delete and recreate "
                "the GitTarget to change its destination");
  patch_refused("gittarget/mirror", R"({"spec":{"providerRef":{"name":"other"}}})",
                "spec.providerRef is immutable; delete and recreate the GitTarget to change its "
                "destination");
  patch_refused("gitprovider/repo", R"({"spec":{"url":"https://git.example.com/org/other.git"}})",
                "spec.url is immutable; delete and recreate the GitProvider to point at a "
                "different repository");
  patch_refused("commitrequest/release-notes", R"({"spec":{"closeDelaySeconds":6}})",
                "CommitRequest spec is immutable after creation");
  // Mutable fields still change.
  testing::CommandResult placement =
      Kubectl({"patch", "gittarget/mirror", "-n", "team-a", "--type=merge", "-p",
               R"({"spec":{"placement":{"default":"{namespace}/{name}.yaml"}}})"});
  EXPECT_EQ(placement.exit_code, 0) << placement.err;
}

TEST_F(CrdsInstallTest, CatalogLogicOverTheServedApi) {
  InstallCrds();
  testing::CommandResult created = Kubectl({"apply", "-f", "-"}, kObjects);
  ASSERT_EQ(created.exit_code, 0) << created.out << created.err;

  // Discovery of the live server, with CRD evidence from the CRD list.
  auto discovered = kube::Discover(Client());
  ASSERT_TRUE(discovered.ok()) << discovered.status();
  json crds = Get("/apis/apiextensions.k8s.io/v1/customresourcedefinitions");
  typeset::DiscoveryScan scan =
      typeset::ScanFromDiscovery(*discovered, typeset::CrdGroupResources(crds));
  core::FakeClock clock;
  typeset::ApiResourceCatalog catalog;
  typeset::Registry registry(clock);
  registry.UpdateFromScan(catalog.Update(scan));
  clock.Advance(typeset::Registry::kSettleWindow);
  registry.Tick();

  auto gittargets = registry.ByGVR({"configbutler.ai", "v1alpha3", "gittargets"});
  ASSERT_TRUE(gittargets.has_value());
  EXPECT_EQ(gittargets->verdict(), typeset::Verdict::kFollowable)
      << gittargets->followability.summary;
  EXPECT_EQ(gittargets->origin, typeset::Origin::kCrd);
  EXPECT_EQ(gittargets->gvk.kind, "GitTarget");
  EXPECT_EQ(gittargets->scope, core::Scope::kNamespaced);
  auto cwr = registry.ByGVK({"configbutler.ai", "v1alpha3", "ClusterWatchRule"});
  ASSERT_TRUE(cwr.has_value());
  EXPECT_EQ(cwr->scope, core::Scope::kCluster);

  // The rules as the server returns them (no defaults filled in) parse and resolve.
  auto rule =
      rules::ParseWatchRule(Get("/apis/configbutler.ai/v1alpha3/namespaces/team-a/"
                                "watchrules/configs"));
  ASSERT_TRUE(rule.ok()) << rule.status();
  EXPECT_FALSE(rule->uid.empty());
  auto cluster_rule = rules::ParseClusterWatchRule(
      Get("/apis/configbutler.ai/v1alpha3/clusterwatchrules/all-targets"));
  ASSERT_TRUE(cluster_rule.ok()) << cluster_rule.status();

  rules::TableStore tables;
  json target = Get("/apis/configbutler.ai/v1alpha3/namespaces/team-a/gittargets/mirror");
  tables.UpsertTarget({{"team-a", "mirror"},
                       target["metadata"].value("uid", ""),
                       {"team-a", "repo", "main", "clusters/dev"}});
  tables.UpsertRule(*rule);
  tables.UpsertRule(*cluster_rule);
  rules::RefreshResult refreshed = tables.Refresh(rules::RegistrySource(registry));
  ASSERT_EQ(refreshed.changed.size(), 1u);
  const rules::WatchedTypeTable* table = tables.Table({"team-a", "mirror"});
  ASSERT_NE(table, nullptr);
  EXPECT_TRUE(table->unresolved.empty()) << table->unresolved[0].message;
  EXPECT_EQ(table->OperationsFor({"", "v1", "configmaps"}, "team-a").ToString(), "CREATE,UPDATE");

  rules::ClaimTracker claims;
  EXPECT_TRUE(claims.Update(tables.Tables()));
  std::vector<std::string> names;
  for (const auto& c : claims.claims())
    names.push_back(c.gvr.ToString() + " " + c.scope.KeySegment());
  EXPECT_EQ(names, (std::vector<std::string>{"v1/configmaps ns:team-a", "v1/namespaces cluster",
                                             "configbutler.ai/v1alpha3/gittargets cluster"}));
}

}  // namespace
}  // namespace reverser
