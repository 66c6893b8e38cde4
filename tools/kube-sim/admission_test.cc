// Validating admission webhooks called by kube-sim over real HTTPS, and the namespace
// controller's deletes as the audit backend records them.

#include "tools/kube-sim/admission.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <condition_variable>
#include <fstream>
#include <mutex>
#include <thread>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "tests/fixtures/certs.h"
#include "tests/fixtures/temp_dir.h"
#include "tools/kube-sim/kube_sim.h"

namespace reverser::kubesim {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// An HTTPS admission webhook: records every AdmissionReview and answers with `decide`.
class WebhookReceiver {
 public:
  using Decide = std::function<Json(const Json& request)>;
  WebhookReceiver(const std::string& cert, const std::string& key)
      : server_(cert.c_str(), key.c_str()) {
    server_.Post(".*", [this](const httplib::Request& req, httplib::Response& res) {
      Json review = Json::parse(req.body, nullptr, false);
      Decide decide;
      {
        std::unique_lock lock(mu_);
        reviews_.push_back(review);
        targets_.push_back(req.target);
        cv_.notify_all();
        decide = decide_;
        // A held webhook answers only when released (or when the test ends).
        cv_.wait(lock, [&] { return !held_ || stopping_; });
      }
      if (raw_reply_) {
        res.set_content(*raw_reply_, "application/json");
        return;
      }
      Json request = review.value("request", Json::object());
      Json response = decide ? decide(request) : Json{{"allowed", true}};
      response["uid"] = request.value("uid", "");
      res.set_content(Json{{"apiVersion", review.value("apiVersion", "admission.k8s.io/v1")},
                           {"kind", "AdmissionReview"},
                           {"response", response}}
                          .dump(),
                      "application/json");
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
  }
  ~WebhookReceiver() {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
      cv_.notify_all();
    }
    server_.stop();
    thread_.join();
  }
  int port() const { return port_; }
  void SetDecide(Decide d) {
    std::lock_guard lock(mu_);
    decide_ = std::move(d);
  }
  void SetRawReply(std::string body) { raw_reply_ = std::move(body); }
  void Hold(bool held) {
    std::lock_guard lock(mu_);
    held_ = held;
    cv_.notify_all();
  }
  bool WaitForReviews(size_t n) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(20), [&] { return reviews_.size() >= n; });
  }
  std::vector<Json> Reviews() {
    std::lock_guard lock(mu_);
    return reviews_;
  }
  std::vector<std::string> Targets() {
    std::lock_guard lock(mu_);
    return targets_;
  }

 private:
  httplib::SSLServer server_;
  std::thread thread_;
  int port_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Json> reviews_;
  std::vector<std::string> targets_;
  Decide decide_;
  std::optional<std::string> raw_reply_;
  bool held_ = false;
  bool stopping_ = false;
};

class AdmissionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto pki = reverser::testing::MakeTestPki(dir_.path());
    ASSERT_TRUE(pki.ok()) << pki.status();
    pki_ = *pki;
    ca_bundle_ = absl::Base64Escape(ReadAll(pki_.ca_cert));
    receiver_ = std::make_unique<WebhookReceiver>(pki_.server_cert, pki_.server_key);
    auto sim = KubeSim::Start(options_);
    ASSERT_TRUE(sim.ok()) << sim.status();
    sim_ = std::move(*sim);
    ASSERT_EQ(Call("POST", "/api/v1/namespaces",
                   {{"metadata", {{"name", "team"}, {"labels", {{"watched", "yes"}}}}}})
                  .status,
              201);
    ASSERT_EQ(Call("POST", "/api/v1/namespaces", {{"metadata", {{"name", "other"}}}}).status, 201);
  }

  KubeSim::Response Call(const std::string& method, const std::string& path, const Json& body,
                         const std::string& content_type = "application/json") {
    return sim_->Call(method, path, body.is_null() ? "" : body.dump(), content_type);
  }

  // A webhook on 127.0.0.1 that sees configmaps CREATE/UPDATE/DELETE (fields overridable).
  Json Hook(const std::string& name, Json overrides = Json::object()) {
    Json hook = {{"name", name},
                 {"clientConfig",
                  {{"url", absl::StrCat("https://127.0.0.1:", receiver_->port(), "/validate")},
                   {"caBundle", ca_bundle_}}},
                 {"rules",
                  {{{"operations", {"CREATE", "UPDATE", "DELETE"}},
                    {"apiGroups", {""}},
                    {"apiVersions", {"v1"}},
                    {"resources", {"configmaps"}}}}},
                 {"sideEffects", "None"},
                 {"admissionReviewVersions", {"v1"}}};
    hook.merge_patch(overrides);
    return hook;
  }

  void Configure(const std::string& name, const std::vector<Json>& hooks) {
    auto r = Call("POST", "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
                  {{"apiVersion", "admissionregistration.k8s.io/v1"},
                   {"kind", "ValidatingWebhookConfiguration"},
                   {"metadata", {{"name", name}}},
                   {"webhooks", hooks}});
    ASSERT_EQ(r.status, 201) << r.body;
  }

  KubeSim::Response CreateConfigMap(const std::string& name, Json labels = Json::object(),
                                    const std::string& query = "", const std::string& ns = "team") {
    return Call("POST", absl::StrCat("/api/v1/namespaces/", ns, "/configmaps", query),
                {{"metadata", {{"name", name}, {"labels", labels}}}, {"data", {{"k", "v"}}}});
  }

  reverser::testing::ScopedTempDir dir_{"admission"};
  reverser::testing::TestPki pki_;
  std::string ca_bundle_;
  std::unique_ptr<WebhookReceiver> receiver_;
  KubeSimOptions options_;
  std::unique_ptr<KubeSim> sim_;
};

