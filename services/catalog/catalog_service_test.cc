// The catalog service against an in-process kube-sim: the five CRDs installed from
// deploy/crds, GitProvider / GitTarget / WatchRule objects created through the API, claims and
// tables read over real gRPC streams, status conditions read back from the API server.
// Time is a FakeClock: the test advances it and asks the service to tick, so settle windows
// and removal grace are deterministic.

#include "services/catalog/catalog_service.h"

#include <grpcpp/grpcpp.h>
#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>
#include <thread>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/civil_time.h"
#include "gtest/gtest.h"
#include "libs/core/clock.h"
#include "libs/git/ssh_signing.h"
#include "libs/kube/api_error.h"
#include "libs/kube/httplib_transport.h"
#include "libs/kube/rest_client.h"
#include "libs/kube/secret_data.h"
#include "libs/runtime/service_host.h"
#include "libs/sops/age_key_secret.h"
#include "proto/reverser/v1/catalog.grpc.pb.h"
#include "services/catalog/attribution_rules.h"
#include "services/catalog/conditions.h"
#include "tests/fixtures/process.h"
#include "tests/fixtures/temp_dir.h"
#include "tools/kube-sim/kube_sim.h"

namespace reverser::catalog {
namespace {

using nlohmann::json;
using reverser::testing::WaitFor;

constexpr absl::Duration kWait = absl::Seconds(20);
const core::GroupVersionResource kCrds{"apiextensions.k8s.io", "v1", "customresourcedefinitions"};
const core::GroupVersionResource kNamespaces{"", "v1", "namespaces"};

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Reads a server stream on its own thread and keeps every message.
template <typename Msg>
class StreamRecorder {
 public:
  template <typename Open>
  explicit StreamRecorder(Open open) {
    thread_ = std::thread([this, open] {
      Msg msg;
      auto reader = open(&context_);
      while (reader->Read(&msg)) {
        std::lock_guard lock(mu_);
        messages_.push_back(msg);
      }
      status_ = reader->Finish();
    });
  }
  ~StreamRecorder() {
    context_.TryCancel();
    thread_.join();
  }
  std::vector<Msg> messages() const {
    std::lock_guard lock(mu_);
    return messages_;
  }
  std::optional<Msg> last() const {
    std::lock_guard lock(mu_);
    if (messages_.empty()) return std::nullopt;
    return messages_.back();
  }

 private:
  grpc::ClientContext context_;
  mutable std::mutex mu_;
  std::vector<Msg> messages_;
  grpc::Status status_;
  std::thread thread_;
};

bool HasClaim(const reverser::v1::ClaimSet& set, const std::string& group,
              const std::string& resource, const std::string& ns) {
  for (const auto& c : set.claims()) {
    if (c.type().gvr().group() == group && c.type().gvr().resource() == resource &&
        (ns.empty() ? c.scope().has_cluster() : c.scope().namespace_() == ns)) {
      return true;
    }
  }
  return false;
}

class CatalogServiceTest : public ::testing::Test {
 protected:
  // The API server generation to simulate.
  virtual kubesim::Profile profile() const { return kubesim::Profile::kModern; }
  // Options of a variant, and objects it needs before the service starts.
  virtual void Configure(CatalogServiceOptions& /*options*/) {}

  void SetUp() override {
    kubesim::KubeSimOptions sim_options;
    sim_options.profile = profile();
    auto sim = kubesim::KubeSim::Start(sim_options);
    ASSERT_TRUE(sim.ok()) << sim.status();
    sim_ = *std::move(sim);
    client_ = MakeClient();
    for (const char* plural :
         {"gitproviders", "gittargets", "watchrules", "clusterwatchrules", "commitrequests"}) {
      auto r = sim_->Call("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                          ReadText(absl::StrCat("deploy/crds/configbutler.ai_", plural, ".yaml")),
                          "application/yaml");
      ASSERT_EQ(r.status, 201) << r.body;
    }
    for (const char* ns : {"team-a", "team-b"}) {
      ASSERT_TRUE(client_->Create(kNamespaces, "", {{"metadata", {{"name", ns}}}}).ok());
    }

    runtime::ServiceHostOptions host_options;
    host_options.service = "catalog";
    host_options.listen_address = "127.0.0.1";
    host_options.grpc_port = 0;
    host_options.http_port = 0;
    host_options.grpc_security.insecure = true;  // in-process: the test's own stubs
    host_ = std::make_unique<runtime::ServiceHost>(host_options);
    CatalogServiceOptions options;
    options.client = MakeClient();
    options.clock = &clock_;
    options.state.generation_epoch = 1000;
    options.discovery_period = absl::Hours(1);  // passes come from CRD changes and Rescan
    Configure(options);
    service_ = std::make_unique<CatalogService>(*host_, options);
    service_->Register();
    ASSERT_TRUE(host_->Start().ok());
    service_->Start();
    auto channel = grpc::CreateChannel(absl::StrCat("127.0.0.1:", host_->grpc_port()),
                                       grpc::InsecureChannelCredentials());
    catalog_ = reverser::v1::Catalog::NewStub(channel);
    admin_ = reverser::v1::CatalogAdmin::NewStub(channel);
    // The catalog publishes once the startup settle window has passed.
    Settle();
  }

  void TearDown() override {
    if (service_) service_->Stop();
    if (host_) host_->Shutdown();
    // Drop the clients' keep-alive connections before the server waits for them.
    service_.reset();
    client_.reset();
    if (sim_) sim_->Stop();
  }

  std::shared_ptr<kube::RestClient> MakeClient(const std::string& token = "") {
    kube::ClusterConfig config;
    config.server = sim_->url();
    config.token = token;
    auto transport = kube::HttplibTransport::Create(config);
    EXPECT_TRUE(transport.ok());
    return std::make_shared<kube::RestClient>(
        std::shared_ptr<kube::HttpTransport>(std::move(*transport)));
  }

  json Create(ObjectKind kind, json object) {
    object["apiVersion"] = "configbutler.ai/v1alpha3";
    object["kind"] = std::string(KindName(kind));
    auto created =
        client_->Create(GvrOf(kind), StringAt(object, {"metadata", "namespace"}), object);
    EXPECT_TRUE(created.ok()) << created.status();
    return created.ok() ? *created : json();
  }

  void CreateProvider(const std::string& ns, const std::string& name, json spec = {}) {
    if (!spec.contains("url")) spec["url"] = absl::StrCat("file://", repo_.path());
    if (!spec.contains("allowedBranches")) spec["allowedBranches"] = {"main", "release-*"};
    Create(ObjectKind::kGitProvider,
           {{"metadata", {{"namespace", ns}, {"name", name}}}, {"spec", spec}});
  }
  void CreateTarget(const std::string& ns, const std::string& name, const std::string& provider,
                    const std::string& branch, const std::string& path) {
    Create(ObjectKind::kGitTarget,
           {{"metadata", {{"namespace", ns}, {"name", name}}},
            {"spec", {{"providerRef", {{"name", provider}}}, {"branch", branch}, {"path", path}}}});
  }
  void CreateWatchRule(const std::string& ns, const std::string& name, const std::string& target,
                       json rules) {
    Create(ObjectKind::kWatchRule,
           {{"metadata", {{"namespace", ns}, {"name", name}}},
            {"spec", {{"targetRef", {{"name", target}}}, {"rules", rules}}}});
  }

  json Get(ObjectKind kind, const std::string& ns, const std::string& name) {
    auto got = client_->Get(GvrOf(kind), ns, name);
    return got.ok() ? *got : json();
  }

  // Waits until the object has condition `type` with `status` and `reason`.
  bool WaitForCondition(ObjectKind kind, const std::string& ns, const std::string& name,
                        const std::string& type, const std::string& status,
                        const std::string& reason) {
    return WaitFor(
        [&] {
          json object = Get(kind, ns, name);
          const json* c = FindCondition(NodeAt(object, {"status", "conditions"}), type);
          return c != nullptr && c->value("status", "") == status &&
                 c->value("reason", "") == reason;
        },
        kWait);
  }

