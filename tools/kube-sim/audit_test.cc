#include "tools/kube-sim/audit.h"

#include <condition_variable>
#include <mutex>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "tests/fixtures/runfiles.h"
#include "tools/kube-sim/kube_sim.h"
#include "tools/kube-sim/yaml_json.h"

namespace reverser::kubesim {
namespace {

// A webhook receiver: records every POSTed EventList; can fail the first N posts.
class Receiver {
 public:
  explicit Receiver(int fail_first = 0) : fail_left_(fail_first) {
    server_.Post("/audit-webhook/default",
                 [this](const httplib::Request& req, httplib::Response& res) {
                   std::lock_guard lock(mu_);
                   posts_.push_back(Json::parse(req.body, nullptr, false));
                   content_types_.push_back(req.get_header_value("Content-Type"));
                   res.status = fail_left_-- > 0 ? 500 : 200;
                   cv_.notify_all();
                 });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
  }
  ~Receiver() {
    server_.stop();
    thread_.join();
  }
  std::string url() const {
    return "http://127.0.0.1:" + std::to_string(port_) + "/audit-webhook/default";
  }
  // All events received so far once at least `n` posts arrived (or the deadline passed).
  std::vector<Json> WaitPosts(size_t n) {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, std::chrono::seconds(10), [&] { return posts_.size() >= n; });
    return posts_;
  }
  std::vector<Json> Events() {
    std::lock_guard lock(mu_);
    std::vector<Json> events;
    for (const auto& p : posts_) {
      for (const auto& e : p["items"]) events.push_back(e);
    }
    return events;
  }
  std::vector<std::string> content_types() {
    std::lock_guard lock(mu_);
    return content_types_;
  }