TEST_F(AdmissionTest, ConfigurationIsServedWithDefaultsAndValidated) {
  Configure("cfg", {Hook("check.example.com")});
  Json stored = Json::parse(
      Call("GET", "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/cfg", {})
          .body);
  const Json& hook = stored["webhooks"][0];
  EXPECT_EQ(hook["failurePolicy"], "Fail");
  EXPECT_EQ(hook["matchPolicy"], "Equivalent");
  EXPECT_EQ(hook["timeoutSeconds"], 10);
  EXPECT_EQ(hook["namespaceSelector"], Json::object());
  EXPECT_EQ(hook["rules"][0]["scope"], "*");
  EXPECT_FALSE(stored["metadata"].value("uid", "").empty());

  auto bad = Call("POST", "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
                  {{"metadata", {{"name", "bad"}}},
                   {"webhooks",
                    {Hook("plain.example.com", {{"clientConfig", {{"url", "http://127.0.0.1:1/x"}}},
                                                {"sideEffects", "Some"},
                                                {"timeoutSeconds", 31}})}}});
  EXPECT_EQ(bad.status, 422);
  std::string message = Json::parse(bad.body)["message"];
  EXPECT_THAT(message,
              HasSubstr("webhooks[0].clientConfig.url: Invalid value: "
                        "\"http://127.0.0.1:1/x\": 'https' is the only allowed URL scheme"));
  EXPECT_THAT(message, HasSubstr("webhooks[0].sideEffects: Unsupported value: \"Some\": supported "
                                 "values: \"None\", \"NoneOnDryRun\""));
  EXPECT_THAT(message, HasSubstr("webhooks[0].timeoutSeconds: Invalid value: 31: the timeout "
                                 "value must be between 1 and 30 seconds"));
  auto list = Json::parse(
      Call("GET", "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations", {})
          .body);
  EXPECT_EQ(list["kind"], "ValidatingWebhookConfigurationList");
  EXPECT_EQ(list["items"].size(), 1u);
  // Writes of the configurations themselves never go to webhooks.
  EXPECT_EQ(sim_->webhook_calls().Count(), 0u);
}