  std::string ConditionMessage(ObjectKind kind, const std::string& ns, const std::string& name,
                               const std::string& type) {
    json object = Get(kind, ns, name);
    const json* c = FindCondition(NodeAt(object, {"status", "conditions"}), type);
    return c == nullptr ? "" : c->value("message", "");
  }

  std::optional<reverser::v1::TypeRecord> GetType(const std::string& group,
                                                  const std::string& version,
                                                  const std::string& resource) {
    grpc::ClientContext context;
    reverser::v1::GetTypeRequest request;
    request.mutable_gvr()->set_group(group);
    request.mutable_gvr()->set_version(version);
    request.mutable_gvr()->set_resource(resource);
    reverser::v1::TypeRecord record;
    if (!catalog_->GetType(&context, request, &record).ok()) return std::nullopt;
    return record;
  }

  bool WaitForVerdict(const std::string& group, const std::string& version,
                      const std::string& resource, reverser::v1::FollowVerdict verdict) {
    return WaitFor(
        [&] {
          auto record = GetType(group, version, resource);
          return record && record->verdict() == verdict;
        },
        kWait);
  }

  std::unique_ptr<StreamRecorder<reverser::v1::ClaimSet>> WatchClaims(uint64_t known = 0) {
    return std::make_unique<StreamRecorder<reverser::v1::ClaimSet>>(
        [this, known](grpc::ClientContext* context) {
          reverser::v1::WatchClaimsRequest request;
          request.set_known_generation(known);
          request.set_subscriber("test");
          return catalog_->WatchClaims(context, request);
        });
  }
  std::unique_ptr<StreamRecorder<reverser::v1::TableUpdate>> WatchTables(uint64_t known = 0) {
    return std::make_unique<StreamRecorder<reverser::v1::TableUpdate>>(
        [this, known](grpc::ClientContext* context) {
          reverser::v1::WatchTablesRequest request;
          request.set_known_generation(known);
          return catalog_->WatchTables(context, request);
        });
  }

  // Settles newly discovered types: past the settle window, then a tick.
  void Settle() {
    // The first discovery pass must have been applied, or there is nothing to settle yet.
    ASSERT_TRUE(WaitFor([&] { return ComponentReady("discovery"); }, kWait));
    clock_.Advance(typeset::Registry::kSettleWindow + absl::Seconds(1));
    service_->Tick();
  }

  bool ComponentReady(const std::string& name) {
    reverser::v1::ServiceStatus status = host_->Status();
    for (const auto& c : status.components()) {
      if (c.name() == name) return c.ready();
    }
    return false;
  }