 private:
  httplib::Server server_;
  std::thread thread_;
  int port_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Json> posts_;
  std::vector<std::string> content_types_;
  int fail_left_;
};

AuditPolicy RealE2ePolicy() {
  ApiOr<Json> doc = ParseYamlOrJson(
      reverser::testing::ReadTestdata("k8s/audit/config/gitops-reverser-e2e-audit-policy.yaml"));
  EXPECT_TRUE(doc.ok());
  ApiOr<AuditPolicy> policy = AuditPolicy::FromJson(*doc);
  EXPECT_TRUE(policy.ok()) << policy.error().message;
  return *policy;
}

TEST(AuditPolicyTest, RealE2ePolicyDecisions) {
  AuditPolicy p = RealE2ePolicy();
  AuditDecision create = p.Evaluate({"u", {}, "create", true, "", "configmaps", "", "ns", "x", ""});
  EXPECT_EQ(create.level, AuditLevel::kRequestResponse);
  EXPECT_TRUE(create.omit_managed_fields);
  EXPECT_THAT(create.omit_stages, ::testing::ElementsAre("RequestReceived"));
  EXPECT_EQ(
      p.Evaluate({"u", {}, "update", true, "apps", "deployments", "status", "ns", "x", ""}).level,
      AuditLevel::kNone);
  EXPECT_EQ(p.Evaluate({"u", {}, "create", true, "", "pods", "", "ns", "x", ""}).level,
            AuditLevel::kNone);
  EXPECT_EQ(p.Evaluate({"u", {}, "get", true, "", "configmaps", "", "ns", "x", ""}).level,
            AuditLevel::kNone);  // reads match no rule
  EXPECT_EQ(p.Evaluate({"system:serviceaccount:kube-system:horizontal-pod-autoscaler",
                        {},
                        "patch",
                        true,
                        "apps",
                        "deployments",
                        "scale",
                        "ns",
                        "x",
                        ""})
                .level,
            AuditLevel::kNone);
}

TEST(AuditWebhookTest, EventsCarryRealFieldsUnderThePolicy) {
  Receiver receiver;
  KubeSimOptions options;
  options.audit_policy = RealE2ePolicy();
  options.audit_webhook = AuditWebhookOptions{
      .url = receiver.url(), .max_batch_size = 100, .max_wait = absl::Milliseconds(20)};
  auto sim = KubeSim::Start(options);
  ASSERT_TRUE(sim.ok());
  auto& s = **sim;
  auto created = s.Call(
      "POST", "/api/v1/namespaces/default/configmaps?fieldManager=kubectl-client-side-apply",
      R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm-a"},"data":{"key":"value"}})");
  ASSERT_EQ(created.status, 201);
  s.Call("POST", "/api/v1/namespaces/default/configmaps?dryRun=All",
         R"({"metadata":{"name":"dry"}})");
  s.Call("POST", "/api/v1/namespaces/default/configmaps",
         R"({"metadata":{"name":"cm-a"}})");                    // 409
  s.Call("GET", "/api/v1/namespaces/default/configmaps/cm-a");  // not audited by policy
  ASSERT_TRUE(s.audit()->WaitIdle(absl::Seconds(10)));
  std::vector<Json> events = receiver.Events();
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(receiver.content_types()[0], "application/json");

  const Json& e = events[0];
  EXPECT_FALSE(e.contains("kind"));  // EventList items carry no kind/apiVersion
  EXPECT_EQ(e["level"], "RequestResponse");
  EXPECT_EQ(e["stage"], "ResponseComplete");
  EXPECT_EQ(e["verb"], "create");
  EXPECT_EQ(e["requestURI"],
            "/api/v1/namespaces/default/configmaps?fieldManager=kubectl-client-side-apply");
  EXPECT_EQ(e["user"]["username"], "system:admin");
  EXPECT_EQ(
      e["objectRef"],
      Json::parse(
          R"({"apiVersion":"v1","name":"cm-a","namespace":"default","resource":"configmaps"})"));
  EXPECT_EQ(e["responseStatus"], Json::parse(R"({"metadata":{},"code":201})"));
  EXPECT_EQ(e["requestObject"]["data"]["key"], "value");
  EXPECT_FALSE(e["responseObject"]["metadata"].contains("managedFields"));  // omitManagedFields
  EXPECT_EQ(e["responseObject"]["metadata"]["resourceVersion"],
            Json::parse(created.body)["metadata"]["resourceVersion"]);
  EXPECT_EQ(e["annotations"]["authorization.k8s.io/decision"], "allow");
  EXPECT_EQ(e["auditID"].get<std::string>().size(), 36u);
  EXPECT_EQ(e["requestReceivedTimestamp"].get<std::string>().size(), 27u);  // MicroTime

  EXPECT_EQ(events[1]["requestURI"], "/api/v1/namespaces/default/configmaps?dryRun=All");
  EXPECT_EQ(events[2]["responseStatus"]["code"], 409);
  EXPECT_EQ(events[2]["responseStatus"]["reason"], "AlreadyExists");
  EXPECT_EQ(events[2]["responseObject"]["kind"], "Status");
}

TEST(AuditWebhookTest, BatchesBySizeAndRetriesNon2xx) {
  Receiver receiver(/*fail_first=*/1);
  KubeSimOptions options;
  options.audit_webhook = AuditWebhookOptions{.url = receiver.url(),
                                              .max_batch_size = 2,
                                              .max_wait = absl::Seconds(30),
                                              .initial_backoff = absl::Milliseconds(10)};
  options.audit_policy = AuditPolicy::AllAt(AuditLevel::kMetadata);
  auto sim = KubeSim::Start(options);
  ASSERT_TRUE(sim.ok());
  auto& s = **sim;
  // Each request yields RequestReceived + ResponseComplete: one full batch of 2.
  s.Call("GET", "/api/v1/namespaces/default/configmaps");
  std::vector<Json> posts = receiver.WaitPosts(2);
  ASSERT_EQ(posts.size(), 2u);
  EXPECT_EQ(posts[0], posts[1]);  // the failed batch is re-sent whole
  EXPECT_EQ(posts[0]["kind"], "EventList");
  EXPECT_EQ(posts[0]["apiVersion"], "audit.k8s.io/v1");
  ASSERT_EQ(posts[0]["items"].size(), 2u);
  EXPECT_EQ(posts[0]["items"][0]["stage"], "RequestReceived");
  EXPECT_EQ(posts[0]["items"][1]["stage"], "ResponseComplete");
  EXPECT_EQ(posts[0]["items"][0]["auditID"], posts[0]["items"][1]["auditID"]);
  EXPECT_FALSE(posts[0]["items"][1].contains("requestObject"));  // Metadata level
  EXPECT_TRUE(s.audit()->WaitIdle(absl::Seconds(10)));
  EXPECT_EQ(s.audit()->stats().failed_attempts, 1);
  EXPECT_EQ(s.audit()->stats().batches_sent, 1);
}

TEST(AuditWebhookTest, HeldEventsAreQueuedAndSentOnRelease) {
  Receiver receiver;
  KubeSimOptions options;
  options.audit_webhook = AuditWebhookOptions{
      .url = receiver.url(), .max_batch_size = 100, .max_wait = absl::Milliseconds(1)};
  options.audit_policy = AuditPolicy::AllAt(AuditLevel::kMetadata);
  auto sim = KubeSim::Start(options);
  ASSERT_TRUE(sim.ok());
  auto& s = **sim;
  httplib::Client admin("127.0.0.1", s.port());
  ASSERT_EQ(admin.Post("/_sim/audit", R"({"hold":true})", "application/json")->status, 200);
  s.Call("GET", "/api/v1/namespaces/default/configmaps");
  // Queued, not sent: the receiver sees nothing while the hold lasts.
  Json state = Json::parse(admin.Get("/_sim/state")->body);
  EXPECT_EQ(state["audit"]["held"], true);
  EXPECT_EQ(state["audit"]["eventsQueued"], 2);
  EXPECT_FALSE(s.audit()->WaitIdle(absl::Milliseconds(50)));
  EXPECT_TRUE(receiver.Events().empty());
  ASSERT_EQ(admin.Post("/_sim/audit", R"({"hold":false})", "application/json")->status, 200);
  EXPECT_TRUE(s.audit()->WaitIdle(absl::Seconds(10)));
  EXPECT_EQ(receiver.Events().size(), 2u);
  EXPECT_EQ(admin.Post("/_sim/audit", R"({"hold":"yes"})", "application/json")->status, 400);
}

TEST(AuditWebhookTest, ImpersonatedUserIsRecorded) {
  Receiver receiver;
  KubeSimOptions options;
  options.audit_webhook =
      AuditWebhookOptions{.url = receiver.url(), .max_wait = absl::Milliseconds(10)};
  options.audit_policy = AuditPolicy::AllAt(AuditLevel::kRequest);
  auto sim = KubeSim::Start(options);
  ASSERT_TRUE(sim.ok());
  httplib::Client c("127.0.0.1", (*sim)->port());
  const std::string uri = "/api/v1/namespaces/default/configmaps?fieldManager=a%2Fb&dryRun=All";
  c.Post(uri.c_str(), {{"Impersonate-User", "alice"}, {"Impersonate-Group", "devs"}},
         R"({"metadata":{"name":"x"}})", "application/json");
  ASSERT_TRUE((*sim)->audit()->WaitIdle(absl::Seconds(10)));
  std::vector<Json> events = receiver.Events();
  ASSERT_FALSE(events.empty());
  const Json& e = events.back();
  EXPECT_EQ(e["user"]["username"], "system:admin");
  EXPECT_EQ(e["impersonatedUser"]["username"], "alice");
  EXPECT_EQ(e["impersonatedUser"]["groups"], Json({"devs", "system:authenticated"}));
  EXPECT_EQ(e["sourceIPs"][0], "127.0.0.1");
  EXPECT_EQ(e["requestURI"], uri);  // raw, as sent
}

TEST(AuditWebhookTest, GarbageCollectorDeletesDependentsAsItsServiceAccount) {
  Receiver receiver;
  KubeSimOptions options;
  options.audit_webhook =
      AuditWebhookOptions{.url = receiver.url(), .max_wait = absl::Milliseconds(10)};
  options.audit_policy = RealE2ePolicy();
  auto sim = KubeSim::Start(options);
  ASSERT_TRUE(sim.ok());
  auto& s = **sim;
  Json parent = Json::parse(
      s.Call("POST", "/api/v1/namespaces/default/configmaps", R"({"metadata":{"name":"parent"}})")
          .body);
  Json child = {{"metadata",
                 {{"name", "child"},
                  {"ownerReferences",
                   {{{"apiVersion", "v1"},
                     {"kind", "ConfigMap"},
                     {"name", "parent"},
                     {"uid", parent["metadata"]["uid"]}}}}}}};
  ASSERT_EQ(s.Call("POST", "/api/v1/namespaces/default/configmaps", child.dump()).status, 201);
  ASSERT_EQ(s.Call("DELETE", "/api/v1/namespaces/default/configmaps/parent",
                   R"({"propagationPolicy":"Background"})")
                .status,
            200);
  ASSERT_TRUE(s.audit()->WaitIdle(absl::Seconds(10)));
  std::vector<Json> events = receiver.Events();
  ASSERT_EQ(events.size(), 4u);
  const Json& gc = events[2]["objectRef"]["name"] == "child" ? events[2] : events[3];
  EXPECT_EQ(gc["verb"], "delete");
  EXPECT_EQ(gc["user"]["username"], "system:serviceaccount:kube-system:generic-garbage-collector");
  EXPECT_EQ(gc["requestObject"]["propagationPolicy"], "Background");
  EXPECT_EQ(gc["responseStatus"]["status"], "Success");
  EXPECT_EQ(gc["responseStatus"]["details"]["name"], "child");
}

}  // namespace
}  // namespace reverser::kubesim