TEST_F(AdmissionTest, CreateSendsTheAdmissionReviewAfterUidAssignment) {
  Configure("cfg", {Hook("check.example.com")});
  sim_->authenticator().AddToken("t", {"alice", "alice-uid", {"devs"}, {{"team", {"blue"}}}});
  httplib::Client http("127.0.0.1", sim_->port());
  http.set_bearer_token_auth("t");
  auto created =
      http.Post("/api/v1/namespaces/team/configmaps?fieldManager=tester",
                R"({"metadata":{"generateName":"cm-"},"data":{"k":"v"}})", "application/json");
  ASSERT_EQ(created->status, 201) << created->body;
  Json stored = Json::parse(created->body);
  ASSERT_EQ(receiver_->Reviews().size(), 1u);
  Json review = receiver_->Reviews()[0];
  EXPECT_EQ(review["apiVersion"], "admission.k8s.io/v1");
  EXPECT_EQ(review["kind"], "AdmissionReview");
  const Json request = review["request"];
  EXPECT_EQ(request["operation"], "CREATE");
  EXPECT_EQ(request["name"], stored["metadata"]["name"]);  // the generated name
  EXPECT_EQ(request["namespace"], "team");
  EXPECT_EQ(request["kind"], (Json{{"group", ""}, {"version", "v1"}, {"kind", "ConfigMap"}}));
  EXPECT_EQ(request["resource"],
            (Json{{"group", ""}, {"version", "v1"}, {"resource", "configmaps"}}));
  EXPECT_EQ(request["requestKind"], request["kind"]);
  EXPECT_EQ(request["requestResource"], request["resource"]);
  EXPECT_EQ(request["userInfo"], (Json{{"username", "alice"},
                                       {"uid", "alice-uid"},
                                       {"groups", {"devs", "system:authenticated"}},
                                       {"extra", {{"team", {"blue"}}}}}));
  // What reverser's command authorship relies on: the uid the object is stored with.
  EXPECT_EQ(request["object"]["metadata"]["uid"], stored["metadata"]["uid"]);
  EXPECT_EQ(request["object"]["metadata"]["creationTimestamp"],
            stored["metadata"]["creationTimestamp"]);
  EXPECT_FALSE(request["object"]["metadata"].contains("resourceVersion"));
  EXPECT_TRUE(request["oldObject"].is_null());
  EXPECT_EQ(request["dryRun"], false);
  EXPECT_EQ(request["options"], (Json{{"kind", "CreateOptions"},
                                      {"apiVersion", "meta.k8s.io/v1"},
                                      {"fieldManager", "tester"}}));
  EXPECT_EQ(receiver_->Targets()[0], "/validate?timeout=10s");
  ASSERT_EQ(sim_->webhook_calls().Count(), 1u);
  EXPECT_EQ(sim_->webhook_calls().Calls()[0].outcome, WebhookCall::Outcome::kAllowed);
  EXPECT_EQ(sim_->webhook_calls().Calls()[0].webhook, "check.example.com");
  Json admin = Json::parse(Call("GET", "/_sim/admission", nullptr).body);
  ASSERT_EQ(admin["calls"].size(), 1u);
  EXPECT_EQ(admin["calls"][0]["outcome"], "allowed");
  EXPECT_EQ(admin["calls"][0]["operation"], "CREATE");
  EXPECT_EQ(admin["calls"][0]["resource"], "configmaps");
}

TEST_F(AdmissionTest, DenialRejectsWithTheWebhooksMessageAndCode) {
  Configure("cfg", {Hook("deny.example.com")});
  receiver_->SetDecide([](const Json&) {
    return Json{{"allowed", false},
                {"status", {{"code", 403}, {"message", "rejected by policy"}}},
                {"warnings", {"think again"}},
                {"auditAnnotations", {{"scenario", "reject"}}}};
  });
  auto r = CreateConfigMap("nope");
  EXPECT_EQ(r.status, 403);
  Json status = Json::parse(r.body);
  EXPECT_EQ(status["message"],
            "admission webhook \"deny.example.com\" denied the request: rejected by policy");
  EXPECT_EQ(status["status"], "Failure");
  EXPECT_EQ(Call("GET", "/api/v1/namespaces/team/configmaps/nope", {}).status, 404);
  // Without a code: 400; without a message: "without explanation".
  receiver_->SetDecide([](const Json&) { return Json{{"allowed", false}}; });
  r = CreateConfigMap("nope");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(Json::parse(r.body)["message"],
            "admission webhook \"deny.example.com\" denied the request without explanation");
  EXPECT_EQ(sim_->webhook_calls().Calls()[0].outcome, WebhookCall::Outcome::kDenied);
}

TEST_F(AdmissionTest, UpdatePatchDeleteAndDeleteCollection) {
  ASSERT_EQ(CreateConfigMap("a").status, 201);
  ASSERT_EQ(CreateConfigMap("b").status, 201);
  Configure("cfg", {Hook("check.example.com")});
  auto patched = Call("PATCH", "/api/v1/namespaces/team/configmaps/a", {{"data", {{"k", "w"}}}},
                      "application/merge-patch+json");
  ASSERT_EQ(patched.status, 200);
  auto deleted = Call("DELETE", "/api/v1/namespaces/team/configmaps/a",
                      {{"kind", "DeleteOptions"}, {"apiVersion", "v1"}, {"gracePeriodSeconds", 5}});
  ASSERT_EQ(deleted.status, 200);
  ASSERT_EQ(Call("DELETE", "/api/v1/namespaces/team/configmaps", {}).status, 200);
  std::vector<Json> reviews = receiver_->Reviews();
  ASSERT_EQ(reviews.size(), 3u);
  const Json& update = reviews[0]["request"];
  EXPECT_EQ(update["operation"], "UPDATE");
  EXPECT_EQ(update["object"]["data"]["k"], "w");
  EXPECT_EQ(update["oldObject"]["data"]["k"], "v");
  EXPECT_EQ(update["options"]["kind"], "UpdateOptions");
  const Json& del = reviews[1]["request"];
  EXPECT_EQ(del["operation"], "DELETE");
  EXPECT_EQ(del["name"], "a");
  EXPECT_TRUE(del["object"].is_null());
  EXPECT_EQ(del["oldObject"]["data"]["k"], "w");
  EXPECT_EQ(del["options"], (Json{{"kind", "DeleteOptions"},
                                  {"apiVersion", "meta.k8s.io/v1"},
                                  {"gracePeriodSeconds", 5}}));
  // deletecollection: one DELETE per item, without a name (as kube-apiserver sends them).
  const Json& item = reviews[2]["request"];
  EXPECT_EQ(item["operation"], "DELETE");
  EXPECT_FALSE(item.contains("name"));
  EXPECT_EQ(item["oldObject"]["metadata"]["name"], "b");
}