  core::FakeClock clock_;
  reverser::testing::ScopedTempDir repo_{"remote"};
  std::unique_ptr<kubesim::KubeSim> sim_;
  std::shared_ptr<kube::RestClient> client_;
  std::unique_ptr<runtime::ServiceHost> host_;
  std::unique_ptr<CatalogService> service_;
  std::unique_ptr<reverser::v1::Catalog::Stub> catalog_;
  std::unique_ptr<reverser::v1::CatalogAdmin::Stub> admin_;
};

json WidgetCrd() {
  return {{"apiVersion", "apiextensions.k8s.io/v1"},
          {"kind", "CustomResourceDefinition"},
          {"metadata", {{"name", "widgets.example.com"}}},
          {"spec",
           {{"group", "example.com"},
            {"scope", "Namespaced"},
            {"names",
             {{"plural", "widgets"},
              {"singular", "widget"},
              {"kind", "Widget"},
              {"listKind", "WidgetList"}}},
            {"versions",
             {{{"name", "v1"},
               {"served", true},
               {"storage", true},
               {"schema", {{"openAPIV3Schema", {{"type", "object"}}}}}}}}}}};
}

TEST_F(CatalogServiceTest, ClaimsAndTablesFollowRulesOverGrpc) {
  auto claims = WatchClaims();
  auto tables = WatchTables();
  CreateProvider("team-a", "repo");
  CreateTarget("team-a", "app", "repo", "main", "clusters/a");
  CreateWatchRule("team-a", "cm", "app",
                  {{{"apiGroups", {""}},
                    {"apiVersions", {"v1"}},
                    {"resources", {"configmaps"}},
                    {"operations", {"CREATE", "UPDATE"}}}});

  ASSERT_TRUE(WaitFor(
      [&] { return claims->last() && HasClaim(*claims->last(), "", "configmaps", "team-a"); },
      kWait));
  ASSERT_TRUE(WaitFor(
      [&] {
        auto t = tables->last();
        return t && !tables->messages().empty();
      },
      kWait));
  // Rebuild the table view from the stream and check the target's table and config.
  std::map<std::string, reverser::v1::WatchedTypeTable> view;
  ASSERT_TRUE(WaitFor(
      [&] {
        view.clear();
        for (const auto& update : tables->messages()) {
          if (update.full()) view.clear();
          for (const auto& t : update.upserted()) view[t.target().name()] = t;
          for (const auto& r : update.removed()) view.erase(r.name());
        }
        return view.count("app") && view["app"].types_size() == 1;
      },
      kWait));
  const auto& table = view["app"];
  EXPECT_EQ(table.types(0).type().gvr().resource(), "configmaps");
  ASSERT_TRUE(table.types(0).namespaces().count("team-a"));
  EXPECT_EQ(table.types(0).namespaces().at("team-a").operations_size(), 2);
  EXPECT_EQ(table.config().remote_url(), absl::StrCat("file://", repo_.path()));
  EXPECT_EQ(table.config().destination().path(), "clusters/a");
  EXPECT_EQ(table.config().committer_name(), "GitOps Reverser");
  EXPECT_EQ(table.config().commit_window_ms(), 5000);
  EXPECT_EQ(table.config().event_template(),
            "[{{.Operation}}] {{.APIVersion}}/{{.Resource}}/{{.Name}}");
  EXPECT_FALSE(table.plan_hash().empty());
  EXPECT_TRUE(tables->messages().front().full());

  // A late subscriber that already holds the current generation gets nothing until a change;
  // one holding an older generation gets the current set at once.
  uint64_t current = claims->last()->generation();
  auto late = WatchClaims(current);
  auto fresh = WatchClaims(current - 1);
  ASSERT_TRUE(WaitFor([&] { return fresh->last().has_value(); }, kWait));
  EXPECT_EQ(fresh->last()->generation(), current);

  // A second rule on another target adds a claim; removing the rule removes it again.
  CreateTarget("team-a", "other", "repo", "main", "clusters/b");
  CreateWatchRule("team-a", "svc", "other", {{{"resources", {"services"}}}});
  Settle();  // version-less rules only resolve settled (activated) types
  ASSERT_TRUE(
      WaitFor([&] { return claims->last() && HasClaim(*claims->last(), "", "services", "team-a"); },
              kWait));
  ASSERT_TRUE(WaitFor([&] { return late->last().has_value(); }, kWait));
  EXPECT_GT(late->last()->generation(), current);
  ASSERT_TRUE(client_->Delete(GvrOf(ObjectKind::kWatchRule), "team-a", "svc").ok());
  ASSERT_TRUE(WaitFor(
      [&] { return claims->last() && !HasClaim(*claims->last(), "", "services", "team-a"); },
      kWait));
  EXPECT_TRUE(HasClaim(*claims->last(), "", "configmaps", "team-a"));

  // Statuses: the rule resolved, the target validated and waiting for stream reports (and the
  // rule with it).
  EXPECT_TRUE(WaitForCondition(ObjectKind::kWatchRule, "team-a", "cm", "ResourcesResolved", kTrue,
                               "Resolved"));
  EXPECT_TRUE(WaitForCondition(ObjectKind::kWatchRule, "team-a", "cm", "Reconciling", kTrue,
                               "InitialReplay"));
  EXPECT_TRUE(WaitForCondition(ObjectKind::kGitTarget, "team-a", "app", "Validated", kTrue, "OK"));
  EXPECT_TRUE(WaitForCondition(ObjectKind::kGitTarget, "team-a", "app", "Reconciling", kTrue,
                               "InitialReplay"));
  EXPECT_TRUE(
      WaitForCondition(ObjectKind::kGitProvider, "team-a", "repo", "Ready", kTrue, "Ready"));

  // A splicer reports all streams ready: the target becomes Ready with status.streams.
  json target = Get(ObjectKind::kGitTarget, "team-a", "app");
  reverser::v1::StreamSummary summary;
  summary.mutable_target()->set_namespace_("team-a");
  summary.mutable_target()->set_name("app");
  summary.mutable_target()->set_uid(UidOf(target));
  summary.set_total(1);
  summary.set_ready(1);
  summary.set_reason("AllStreamsReady");
  summary.set_message("1/1 streams running");
  summary.mutable_last_push_time()->set_seconds(1'700'000'000);
  auto* stream = summary.add_streams();
  *stream->mutable_claim()->mutable_type() = table.types(0).type();
  stream->mutable_claim()->mutable_scope()->set_namespace_("team-a");
  stream->set_state(reverser::v1::STREAM_STATE_STREAMING);
  stream->set_reason("AllStreamsReady");
  grpc::ClientContext context;
  reverser::v1::ReportStreamSummaryResponse response;
  ASSERT_TRUE(catalog_->ReportStreamSummary(&context, summary, &response).ok());
  EXPECT_TRUE(WaitForCondition(ObjectKind::kGitTarget, "team-a", "app", "Ready", kTrue, "Ready"));
  json shown = Get(ObjectKind::kGitTarget, "team-a", "app");
  EXPECT_EQ(StringAt(shown, {"status", "streams", "summary"}), "1/1");
  EXPECT_EQ(StringAt(shown, {"status", "lastPushTime"}), "2023-11-14T22:13:20Z");
  EXPECT_FALSE(StringAt(shown, {"status", "lastReconcileTime"}).empty());
  // The rule's own stream runs and its target is ready: the rule is Ready, with status.streams.
  EXPECT_TRUE(WaitForCondition(ObjectKind::kWatchRule, "team-a", "cm", "Ready", kTrue, "Ready"));
  EXPECT_TRUE(WaitForCondition(ObjectKind::kWatchRule, "team-a", "cm", "StreamsRunning", kTrue,
                               "AllStreamsReady"));
  EXPECT_TRUE(
      WaitForCondition(ObjectKind::kWatchRule, "team-a", "cm", "GitTargetReady", kTrue, "OK"));
  EXPECT_EQ(StringAt(Get(ObjectKind::kWatchRule, "team-a", "cm"), {"status", "streams", "summary"}),
            "1/1");
}

TEST_F(CatalogServiceTest, InstalledCrdBecomesFollowableAfterSettleAndIsClaimed) {
  auto claims = WatchClaims();
  CreateProvider("team-a", "repo");
  CreateTarget("team-a", "app", "repo", "main", "apps");
  CreateWatchRule("team-a", "widgets", "app",
                  {{{"apiGroups", {"example.com"}}, {"resources", {"widgets"}}}});
  ASSERT_TRUE(WaitForCondition(ObjectKind::kWatchRule, "team-a", "widgets", "ResourcesResolved",
                               kFalse, "UnresolvedResources"));

  // The CRD watch triggers a discovery pass: the type is served but not yet settled.
  ASSERT_TRUE(client_->Create(kCrds, "", WidgetCrd()).ok());
  ASSERT_TRUE(WaitFor([&] { return GetType("example.com", "v1", "widgets").has_value(); }, kWait));
  EXPECT_FALSE(claims->last() && HasClaim(*claims->last(), "example.com", "widgets", "team-a"));

  Settle();
  ASSERT_TRUE(WaitFor(
      [&] {
        return claims->last() && HasClaim(*claims->last(), "example.com", "widgets", "team-a");
      },
      kWait));
  auto record = GetType("example.com", "v1", "widgets");
  ASSERT_TRUE(record);
  EXPECT_EQ(record->verdict(), reverser::v1::FOLLOW_VERDICT_FOLLOWABLE);
  EXPECT_EQ(record->origin(), "crd");
  EXPECT_TRUE(WaitForCondition(ObjectKind::kWatchRule, "team-a", "widgets", "ResourcesResolved",
                               kTrue, "Resolved"));

  // Deleting the CRD: retained (still claimed) through the removal grace, then removed.
  ASSERT_TRUE(client_->Delete(kCrds, "", "widgets.example.com").ok());
  ASSERT_TRUE(
      WaitForVerdict("example.com", "v1", "widgets", reverser::v1::FOLLOW_VERDICT_RETAINED));
  EXPECT_TRUE(HasClaim(*claims->last(), "example.com", "widgets", "team-a"));
  clock_.Advance(typeset::Registry::kRemovalGrace + absl::Seconds(1));
  service_->Tick();
  ASSERT_TRUE(WaitFor(
      [&] {
        return claims->last() && !HasClaim(*claims->last(), "example.com", "widgets", "team-a");
      },
      kWait));
  // Refused (absence-expired) until a later scan drops the record altogether.
  auto removed = GetType("example.com", "v1", "widgets");
  if (removed) {
    EXPECT_EQ(removed->verdict(), reverser::v1::FOLLOW_VERDICT_REFUSED);
  }
}

TEST_F(CatalogServiceTest, StatusReasonsForEachFailure) {
  // Providers are probed when they appear (and every 5 minutes): the Secret comes first.
  ASSERT_TRUE(client_
                  ->Create({"", "v1", "secrets"}, "team-a",
                           {{"metadata", {{"name", "creds"}}}, {"data", {{"token", "eA=="}}}})
                  .ok());
  CreateProvider("team-a", "repo");
  CreateProvider("team-a", "bad-secret", {{"secretRef", {{"name", "creds"}}}});
  CreateProvider("team-a", "no-secret", {{"secretRef", {{"name", "absent"}}}});
  CreateProvider("team-a", "gone", {{"url", "file:///nonexistent/repo.git"}});
  CreateTarget("team-a", "no-provider", "missing", "main", "x");
  CreateTarget("team-a", "bad-branch", "repo", "feature/x", "y");
  CreateTarget("team-a", "bad-path", "repo", "main", "../escape");
  CreateTarget("team-a", "first", "repo", "main", "clusters");
  CreateTarget("team-a", "nested", "repo", "main", "clusters/prod");
  // The schema admits a wildcard suffix (a subresource it refuses itself); the parser does not.
  CreateWatchRule("team-a", "invalid", "first", {{{"resources", {"config*"}}}});
  CreateWatchRule("team-a", "orphan", "nobody", {{{"resources", {"configmaps"}}}});

  EXPECT_TRUE(WaitForCondition(ObjectKind::kGitTarget, "team-a", "no-provider", "Validated", kFalse,
                               "ProviderNotFound"));
  EXPECT_TRUE(WaitForCondition(ObjectKind::kGitTarget, "team-a", "no-provider", "Stalled", kTrue,
                               "ValidationFailed"));
  EXPECT_TRUE(WaitForCondition(ObjectKind::kGitTarget, "team-a", "bad-branch", "Validated", kFalse,
                               "BranchNotAllowed"));
  EXPECT_TRUE(WaitForCondition(ObjectKind::kGitTarget, "team-a", "bad-path", "Validated", kFalse,
                               "InvalidPath"));
  EXPECT_TRUE(WaitForCondition(ObjectKind::kGitTarget, "team-a", "nested", "Validated", kFalse,
                               "TargetConflict"));
  EXPECT_TRUE(
      WaitForCondition(ObjectKind::kGitTarget, "team-a", "first", "Validated", kTrue, "OK"));
  EXPECT_TRUE(WaitForCondition(ObjectKind::kWatchRule, "team-a", "invalid", "Stalled", kTrue,
                               "InvalidRule"));
  EXPECT_NE(
      ConditionMessage(ObjectKind::kWatchRule, "team-a", "invalid", "Ready").find("resources"),
      std::string::npos);
  EXPECT_TRUE(WaitForCondition(ObjectKind::kWatchRule, "team-a", "orphan", "GitTargetReady", kFalse,
                               "GitTargetNotFound"));
  EXPECT_TRUE(WaitForCondition(ObjectKind::kGitProvider, "team-a", "bad-secret", "Ready", kFalse,
                               "SecretMalformed"));
  EXPECT_TRUE(WaitForCondition(ObjectKind::kGitProvider, "team-a", "no-secret", "Ready", kFalse,
                               "SecretNotFound"));
  EXPECT_TRUE(WaitForCondition(ObjectKind::kGitProvider, "team-a", "gone", "Stalled", kTrue,
                               "ConnectionFailed"));
  EXPECT_NE(ConditionMessage(ObjectKind::kGitProvider, "team-a", "gone", "Ready")
                .find("/nonexistent/repo.git does not exist"),
            std::string::npos);

  // What an operator sees: `kubectl get gittarget -o yaml` shows the reasons.
  reverser::testing::ScopedTempDir kube_dir("kubectl");
  std::string kubeconfig = kube_dir.path() + "/kubeconfig";
  ASSERT_TRUE(sim_->WriteKubeconfig(kubeconfig).ok());
  for (const auto& [name, expected] :
       std::vector<std::pair<std::string, std::string>>{{"nested", "reason: TargetConflict"},
                                                        {"no-provider", "reason: ProviderNotFound"},
                                                        {"bad-branch", "reason: BranchNotAllowed"},
                                                        {"bad-path", "reason: InvalidPath"}}) {
    auto out = reverser::testing::RunCommand({"kubectl", "--kubeconfig=" + kubeconfig,
                                              "--cache-dir=" + kube_dir.path() + "/cache", "get",
                                              "gittarget", name, "-n", "team-a", "-o", "yaml"});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(out->exit_code, 0) << out->err;
    EXPECT_NE(out->out.find(expected), std::string::npos) << out->out;
    EXPECT_NE(out->out.find("type: Stalled"), std::string::npos) << out->out;
  }

  // The service is still healthy and serving after the bad input.
  grpc::ClientContext context;
  reverser::v1::ServiceStatus status;
  ASSERT_TRUE(admin_->Status(&context, {}, &status).ok());
  EXPECT_TRUE(WaitFor([&] { return host_->Ready(); }, kWait));
}

TEST_F(CatalogServiceTest, SigningKeyIsGeneratedWhenMissingAndPublishedInStatus) {
  const core::GroupVersionResource secrets{"", "v1", "secrets"};
  auto signing_key_of = [&](const std::string& provider) {
    return StringAt(Get(ObjectKind::kGitProvider, "team-a", provider),
                    {"status", "signingPublicKey"});
  };
  CreateProvider(
      "team-a", "signed",
      {{"commit",
        {{"signing", {{"secretRef", {{"name", "signing"}}}, {"generateWhenMissing", true}}}}}});
  ASSERT_TRUE(
      WaitForCondition(ObjectKind::kGitProvider, "team-a", "signed", "Ready", kTrue, "Ready"));
  ASSERT_TRUE(WaitFor([&] { return !signing_key_of("signed").empty(); }, kWait));
  const std::string published = signing_key_of("signed");
  EXPECT_TRUE(absl::StartsWith(published, "ssh-ed25519 AAAA")) << published;
  EXPECT_NE(ConditionMessage(ObjectKind::kGitProvider, "team-a", "signed", "Ready")
                .find("commits signed with a generated ed25519 key"),
            std::string::npos);

  // The Secret holds an OpenSSH key that ssh-keygen reads back to the published public key.
  auto secret = client_->Get(secrets, "team-a", "signing");
  ASSERT_TRUE(secret.ok()) << secret.status();
  EXPECT_FALSE(secret->at("metadata").contains("ownerReferences"));
  auto data = kube::DecodeSecretData(*secret);
  ASSERT_TRUE(data.ok());
  EXPECT_EQ(data->at("signing.pub"), published + "\n");
  reverser::testing::ScopedTempDir keys("keys");
  const std::string key_file = keys.path() + "/signing.key";
  ASSERT_TRUE(reverser::testing::WriteFile(key_file, data->at("signing.key")).ok());
  ASSERT_EQ(chmod(key_file.c_str(), 0600), 0);
  auto derived = reverser::testing::RunCommand({"ssh-keygen", "-y", "-f", key_file});
  ASSERT_TRUE(derived.ok());
  ASSERT_EQ(derived->exit_code, 0) << derived->err;
  EXPECT_EQ(derived->out.substr(0, derived->out.find_last_not_of(" \n") + 1), published);

  // A spec change probes again: the key is kept, not regenerated.
  auto patched =
      client_->Patch(GvrOf(ObjectKind::kGitProvider), "team-a", "signed", kube::PatchType::kMerge,
                     {{"spec", {{"allowedBranches", {"main", "dev"}}}}});
  ASSERT_TRUE(patched.ok()) << patched.status();
  ASSERT_TRUE(WaitFor(
      [&] {
        json p = Get(ObjectKind::kGitProvider, "team-a", "signed");
        const json* ready = FindCondition(NodeAt(p, {"status", "conditions"}), "Ready");
        return NodeAt(p, {"status", "observedGeneration"}) == 2 && ready != nullptr &&
               ready->value("message", "").find("commits signed with the ed25519 key") !=
                   std::string::npos;
      },
      kWait));
  EXPECT_EQ(signing_key_of("signed"), published);

  // A Secret without signing.key gets one; with a passphrase it is stored encrypted and the
  // other data is kept.
  ASSERT_TRUE(
      client_
          ->Create(secrets, "team-a",
                   {{"metadata", {{"name", "locked"}}},
                    {"data", kube::EncodeSecretData({{"passphrase", "pw"}, {"note", "x"}})}})
          .ok());
  CreateProvider(
      "team-a", "locked",
      {{"commit",
        {{"signing", {{"secretRef", {{"name", "locked"}}}, {"generateWhenMissing", true}}}}}});
  ASSERT_TRUE(WaitFor([&] { return !signing_key_of("locked").empty(); }, kWait));
  auto locked = kube::DecodeSecretData(*client_->Get(secrets, "team-a", "locked"));
  ASSERT_TRUE(locked.ok());
  EXPECT_EQ(locked->at("note"), "x");
  EXPECT_TRUE(absl::StartsWith(locked->at("signing.key"), "-----BEGIN ENCRYPTED PRIVATE KEY-----"));
  auto reread = git::SshSigningKey::FromSecretData(*locked);
  ASSERT_TRUE(reread.ok()) << reread.status();
  EXPECT_EQ(reread->AuthorizedKey(), signing_key_of("locked"));
  EXPECT_NE(signing_key_of("locked"), published);

  // Without generateWhenMissing a missing Secret is SecretNotFound and nothing is created; a key
  // that does not parse is SecretMalformed; neither publishes a key.
  CreateProvider("team-a", "absent",
                 {{"commit", {{"signing", {{"secretRef", {{"name", "nope"}}}}}}}});
  ASSERT_TRUE(client_
                  ->Create(secrets, "team-a",
                           {{"metadata", {{"name", "garbage"}}},
                            {"data", kube::EncodeSecretData({{"signing.key", "not a key"}})}})
                  .ok());
  CreateProvider(
      "team-a", "broken",
      {{"commit",
        {{"signing", {{"secretRef", {{"name", "garbage"}}}, {"generateWhenMissing", true}}}}}});
  EXPECT_TRUE(WaitForCondition(ObjectKind::kGitProvider, "team-a", "absent", "Ready", kFalse,
                               "SecretNotFound"));
  EXPECT_NE(ConditionMessage(ObjectKind::kGitProvider, "team-a", "absent", "Ready")
                .find("generateWhenMissing is false"),
            std::string::npos);
  EXPECT_TRUE(kube::IsApiNotFound(client_->Get(secrets, "team-a", "nope").status()));
  EXPECT_TRUE(WaitForCondition(ObjectKind::kGitProvider, "team-a", "broken", "Stalled", kTrue,
                               "SecretMalformed"));
  EXPECT_NE(ConditionMessage(ObjectKind::kGitProvider, "team-a", "broken", "Ready")
                .find("team-a/garbage signing.key: not a private key"),
            std::string::npos);
  EXPECT_EQ(signing_key_of("broken"), "");

  // The periodic probe picks up a repaired Secret.
  json repaired = *client_->Get(secrets, "team-a", "garbage");
  repaired["data"] = kube::EncodeSecretData({{"signing.key", data->at("signing.key")}});
  ASSERT_TRUE(client_->Update(secrets, "team-a", repaired).ok());
  clock_.Advance(absl::Minutes(5) + absl::Seconds(1));
  service_->Tick();
  ASSERT_TRUE(
      WaitForCondition(ObjectKind::kGitProvider, "team-a", "broken", "Ready", kTrue, "Ready"));
  EXPECT_EQ(signing_key_of("broken"), published);

  // Turning signing off removes the published key.
  ASSERT_TRUE(client_
                  ->Patch(GvrOf(ObjectKind::kGitProvider), "team-a", "signed",
                          kube::PatchType::kMerge, {{"spec", {{"commit", {{"signing", nullptr}}}}}})
                  .ok());
  EXPECT_TRUE(WaitFor([&] { return signing_key_of("signed").empty(); }, kWait));
  EXPECT_TRUE(
      WaitForCondition(ObjectKind::kGitProvider, "team-a", "signed", "Ready", kTrue, "Ready"));
}

TEST_F(CatalogServiceTest, AdminListsTypesWithTheReasonTheyAreNotFollowed) {
  ASSERT_TRUE(WaitFor([&] { return host_->Ready(); }, kWait));
  grpc::ClientContext context;
  reverser::v1::ListTypesResponse response;
  ASSERT_TRUE(admin_->ListTypes(&context, {}, &response).ok());
  bool saw_pods = false;
  for (const auto& record : response.records()) {
    if (record.identity().gvr().resource() == "pods" && record.identity().gvr().group().empty()) {
      saw_pods = true;
      EXPECT_EQ(record.verdict(), reverser::v1::FOLLOW_VERDICT_REFUSED);
      EXPECT_NE(record.summary().find("policy"), std::string::npos) << record.summary();
    }
  }
  EXPECT_TRUE(saw_pods);

  grpc::ClientContext rescan_context;
  reverser::v1::RescanResponse rescan;
  ASSERT_TRUE(admin_->Rescan(&rescan_context, {}, &rescan).ok());
  EXPECT_GT(rescan.types(), 10u);
  EXPECT_TRUE(rescan.degraded_group_versions().empty());
}

TEST_F(CatalogServiceTest, ClusterWatchRulesClaimClusterWide) {
  auto claims = WatchClaims();
  CreateProvider("team-a", "repo");
  CreateTarget("team-a", "platform", "repo", "main", "platform");
  Settle();
  Create(ObjectKind::kClusterWatchRule,
         {{"metadata", {{"name", "platform"}}},
          {"spec",
           {{"targetRef", {{"name", "platform"}, {"namespace", "team-a"}}},
            {"rules",
             {{{"resources", {"namespaces"}}, {"scope", "Cluster"}},
              {{"apiGroups", {""}}, {"resources", {"configmaps"}}, {"scope", "Namespaced"}}}}}}});
  ASSERT_TRUE(WaitFor(
      [&] {
        auto last = claims->last();
        return last && HasClaim(*last, "", "namespaces", "") &&
               HasClaim(*last, "", "configmaps", "");
      },
      kWait))
      << Get(ObjectKind::kClusterWatchRule, "", "platform").dump() << "\n"
      << (claims->last() ? claims->last()->DebugString() : "no claims");
  // Resolved; Ready waits for the target to be Ready and the splicer to report streams, which
  // this test does not simulate (RuleStatus' own tests cover that).
  EXPECT_TRUE(WaitForCondition(ObjectKind::kClusterWatchRule, "", "platform", "ResourcesResolved",
                               kTrue, "Resolved"));

  // A namespaced WatchRule on the same type adds no claim: the cluster-wide one covers it.
  CreateWatchRule("team-a", "cm", "platform",
                  {{{"apiGroups", {""}}, {"resources", {"configmaps"}}}});
  EXPECT_TRUE(WaitForCondition(ObjectKind::kWatchRule, "team-a", "cm", "ResourcesResolved", kTrue,
                               "Resolved"));
  EXPECT_FALSE(HasClaim(*claims->last(), "", "configmaps", "team-a"));
}

TEST_F(CatalogServiceTest, SurvivesDroppedWatchesAndCompaction) {
  auto claims = WatchClaims();
  CreateProvider("team-a", "repo");
  CreateTarget("team-a", "app", "repo", "main", "apps");
  CreateWatchRule("team-a", "cm", "app",
                  {{{"apiGroups", {""}}, {"apiVersions", {"v1"}}, {"resources", {"configmaps"}}}});
  ASSERT_TRUE(WaitFor(
      [&] { return claims->last() && HasClaim(*claims->last(), "", "configmaps", "team-a"); },
      kWait));

  // Every watch is cut: the reflectors resume from their resourceVersion.
  sim_->DropWatches();
  CreateWatchRule("team-a", "svc", "app",
                  {{{"apiGroups", {""}}, {"apiVersions", {"v1"}}, {"resources", {"services"}}}});
  ASSERT_TRUE(
      WaitFor([&] { return claims->last() && HasClaim(*claims->last(), "", "services", "team-a"); },
              kWait));

  // History compacted and watches cut: resuming gets 410 and relists; a deletion that happened
  // in between is noticed through the relist.
  sim_->Compact();
  sim_->DropWatches();
  ASSERT_TRUE(client_->Delete(GvrOf(ObjectKind::kWatchRule), "team-a", "cm").ok());
  ASSERT_TRUE(WaitFor(
      [&] { return claims->last() && !HasClaim(*claims->last(), "", "configmaps", "team-a"); },
      kWait));
  EXPECT_TRUE(HasClaim(*claims->last(), "", "services", "team-a"));
  EXPECT_TRUE(WaitFor([&] { return host_->Ready(); }, kWait));
}

TEST_F(CatalogServiceTest, ManySubscribersComeAndGoWhileClaimsChange) {
  CreateProvider("team-a", "repo");
  CreateTarget("team-a", "app", "repo", "main", "apps");
  std::vector<std::unique_ptr<StreamRecorder<reverser::v1::ClaimSet>>> streams;
  std::vector<std::unique_ptr<StreamRecorder<reverser::v1::TableUpdate>>> table_streams;
  // (group, version, resource) served by kube-sim and not excluded by the watch policy.
  const std::vector<std::vector<std::string>> types = {
      {"", "v1", "configmaps"},      {"", "v1", "services"},
      {"", "v1", "serviceaccounts"}, {"", "v1", "secrets"},
      {"apps", "v1", "deployments"}, {"apiextensions.k8s.io", "v1", "customresourcedefinitions"}};
  for (size_t i = 0; i < types.size(); ++i) {
    streams.push_back(WatchClaims());
    table_streams.push_back(WatchTables());
    CreateWatchRule("team-a", absl::StrCat("r", i), "app",
                    {{{"apiGroups", {types[i][0]}},
                      {"apiVersions", {types[i][1]}},
                      {"resources", {types[i][2]}}}});
    if (i % 2 == 1) {
      streams.erase(streams.begin());  // cancels a stream mid-flight
      table_streams.erase(table_streams.begin());
    }
  }
  for (const auto& stream : streams) {
    ASSERT_TRUE(WaitFor(
        [&] {
          auto last = stream->last();
          if (!last) return false;
          for (const auto& t : types) {
            // Cluster-scoped types named by a WatchRule are not claimed (own namespace only).
            if (t[2] == "customresourcedefinitions") continue;
            if (!HasClaim(*last, t[0], t[2], "team-a")) return false;
          }
          return true;
        },
        kWait));
  }
  // Every table stream converges on the same final generation.
  uint64_t final_generation = 0;
  ASSERT_TRUE(WaitFor(
      [&] {
        auto last = table_streams.back()->last();
        if (!last) return false;
        final_generation = last->generation();
        if (last->upserted_size() != 1) return false;
        std::set<std::string> followed;
        for (const auto& t : last->upserted(0).types()) followed.insert(t.type().gvr().resource());
        for (const auto& t : types) {
          if (t[2] != "customresourcedefinitions" && followed.count(t[2]) == 0) return false;
        }
        return true;
      },
      kWait));
  for (const auto& stream : table_streams) {
    EXPECT_TRUE(WaitFor(
        [&] { return stream->last() && stream->last()->generation() == final_generation; }, kWait));
  }
}

// --- the EncryptionConfigured gate with the age key Secret -----------------------------------

const core::GroupVersionResource kSecrets{"", "v1", "secrets"};

// The reference quickstart's GitTarget encryption: sops, Secret sops-age-key, age enabled,
// recipients extracted from the Secret and generated when missing.
json QuickstartEncryption(bool generate = true, const std::string& secret = "sops-age-key") {
  return {{"provider", "sops"},
          {"secretRef", {{"name", secret}}},
          {"age",
           {{"enabled", true},
            {"recipients", {{"extractFromSecret", true}, {"generateWhenMissing", generate}}}}}};
}

// An identity from the age-keygen CLI and the recipient the CLI derives from it.
std::pair<std::string, std::string> CliKeyPair() {
  auto keygen = reverser::testing::RunCommand({"age-keygen"});
  EXPECT_TRUE(keygen.ok() && keygen->exit_code == 0);
  std::string file = keygen.ok() ? keygen->out : "";
  auto pub = reverser::testing::RunCommand({"age-keygen", "-y"}, file);
  EXPECT_TRUE(pub.ok() && pub->exit_code == 0);
  return {file, pub.ok() ? std::string(absl::StripAsciiWhitespace(pub->out)) : ""};
}

class CatalogEncryptionTest : public CatalogServiceTest {
 protected:
  void CreateEncryptedTarget(const std::string& name, const std::string& path, json encryption) {
    Create(ObjectKind::kGitTarget, {{"metadata", {{"namespace", "team-a"}, {"name", name}}},
                                    {"spec",
                                     {{"providerRef", {{"name", "repo"}}},
                                      {"branch", "main"},
                                      {"path", path},
                                      {"encryption", encryption}}}});
  }

  // The current table of every target, rebuilt from the stream.
  static std::map<std::string, reverser::v1::WatchedTypeTable> View(
      const StreamRecorder<reverser::v1::TableUpdate>& tables) {
    std::map<std::string, reverser::v1::WatchedTypeTable> view;
    for (const auto& update : tables.messages()) {
      if (update.full()) view.clear();
      for (const auto& t : update.upserted()) view[t.target().name()] = t;
      for (const auto& r : update.removed()) view.erase(r.name());
    }
    return view;
  }

  static std::vector<std::string> Recipients(const reverser::v1::WatchedTypeTable& table) {
    return {table.config().age_recipients().begin(), table.config().age_recipients().end()};
  }

  // reverser_catalog_encryption_secret_reads_total{outcome=...} as /metrics shows it.
  double Reads(const std::string& outcome) {
    const std::string prefix =
        absl::StrCat("reverser_catalog_encryption_secret_reads_total{outcome=\"", outcome, "\"} ");
    for (absl::string_view line : absl::StrSplit(host_->metrics().RenderText(), '\n')) {
      double value = 0;
      if (absl::ConsumePrefix(&line, prefix) && absl::SimpleAtod(line, &value)) return value;
    }
    return 0;
  }
};

TEST_F(CatalogEncryptionTest, GenerateWhenMissingCreatesTheKeySecretAndEncryptsToIt) {
  // A single-digit day: the entry name does not zero-pad it.
  clock_.Set(absl::FromCivil(absl::CivilSecond(2024, 3, 5, 12, 0, 0), absl::UTCTimeZone()));
  auto tables = WatchTables();
  CreateProvider("team-a", "repo");
  CreateEncryptedTarget("quickstart", "live-cluster", QuickstartEncryption());
  CreateWatchRule("team-a", "secrets", "quickstart", {{{"resources", {"secrets"}}}});

  ASSERT_TRUE(WaitForCondition(ObjectKind::kGitTarget, "team-a", "quickstart",
                               "EncryptionConfigured", kTrue, "OK"));
  auto secret = client_->Get(kSecrets, "team-a", "sops-age-key");
  ASSERT_TRUE(secret.ok()) << secret.status();
  EXPECT_EQ((*secret)["type"], "Opaque");
  ASSERT_TRUE((*secret)["data"].is_object());
  EXPECT_EQ((*secret)["data"].size(), 1u);
  ASSERT_TRUE((*secret)["data"].contains("2024035.agekey")) << secret->dump();
  const json& annotations = (*secret)["metadata"]["annotations"];
  EXPECT_EQ(annotations.value("configbutler.ai/backup-warning", ""), "REMOVE_AFTER_BACKUP");
  const std::string recipient = annotations.value("configbutler.ai/age-recipient", "");
  ASSERT_TRUE(absl::StartsWith(recipient, "age1")) << secret->dump();
  // The entry is an identity the age CLI accepts, for the annotated recipient.
  std::string identity;
  ASSERT_TRUE(
      absl::Base64Unescape((*secret)["data"]["2024035.agekey"].get<std::string>(), &identity));
  EXPECT_TRUE(absl::StartsWith(identity, "AGE-SECRET-KEY-1"));
  auto derived = reverser::testing::RunCommand({"age-keygen", "-y"}, identity + "\n");
  ASSERT_TRUE(derived.ok() && derived->exit_code == 0);
  EXPECT_EQ(absl::StripAsciiWhitespace(derived->out), recipient);

  // The target's config carries that recipient (and only the public half).
  ASSERT_TRUE(WaitFor(
      [&] {
        auto view = View(*tables);
        return view.count("quickstart") &&
               Recipients(view["quickstart"]) == std::vector<std::string>{recipient};
      },
      kWait));
  EXPECT_EQ(View(*tables)["quickstart"].config().SerializeAsString().find(identity),
            std::string::npos);
  EXPECT_EQ(Reads("created"), 1);

  // Read again every probe interval: the same key is kept (no second entry).
  const std::string rv = (*secret)["metadata"].value("resourceVersion", "");
  clock_.Advance(absl::Minutes(5));
  service_->Tick();
  ASSERT_TRUE(WaitFor([&] { return Reads("ok") >= 1; }, kWait));
  auto again = client_->Get(kSecrets, "team-a", "sops-age-key");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)["metadata"].value("resourceVersion", ""), rv);
}

TEST_F(CatalogEncryptionTest, AKeyIsAddedToAnExistingSecretWithoutOne) {
  ASSERT_TRUE(client_
                  ->Create(kSecrets, "team-a",
                           {{"metadata", {{"name", "sops-age-key"}, {"labels", {{"team", "a"}}}}},
                            {"data", {{"unrelated", "eA=="}}}})
                  .ok());
  CreateProvider("team-a", "repo");
  CreateEncryptedTarget("t", "x", QuickstartEncryption());
  ASSERT_TRUE(
      WaitForCondition(ObjectKind::kGitTarget, "team-a", "t", "EncryptionConfigured", kTrue, "OK"));
  auto secret = client_->Get(kSecrets, "team-a", "sops-age-key");
  ASSERT_TRUE(secret.ok());
  EXPECT_EQ((*secret)["data"]["unrelated"], "eA==");
  EXPECT_EQ((*secret)["metadata"]["labels"]["team"], "a");
  EXPECT_TRUE((*secret)["data"].contains(sops::AgeKeyEntryName(clock_.Now()))) << secret->dump();
  EXPECT_EQ((*secret)["metadata"]["annotations"].value("configbutler.ai/backup-warning", ""),
            "REMOVE_AFTER_BACKUP");
  EXPECT_EQ(Reads("completed"), 1);
}

TEST_F(CatalogEncryptionTest, ExtractFromSecretUsesEveryAgeKeyEntry) {
  const auto [key_a, recipient_a] = CliKeyPair();
  const auto [key_b, recipient_b] = CliKeyPair();
  ASSERT_TRUE(client_
                  ->Create(kSecrets, "team-a",
                           {{"metadata", {{"name", "team-keys"}}},
                            {"data",
                             {{"2024035.agekey", absl::Base64Escape(key_a)},
                              {"rotated.agekey", absl::Base64Escape(key_b)},
                              {"README", absl::Base64Escape("not a key")}}}})
                  .ok());
  auto tables = WatchTables();
  CreateProvider("team-a", "repo");
  CreateEncryptedTarget("t", "x", QuickstartEncryption(/*generate=*/false, "team-keys"));
  CreateWatchRule("team-a", "secrets", "t", {{{"resources", {"secrets"}}}});
  ASSERT_TRUE(
      WaitForCondition(ObjectKind::kGitTarget, "team-a", "t", "EncryptionConfigured", kTrue, "OK"));
  std::vector<std::string> expected = {recipient_a, recipient_b};
  std::sort(expected.begin(), expected.end());
  ASSERT_TRUE(WaitFor(
      [&] {
        auto view = View(*tables);
        return view.count("t") && Recipients(view["t"]) == expected;
      },
      kWait));
  // Extracting never writes: no annotations, no new entry.
  auto secret = client_->Get(kSecrets, "team-a", "team-keys");
  ASSERT_TRUE(secret.ok());
  EXPECT_FALSE((*secret)["metadata"].contains("annotations")) << secret->dump();
  EXPECT_EQ((*secret)["data"].size(), 3u);
}

TEST_F(CatalogEncryptionTest, MissingSecretWithoutGenerateStallsTheTarget) {
  auto tables = WatchTables();
  CreateProvider("team-a", "repo");
  CreateEncryptedTarget("t", "x", QuickstartEncryption(/*generate=*/false));
  CreateTarget("team-a", "plain", "repo", "main", "y");
  CreateWatchRule("team-a", "secrets", "t", {{{"resources", {"secrets"}}}});
  ASSERT_TRUE(WaitForCondition(ObjectKind::kGitTarget, "team-a", "t", "EncryptionConfigured",
                               kFalse, "MissingSecret"));
  EXPECT_NE(ConditionMessage(ObjectKind::kGitTarget, "team-a", "t", "EncryptionConfigured")
                .find("failed to fetch encryption secret team-a/sops-age-key"),
            std::string::npos);
  EXPECT_TRUE(WaitForCondition(ObjectKind::kGitTarget, "team-a", "t", "Ready", kFalse,
                               "EncryptionNotConfigured"));
  EXPECT_TRUE(WaitForCondition(ObjectKind::kGitTarget, "team-a", "t", "Stalled", kTrue,
                               "EncryptionNotConfigured"));
  // Nothing is mirrored for it (no table), and nothing was created.
  ASSERT_TRUE(WaitFor([&] { return View(*tables).count("plain") == 1; }, kWait));
  EXPECT_EQ(View(*tables).count("t"), 0u);
  EXPECT_TRUE(kube::IsApiNotFound(client_->Get(kSecrets, "team-a", "sops-age-key").status()));
  EXPECT_GE(Reads("MissingSecret"), 1);
}

// --- the attribution webhook's rules (--attribution_webhook_configuration) ----------------------

const core::GroupVersionResource kWebhookConfigurations{"admissionregistration.k8s.io", "v1",
                                                        "validatingwebhookconfigurations"};
constexpr char kAttributionConfiguration[] = "reverser-attribution";

// The chart's attribution configuration: one webhook, no rules (the catalog fills them).
json AttributionConfiguration() {
  return {{"apiVersion", "admissionregistration.k8s.io/v1"},
          {"kind", "ValidatingWebhookConfiguration"},
          {"metadata", {{"name", kAttributionConfiguration}}},
          {"webhooks",
           {{{"name", "changes.reverser.configbutler.ai"},
             {"admissionReviewVersions", {"v1"}},
             {"sideEffects", "NoneOnDryRun"},
             {"failurePolicy", "Ignore"},
             {"timeoutSeconds", 1},
             {"clientConfig",
              {{"service",
                {{"namespace", "reverser"},
                 {"name", "reverser-admission"},
                 {"port", 9445},
                 {"path", "/validate-operator-types"}}},
               {"caBundle", absl::Base64Escape("-----BEGIN CERTIFICATE-----\n")}}}}}}};
}

class CatalogAttributionWebhookTest : public CatalogServiceTest {
 protected:
  void Configure(CatalogServiceOptions& options) override {
    CreateConfiguration();
    options.attribution_webhook.configuration = kAttributionConfiguration;
    // Resets must be undone through the watch of the configuration, not a periodic re-check.
    options.attribution_webhook.recheck_period = absl::Hours(1);
    options.attribution_webhook.initial_backoff = absl::Milliseconds(50);
    options.attribution_webhook.max_backoff = absl::Milliseconds(200);
  }