TEST_F(AdmissionTest, DeniedDeleteCollectionItemFailsTheRequest) {
  ASSERT_EQ(CreateConfigMap("keep", {{"protected", "yes"}}).status, 201);
  Configure("cfg", {Hook("protect.example.com",
                         {{"objectSelector", {{"matchLabels", {{"protected", "yes"}}}}}})});
  receiver_->SetDecide([](const Json&) {
    return Json{{"allowed", false}, {"status", {{"message", "protected"}}}};
  });
  auto r = Call("DELETE", "/api/v1/namespaces/team/configmaps", {});
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(Call("GET", "/api/v1/namespaces/team/configmaps/keep", {}).status, 200);
}

TEST_F(AdmissionTest, RulesSelectorsAndScope) {
  Configure("cfg", {Hook("status.example.com", {{"rules",
                                                 {{{"operations", {"UPDATE"}},
                                                   {"apiGroups", {""}},
                                                   {"apiVersions", {"v1"}},
                                                   {"resources", {"pods/status"}}}}}}),
                    Hook("labelled-ns.example.com",
                         {{"namespaceSelector", {{"matchLabels", {{"watched", "yes"}}}}}}),
                    Hook("labelled-object.example.com",
                         {{"objectSelector",
                           {{"matchExpressions",
                             {{{"key", "tier"}, {"operator", "In"}, {"values", {"db"}}}}}}}}),
                    Hook("cluster.example.com", {{"rules",
                                                  {{{"operations", {"*"}},
                                                    {"apiGroups", {"*"}},
                                                    {"apiVersions", {"*"}},
                                                    {"resources", {"*"}},
                                                    {"scope", "Cluster"}}}}})});
  ASSERT_EQ(CreateConfigMap("plain", Json::object(), "", "other").status, 201);
  EXPECT_EQ(sim_->webhook_calls().Count(), 0u);
  ASSERT_EQ(CreateConfigMap("in-team").status, 201);
  ASSERT_EQ(CreateConfigMap("db", {{"tier", "db"}}, "", "other").status, 201);
  ASSERT_EQ(Call("POST", "/api/v1/namespaces/team/pods",
                 {{"metadata", {{"name", "p"}}},
                  {"spec", {{"containers", {{{"name", "c"}, {"image", "x"}}}}}}})
                .status,
            201);
  ASSERT_EQ(Call("PUT", "/api/v1/namespaces/team/pods/p/status",
                 {{"metadata", {{"name", "p"}}}, {"status", {{"phase", "Running"}}}})
                .status,
            200);
  ASSERT_EQ(Call("POST", "/api/v1/namespaces", {{"metadata", {{"name", "third"}}}}).status, 201);
  std::vector<std::string> called;
  for (const auto& c : sim_->webhook_calls().Calls()) {
    called.push_back(
        absl::StrCat(c.webhook, " ", c.operation, " ", c.resource, " ", c.namespace_, "/", c.name));
  }
  EXPECT_THAT(called, ElementsAre("labelled-ns.example.com CREATE configmaps team/in-team",
                                  "labelled-object.example.com CREATE configmaps other/db",
                                  "status.example.com UPDATE pods/status team/p",
                                  "cluster.example.com CREATE namespaces third/third"));
  Json status_review = receiver_->Reviews()[2]["request"];
  EXPECT_EQ(status_review["subResource"], "status");
  EXPECT_EQ(status_review["resource"]["resource"], "pods");
}