  void CreateConfiguration() {
    auto created = client_->Create(kWebhookConfigurations, "", AttributionConfiguration());
    ASSERT_TRUE(created.ok()) << created.status();
    written_ = *created;
  }

  json Configuration() {
    auto got = client_->Get(kWebhookConfigurations, "", kAttributionConfiguration);
    return got.ok() ? *got : json();
  }

  // Waits until every webhook of the configuration has exactly `rules`.
  bool WaitForRules(const json& rules) {
    return WaitFor(
        [&] {
          json config = Configuration();
          if (!config.contains("webhooks") || config["webhooks"].empty()) return false;
          for (const json& webhook : config["webhooks"]) {
            if (webhook.value("rules", json()) != rules) return false;
          }
          return true;
        },
        kWait);
  }

  // reverser_catalog_attribution_webhook_syncs_total{outcome=...} as /metrics shows it.
  double Syncs(const std::string& outcome) {
    const std::string prefix = absl::StrCat(
        "reverser_catalog_attribution_webhook_syncs_total{outcome=\"", outcome, "\"} ");
    for (absl::string_view line : absl::StrSplit(host_->metrics().RenderText(), '\n')) {
      double value = 0;
      if (absl::ConsumePrefix(&line, prefix) && absl::SimpleAtod(line, &value)) return value;
    }
    return 0;
  }