TEST_F(AdmissionTest, CustomResourcesAreAdmittedToo) {
  auto crd =
      Call("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
           {{"metadata", {{"name", "widgets.example.com"}}},
            {"spec",
             {{"group", "example.com"},
              {"scope", "Namespaced"},
              {"names", {{"plural", "widgets"}, {"singular", "widget"}, {"kind", "Widget"}}},
              {"versions",
               {{{"name", "v1"},
                 {"served", true},
                 {"storage", true},
                 {"schema",
                  {{"openAPIV3Schema",
                    {{"type", "object"}, {"x-kubernetes-preserve-unknown-fields", true}}}}}}}}}}});
  ASSERT_EQ(crd.status, 201) << crd.body;
  Configure("cfg", {Hook("widgets.example.com", {{"rules",
                                                  {{{"operations", {"CREATE"}},
                                                    {"apiGroups", {"example.com"}},
                                                    {"apiVersions", {"*"}},
                                                    {"resources", {"widgets"}}}}}})});
  receiver_->SetDecide([](const Json&) {
    return Json{{"allowed", false}, {"status", {{"message", "no widgets"}}}};
  });
  auto r =
      Call("POST", "/apis/example.com/v1/namespaces/team/widgets",
           {{"apiVersion", "example.com/v1"}, {"kind", "Widget"}, {"metadata", {{"name", "w"}}}});
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(Json::parse(r.body)["message"],
            "admission webhook \"widgets.example.com\" denied the request: no widgets");
  EXPECT_EQ(receiver_->Reviews()[0]["request"]["kind"],
            (Json{{"group", "example.com"}, {"version", "v1"}, {"kind", "Widget"}}));
}

TEST_F(AdmissionTest, FailurePolicyOnUnreachableAndGarbage) {
  // A port that was bound and closed without listening: connections are refused.
  int closed_port = 0;
  {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    socklen_t len = sizeof(addr);
    ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
    closed_port = ntohs(addr.sin_port);
    close(fd);
  }
  const std::string url = absl::StrCat("https://127.0.0.1:", closed_port, "/v");
  Configure("fail", {Hook("closed.example.com", {{"clientConfig", {{"url", url}}}})});
  auto r = CreateConfigMap("x");
  EXPECT_EQ(r.status, 500);
  Json status = Json::parse(r.body);
  EXPECT_EQ(status["reason"], "InternalError");
  EXPECT_EQ(status["message"],
            absl::StrCat("Internal error occurred: failed calling webhook \"closed.example.com\": "
                         "failed to call webhook: Post \"",
                         url, "?timeout=10s\": dial tcp 127.0.0.1:", closed_port,
                         ": connect: connection refused"));
  ASSERT_EQ(Call("DELETE",
                 "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/fail", {})
                .status,
            200);
  Configure("ignore", {Hook("closed.example.com",
                            {{"clientConfig", {{"url", url}}}, {"failurePolicy", "Ignore"}})});
  EXPECT_EQ(CreateConfigMap("x").status, 201);
  EXPECT_EQ(sim_->webhook_calls().Calls().back().outcome, WebhookCall::Outcome::kFailedOpen);
  ASSERT_EQ(Call("DELETE",
                 "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/ignore", {})
                .status,
            200);

  Configure("garbage", {Hook("garbage.example.com")});
  receiver_->SetRawReply("this is not json");
  r = CreateConfigMap("y");
  EXPECT_EQ(r.status, 500);
  EXPECT_THAT(Json::parse(r.body)["message"].get<std::string>(),
              HasSubstr("failed calling webhook \"garbage.example.com\": failed to call webhook: "
                        "couldn't get version/kind; json parse error"));
  receiver_->SetRawReply(R"({"apiVersion":"v1","kind":"Status"})");
  r = CreateConfigMap("y");
  EXPECT_THAT(Json::parse(r.body)["message"].get<std::string>(),
              HasSubstr("received invalid webhook response: expected webhook response of "
                        "admission.k8s.io/v1, Kind=AdmissionReview, got /v1, Kind=Status"));
  // A field of the wrong JSON type fails the call (and kube-sim keeps serving).
  receiver_->SetRawReply(R"({"apiVersion":"admission.k8s.io/v1","kind":7,"response":[]})");
  r = CreateConfigMap("y");
  EXPECT_EQ(r.status, 500);
  EXPECT_THAT(Json::parse(r.body)["message"].get<std::string>(),
              HasSubstr("failed calling webhook \"garbage.example.com\": received invalid webhook "
                        "response"));
  receiver_->SetRawReply(
      R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"wrong","allowed":true}})");
  r = CreateConfigMap("y");
  EXPECT_THAT(Json::parse(r.body)["message"].get<std::string>(),
              HasSubstr("received invalid webhook response: expected response.uid="));
  EXPECT_EQ(Call("GET", "/api/v1/namespaces/team/configmaps/y", {}).status, 404);
}