  // The webhook as created (with the server's defaults), but for its rules.
  static json WithoutRules(json webhook) {
    webhook.erase("rules");
    return webhook;
  }

  json written_;  // the configuration as the server answered its creation
};

TEST_F(CatalogAttributionWebhookTest, RulesFollowTheFollowedTypesAndOnlyRulesAreWritten) {
  ASSERT_FALSE(written_["webhooks"][0].contains("rules"));
  // The registry outlives a test: counts are compared with their values at the start.
  const double written_before = Syncs("written");
  const double missing_before = Syncs("missing");
  CreateProvider("team-a", "repo");
  CreateTarget("team-a", "app", "repo", "main", "apps");
  CreateWatchRule("team-a", "cm", "app", {{{"resources", {"configmaps"}}}});
  CreateWatchRule("team-a", "deploy", "app", {{{"resources", {"deployments"}}}});

  // The rules appear, spelled out once here as the API server stores them.
  json both = json::array();
  both.push_back({{"apiGroups", {""}},
                  {"apiVersions", {"*"}},
                  {"operations", {"CREATE", "UPDATE", "DELETE"}},
                  {"resources", {"configmaps", "configmaps/scale"}},
                  {"scope", "*"}});
  both.push_back({{"apiGroups", {"apps"}},
                  {"apiVersions", {"*"}},
                  {"operations", {"CREATE", "UPDATE", "DELETE"}},
                  {"resources", {"deployments", "deployments/scale"}},
                  {"scope", "*"}});
  both.push_back({{"apiGroups", {""}},
                  {"apiVersions", {"*"}},
                  {"operations", {"DELETE"}},
                  {"resources", {"namespaces"}},
                  {"scope", "*"}});
  ASSERT_EQ(both, AttributionRules({{"", "configmaps"}, {"apps", "deployments"}}));
  ASSERT_TRUE(WaitForRules(both)) << Configuration().dump(2);
  // clientConfig, caBundle, failurePolicy, timeoutSeconds, sideEffects: as written.
  json config = Configuration();
  ASSERT_EQ(config["webhooks"].size(), 1u);
  EXPECT_EQ(WithoutRules(config["webhooks"][0]), WithoutRules(written_["webhooks"][0]));
  EXPECT_EQ(config["webhooks"][0]["clientConfig"],
            AttributionConfiguration()["webhooks"][0]["clientConfig"]);
  EXPECT_EQ(config["webhooks"][0]["failurePolicy"], "Ignore");
  EXPECT_GT(Syncs("written"), written_before);

  // A change that leaves the rules alone is checked (the watch) but not written again.
  const double written = Syncs("written");
  const double unchanged = Syncs("unchanged");
  config["metadata"]["labels"] = {{"touched", "yes"}};
  auto touched = client_->Update(kWebhookConfigurations, "", config);
  ASSERT_TRUE(touched.ok()) << touched.status();
  ASSERT_TRUE(WaitFor([&] { return Syncs("unchanged") > unchanged; }, kWait));
  EXPECT_EQ(Syncs("written"), written);
  EXPECT_EQ(Configuration()["metadata"]["resourceVersion"],
            (*touched)["metadata"]["resourceVersion"]);

  // A reset (what a helm upgrade or a person may do) is undone: rules dropped, or replaced.
  json reset = Configuration();
  reset["webhooks"][0].erase("rules");
  ASSERT_TRUE(client_->Update(kWebhookConfigurations, "", reset).ok());
  ASSERT_TRUE(WaitForRules(both)) << Configuration().dump(2);
  json other = json::array({{{"op", "replace"},
                             {"path", "/webhooks/0/rules"},
                             {"value",
                              {{{"apiGroups", {"*"}},
                                {"apiVersions", {"*"}},
                                {"operations", {"*"}},
                                {"resources", {"*"}}}}}}});
  ASSERT_TRUE(client_
                  ->Patch(kWebhookConfigurations, "", kAttributionConfiguration,
                          kube::PatchType::kJson, other)
                  .ok());
  ASSERT_TRUE(WaitForRules(both)) << Configuration().dump(2);
  EXPECT_EQ(WithoutRules(Configuration()["webhooks"][0]), WithoutRules(written_["webhooks"][0]));

  // A type no longer followed leaves the rules; namespace deletes stay.
  ASSERT_TRUE(client_->Delete(GvrOf(ObjectKind::kWatchRule), "team-a", "deploy").ok());
  ASSERT_TRUE(WaitForRules(AttributionRules({{"", "configmaps"}}))) << Configuration().dump(2);

  // A missing configuration is counted (and retried); created again, it gets the rules.
  ASSERT_TRUE(client_->Delete(kWebhookConfigurations, "", kAttributionConfiguration).ok());
  ASSERT_TRUE(WaitFor([&] { return Syncs("missing") > missing_before; }, kWait));
  CreateConfiguration();
  ASSERT_TRUE(WaitForRules(AttributionRules({{"", "configmaps"}}))) << Configuration().dump(2);
  EXPECT_EQ(WithoutRules(Configuration()["webhooks"][0]), WithoutRules(written_["webhooks"][0]));
}

// The catalog may read its attribution configuration but not write it (RBAC): counted and
// retried as forbidden, while the catalog goes on publishing; once allowed, the rules land.
class CatalogAttributionWebhookForbiddenTest : public CatalogAttributionWebhookTest {
 protected:
  void Configure(CatalogServiceOptions& options) override {
    CatalogAttributionWebhookTest::Configure(options);
    sim_->authenticator().AddToken("admin", {"admin", "", {"system:masters"}});
    sim_->authenticator().AddToken("catalog", {"catalog", "", {}});
    client_ = MakeClient("admin");
    kubesim::RbacRule everything_else;
    everything_else.users = {"catalog"};
    everything_else.verbs = {"*"};
    everything_else.api_groups = {"", "apps", "apiextensions.k8s.io", "configbutler.ai"};
    everything_else.resources = {"*"};
    sim_->authorizer().AddRule(everything_else);
    kubesim::RbacRule discovery;
    discovery.users = {"catalog"};
    discovery.verbs = {"get"};
    discovery.non_resource_urls = {"*"};
    sim_->authorizer().AddRule(discovery);
    kubesim::RbacRule read;
    read.users = {"catalog"};
    read.verbs = {"get", "list", "watch"};
    read.api_groups = {"admissionregistration.k8s.io"};
    read.resources = {"validatingwebhookconfigurations"};
    sim_->authorizer().AddRule(read);
    options.client = MakeClient("catalog");
  }
};

TEST_F(CatalogAttributionWebhookForbiddenTest, ARefusedWriteIsCountedAndRetried) {
  // The registry outlives a test: counts are compared with their values at the start.
  const double forbidden = Syncs("forbidden");
  const double written = Syncs("written");
  auto claims = WatchClaims();
  CreateProvider("team-a", "repo");
  CreateTarget("team-a", "app", "repo", "main", "apps");
  CreateWatchRule("team-a", "cm", "app", {{{"resources", {"configmaps"}}}});
  ASSERT_TRUE(WaitFor([&] { return Syncs("forbidden") >= forbidden + 2; }, kWait));  // again
  ASSERT_TRUE(WaitFor(
      [&] { return claims->last() && HasClaim(*claims->last(), "", "configmaps", "team-a"); },
      kWait));
  EXPECT_FALSE(Configuration()["webhooks"][0].contains("rules"));
  EXPECT_EQ(Syncs("written"), written);

  kubesim::RbacRule write;
  write.users = {"catalog"};
  write.verbs = {"update"};
  write.api_groups = {"admissionregistration.k8s.io"};
  write.resources = {"validatingwebhookconfigurations"};
  sim_->authorizer().AddRule(write);
  ASSERT_TRUE(WaitForRules(AttributionRules({{"", "configmaps"}}))) << Configuration().dump(2);
  EXPECT_EQ(WithoutRules(Configuration()["webhooks"][0]), WithoutRules(written_["webhooks"][0]));
  // Counted once the write returns, which may be just after the rules can be read.
  EXPECT_TRUE(WaitFor([&] { return Syncs("written") > written; }, kWait));
}

// A 1.27–1.33 API server: WatchList is rejected (422) and the watches fall back to LIST+WATCH.
class CatalogServiceLegacyServerTest : public CatalogServiceTest {
 protected:
  kubesim::Profile profile() const override { return kubesim::Profile::kLegacy; }
};

TEST_F(CatalogServiceLegacyServerTest, ClaimsFollowRulesWithListAndWatch) {
  auto claims = WatchClaims();
  CreateProvider("team-a", "repo");
  CreateTarget("team-a", "app", "repo", "main", "apps");
  CreateWatchRule("team-a", "deploy", "app", {{{"resources", {"deployments"}}}});
  ASSERT_TRUE(WaitFor(
      [&] { return claims->last() && HasClaim(*claims->last(), "apps", "deployments", "team-a"); },
      kWait));
  EXPECT_TRUE(WaitForCondition(ObjectKind::kWatchRule, "team-a", "deploy", "ResourcesResolved",
                               kTrue, "Resolved"));
}

}  // namespace
}  // namespace reverser::catalog