TEST_F(AdmissionTest, UntrustedCertificateFailsTheCall) {
  Configure(
      "cfg",
      {Hook("check.example.com",
            {{"clientConfig", {{"caBundle", absl::Base64Escape(ReadAll(pki_.rogue_cert))}}}})});
  auto r = CreateConfigMap("x");
  EXPECT_EQ(r.status, 500);
  EXPECT_THAT(Json::parse(r.body)["message"].get<std::string>(),
              HasSubstr("tls: failed to verify certificate: x509: certificate signed by unknown "
                        "authority"));
  EXPECT_TRUE(receiver_->Reviews().empty());
}

TEST_F(AdmissionTest, SlowWebhookTimesOutWithoutHoldingOtherRequests) {
  Configure("cfg", {Hook("slow.example.com", {{"timeoutSeconds", 1}})});
  receiver_->Hold(true);
  KubeSim::Response slow;
  std::thread writer([&] { slow = CreateConfigMap("slow"); });
  ASSERT_TRUE(receiver_->WaitForReviews(1));
  // While the webhook holds its answer, other requests (writes included) are served.
  EXPECT_EQ(Call("GET", "/api/v1/namespaces/team/configmaps", {}).status, 200);
  EXPECT_EQ(
      Call("POST", "/api/v1/namespaces/other/secrets", {{"metadata", {{"name", "s"}}}}).status,
      201);
  writer.join();
  receiver_->Hold(false);
  EXPECT_EQ(slow.status, 500);
  EXPECT_THAT(Json::parse(slow.body)["message"].get<std::string>(),
              HasSubstr("failed calling webhook \"slow.example.com\": failed to call webhook: Post "
                        "\"https://127.0.0.1:" +
                        std::to_string(receiver_->port()) +
                        "/validate?timeout=1s\": context deadline exceeded"));
  EXPECT_EQ(receiver_->Targets()[0], "/validate?timeout=1s");
  EXPECT_EQ(Call("GET", "/api/v1/namespaces/team/configmaps/slow", {}).status, 404);
}

TEST_F(AdmissionTest, DryRunCallsSideEffectFreeWebhooksWithDryRunTrue) {
  Configure("cfg", {Hook("check.example.com", {{"sideEffects", "NoneOnDryRun"}})});
  ASSERT_EQ(CreateConfigMap("dry", Json::object(), "?dryRun=All").status, 201);
  EXPECT_EQ(Call("GET", "/api/v1/namespaces/team/configmaps/dry", {}).status, 404);
  ASSERT_EQ(receiver_->Reviews().size(), 1u);
  const Json request = receiver_->Reviews()[0]["request"];
  EXPECT_EQ(request["dryRun"], true);
  EXPECT_EQ(request["options"]["dryRun"], Json({"All"}));
}

TEST(ValidatingWebhooksTest, DryRunFailsForWebhooksWithSideEffects) {
  // v1 refuses sideEffects Some/Unknown when a configuration is written; a configuration that
  // has them anyway (stored through an older version) fails dry-run requests.
  WebhookCallLog log;
  ValidatingWebhooks webhooks({.log_calls = false}, &log);
  TypeRegistry types;
  AdmissionAttributes attrs;
  attrs.operation = "CREATE";
  attrs.type = types.Find("", "v1", "configmaps");
  attrs.name = "x";
  attrs.namespace_ = "team";
  attrs.object = {{"metadata", {{"name", "x"}}}};
  attrs.dry_run = true;
  Json configuration = {{"metadata", {{"name", "cfg"}}},
                        {"webhooks",
                         {{{"name", "effects.example.com"},
                           {"clientConfig", {{"url", "https://127.0.0.1:1/x"}}},
                           {"rules",
                            {{{"operations", {"*"}},
                              {"apiGroups", {"*"}},
                              {"apiVersions", {"*"}},
                              {"resources", {"*"}}}}},
                           {"sideEffects", "Some"},
                           {"admissionReviewVersions", {"v1"}}}}}};
  auto no_namespace = [](const std::string&) -> std::optional<Json> { return Json::object(); };
  auto versions = [](const std::string&, const std::string&) {
    return std::vector<std::string>{"v1"};
  };
  std::optional<ApiError> e =
      webhooks.Admit(attrs, {configuration}, no_namespace, versions, nullptr);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->code, 400);
  EXPECT_EQ(e->message, "admission webhook \"effects.example.com\" does not support dry run");
  EXPECT_EQ(log.Calls().at(0).outcome, WebhookCall::Outcome::kDryRunUnsupported);
}

class ServiceReferenceTest : public AdmissionTest {
 protected:
  void SetUp() override {
    auto pki = reverser::testing::MakeTestPki(dir_.path());
    ASSERT_TRUE(pki.ok()) << pki.status();
    pki_ = *pki;
    auto cert = reverser::testing::MakeServerCert(pki_, "hook", "DNS:hook.team.svc");
    ASSERT_TRUE(cert.ok()) << cert.status();
    ca_bundle_ = absl::Base64Escape(ReadAll(pki_.ca_cert));
    receiver_ = std::make_unique<WebhookReceiver>(cert->cert, cert->key);
    options_.admission.service_overrides["team/hook"] =
        absl::StrCat("127.0.0.1:", receiver_->port());
    auto sim = KubeSim::Start(options_);
    ASSERT_TRUE(sim.ok()) << sim.status();
    sim_ = std::move(*sim);
    ASSERT_EQ(Call("POST", "/api/v1/namespaces", {{"metadata", {{"name", "team"}}}}).status, 201);
  }
};

TEST_F(ServiceReferenceTest, ServiceIsReachedThroughItsOverrideAndVerifiedByItsName) {
  Configure("cfg",
            {Hook("svc.example.com",
                  {{"clientConfig",
                    {{"url", nullptr},
                     {"service", {{"namespace", "team"}, {"name", "hook"}, {"path", "/check"}}}}}}),
             Hook("missing.example.com",
                  {{"clientConfig",
                    {{"url", nullptr}, {"service", {{"namespace", "team"}, {"name", "gone"}}}}},
                   {"failurePolicy", "Ignore"}})});
  Json stored = Json::parse(
      Call("GET", "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/cfg", {})
          .body);
  EXPECT_EQ(stored["webhooks"][0]["clientConfig"]["service"]["port"], 443);
  ASSERT_EQ(CreateConfigMap("x").status, 201);
  EXPECT_EQ(receiver_->Targets(), std::vector<std::string>{"/check?timeout=10s"});
  std::vector<WebhookCall> calls = sim_->webhook_calls().Calls();
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0].outcome, WebhookCall::Outcome::kAllowed);
  EXPECT_EQ(calls[1].outcome, WebhookCall::Outcome::kFailedOpen);
  EXPECT_EQ(calls[1].message,
            "Internal error occurred: failed calling webhook \"missing.example.com\": failed to "
            "call webhook: Post \"https://gone.team.svc:443/?timeout=10s\": service \"gone\" not "
            "found");
}

// A plain-HTTP audit receiver collecting every event.
class AuditReceiver {
 public:
  AuditReceiver() {
    server_.Post("/audit", [this](const httplib::Request& req, httplib::Response&) {
      Json list = Json::parse(req.body, nullptr, false);
      std::lock_guard lock(mu_);
      for (const auto& e : list.value("items", Json::array())) events_.push_back(e);
      cv_.notify_all();
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
  }
  ~AuditReceiver() {
    server_.stop();
    thread_.join();
  }
  std::string url() const { return absl::StrCat("http://127.0.0.1:", port_, "/audit"); }
  std::vector<Json> Events() {
    std::lock_guard lock(mu_);
    return events_;
  }

 private:
  httplib::Server server_;
  std::thread thread_;
  int port_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Json> events_;
};

TEST(AdmissionAuditTest, WarningsReachTheClientAndAnnotationsTheAuditEvent) {
  reverser::testing::ScopedTempDir dir("admission-audit");
  auto pki = reverser::testing::MakeTestPki(dir.path());
  ASSERT_TRUE(pki.ok()) << pki.status();
  WebhookReceiver hook(pki->server_cert, pki->server_key);
  hook.SetDecide([](const Json&) {
    return Json{{"allowed", true},
                {"warnings", {"configmap k is deprecated"}},
                {"auditAnnotations", {{"scenario", "recorded"}}}};
  });
  AuditReceiver audit;
  KubeSimOptions options;
  options.audit_webhook = AuditWebhookOptions{
      .url = audit.url(), .max_batch_size = 100, .max_wait = absl::Milliseconds(20)};
  auto sim = KubeSim::Start(options);
  ASSERT_TRUE(sim.ok()) << sim.status();
  Json configuration = {{"metadata", {{"name", "cfg"}}},
                        {"webhooks",
                         {{{"name", "record.example.com"},
                           {"clientConfig",
                            {{"url", absl::StrCat("https://127.0.0.1:", hook.port(), "/")},
                             {"caBundle", absl::Base64Escape(ReadAll(pki->ca_cert))}}},
                           {"rules",
                            {{{"operations", {"CREATE"}},
                              {"apiGroups", {""}},
                              {"apiVersions", {"v1"}},
                              {"resources", {"configmaps"}}}}},
                           {"sideEffects", "None"},
                           {"admissionReviewVersions", {"v1"}}}}}};
  ASSERT_EQ(
      (*sim)
          ->Call("POST", "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
                 configuration.dump())
          .status,
      201);
  httplib::Client http("127.0.0.1", (*sim)->port());
  auto created = http.Post("/api/v1/namespaces/default/configmaps",
                           R"({"metadata":{"name":"c"},"data":{"k":"v"}})", "application/json");
  ASSERT_EQ(created->status, 201);
  EXPECT_EQ(created->get_header_value("Warning"), "299 - \"configmap k is deprecated\"");
  ASSERT_TRUE((*sim)->audit()->WaitIdle(absl::Seconds(20)));
  bool found = false;
  for (const Json& e : audit.Events()) {
    if (e["verb"] == "create" && e["stage"] == "ResponseComplete" &&
        e["objectRef"].value("resource", "") == "configmaps") {
      EXPECT_EQ(e["annotations"]["record.example.com/scenario"], "recorded");
      found = true;
    }
  }
  EXPECT_TRUE(found);
}

TEST(NamespaceControllerTest, DeletionTerminatesThenEmptiesAndFinalizesAsTheController) {
  AuditReceiver receiver;
  KubeSimOptions options;
  options.audit_webhook = AuditWebhookOptions{
      .url = receiver.url(), .max_batch_size = 100, .max_wait = absl::Milliseconds(20)};
  auto sim = KubeSim::Start(options);
  ASSERT_TRUE(sim.ok()) << sim.status();
  KubeSim& s = **sim;
  ASSERT_EQ(s.Call("POST", "/api/v1/namespaces", R"({"metadata":{"name":"gone"}})").status, 201);
  ASSERT_EQ(
      s.Call("POST", "/api/v1/namespaces/gone/configmaps", R"({"metadata":{"name":"a"}})").status,
      201);
  // A finalizer holds the namespace's content, so the namespace stays Terminating.
  ASSERT_EQ(s.Call("POST", "/api/v1/namespaces/gone/secrets",
                   R"({"metadata":{"name":"held","finalizers":["example.com/hold"]}})")
                .status,
            201);
  auto deleted = s.Call("DELETE", "/api/v1/namespaces/gone");
  ASSERT_EQ(deleted.status, 200);
  Json ns = Json::parse(deleted.body);
  EXPECT_EQ(ns["status"]["phase"], "Terminating");
  EXPECT_TRUE(ns["metadata"].contains("deletionTimestamp"));
  auto again = s.Call("DELETE", "/api/v1/namespaces/gone");
  EXPECT_EQ(again.status, 409);
  EXPECT_THAT(Json::parse(again.body)["message"].get<std::string>(),
              HasSubstr("The system is ensuring all content is removed from this namespace."));
  // The controller empties what it can; the finalizer holds the rest, and so the namespace.
  auto held_marked = [&] {
    Json held = Json::parse(s.Call("GET", "/api/v1/namespaces/gone/secrets/held").body);
    return held["metadata"].contains("deletionTimestamp");
  };
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (!held_marked() && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(10));
  ASSERT_TRUE(held_marked());
  EXPECT_EQ(s.Call("GET", "/api/v1/namespaces/gone/configmaps/a").status, 404);
  EXPECT_EQ(s.Call("GET", "/api/v1/namespaces/gone").status, 200);
  ASSERT_EQ(s.Call("PATCH", "/api/v1/namespaces/gone/secrets/held",
                   R"({"metadata":{"finalizers":null}})", "application/merge-patch+json")
                .status,
            200);
  ASSERT_TRUE(s.WaitForNamespaceController(absl::Seconds(20)));
  EXPECT_EQ(s.Call("GET", "/api/v1/namespaces/gone").status, 404);
  ASSERT_TRUE(s.audit()->WaitIdle(absl::Seconds(20)));
  std::vector<std::string> controller_calls;
  for (const Json& e : receiver.Events()) {
    if (e["stage"] != "ResponseComplete" ||
        e["user"]["username"] != "system:serviceaccount:kube-system:namespace-controller") {
      continue;
    }
    if (e["objectRef"].value("resource", "") == "configmaps" ||
        e["objectRef"].value("resource", "") == "namespaces") {
      controller_calls.push_back(absl::StrCat(e["verb"].get<std::string>(), " ",
                                              e["objectRef"].value("resource", ""), " ",
                                              e["objectRef"].value("subresource", "")));
    }
  }
  // Deletecollection per type in every round; finally the finalize update.
  ASSERT_GE(controller_calls.size(), 2u);
  EXPECT_EQ(controller_calls.front(), "deletecollection configmaps ");
  EXPECT_EQ(controller_calls.back(), "update namespaces finalize");
}

}  // namespace
}  // namespace reverser::kubesim
