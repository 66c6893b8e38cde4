#include "services/materializer/audit_webhook.h"

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "tests/fixtures/certs.h"
#include "tests/fixtures/temp_dir.h"

namespace reverser::materializer {
namespace {

class RecordingSink : public FactSink {
 public:
  absl::Status Write(const std::vector<redisstore::AuthorFact>& facts) override {
    if (fail) return absl::UnavailableError("redis down");
    written.insert(written.end(), facts.begin(), facts.end());
    return absl::OkStatus();
  }
  bool fail = false;
  std::vector<redisstore::AuthorFact> written;
};

std::string EventList(const std::string& items) {
  return R"({"kind":"EventList","apiVersion":"audit.k8s.io/v1","metadata":{},"items":[)" + items +
         "]}";
}

const char kUpdate[] = R"({"auditID":"a-1","stage":"ResponseComplete","verb":"update",
  "requestURI":"/api/v1/namespaces/team/configmaps/cm-a","user":{"username":"alice"},
  "objectRef":{"resource":"configmaps","namespace":"team","name":"cm-a","apiVersion":"v1","uid":"u-1"},
  "responseStatus":{"code":200},
  "responseObject":{"kind":"ConfigMap","metadata":{"name":"cm-a","uid":"u-1","resourceVersion":"42"}}})";
const char kGet[] = R"({"auditID":"a-2","stage":"ResponseComplete","verb":"get",
  "user":{"username":"alice"},"objectRef":{"resource":"configmaps","apiVersion":"v1"}})";

TEST(AuditIntakeTest, RecordsAcceptedEventsAndCountsEveryEvent) {
  RecordingSink sink;
  runtime::MetricsRegistry metrics;
  AuditIntake intake(&sink, &metrics);
  AuditResponse r = intake.Handle("POST", "/audit-webhook", EventList(std::string(kUpdate) + "," + kGet));
  EXPECT_EQ(r.status, 200) << r.body;
  ASSERT_EQ(sink.written.size(), 1u);
  EXPECT_EQ(sink.written[0].name, "cm-a");
  EXPECT_EQ(sink.written[0].resource_version, "42");
  std::string text = metrics.RenderText();
  EXPECT_TRUE(absl::StrContains(
      text,
      "gitopsreverser_audit_events_total{outcome=\"queued\",category=\"accepted\",group=\"\","
      "version=\"v1\",resource=\"configmaps\",verb=\"update\"} 1"))
      << text;
  EXPECT_TRUE(absl::StrContains(text, "outcome=\"read_only_or_unknown_verb\""));
  EXPECT_TRUE(absl::StrContains(text, "gitopsreverser_audit_eventlists_total{outcome=\"processed\"} 1"));
}

TEST(AuditIntakeTest, PathMethodAndBodyErrors) {
  RecordingSink sink;
  runtime::MetricsRegistry metrics;
  AuditIntake intake(&sink, &metrics);
  EXPECT_EQ(intake.Handle("POST", "/audit-webhook/", EventList("")).status, 400);
  AuditResponse cluster = intake.Handle("POST", "/audit-webhook/cluster-a", EventList(""));
  EXPECT_EQ(cluster.status, 400);
  EXPECT_TRUE(absl::StrContains(cluster.body, "must not include a cluster ID"));
  EXPECT_EQ(intake.Handle("GET", "/audit-webhook", "").status, 405);
  AuditResponse bad = intake.Handle("POST", "/audit-webhook", "{not json");
  EXPECT_EQ(bad.status, 400);
  EXPECT_TRUE(absl::StrContains(bad.body, "\"kind\":\"Status\""));
  EXPECT_EQ(intake.Handle("POST", "/audit-webhook", EventList("")).status, 200);
  EXPECT_TRUE(absl::StrContains(metrics.RenderText(),
                                "gitopsreverser_audit_eventlists_total{outcome=\"empty\"} 1"));
}

TEST(AuditIntakeTest, StoreFailureAnswers500SoTheApiServerRetries) {
  RecordingSink sink;
  sink.fail = true;
  runtime::MetricsRegistry metrics;
  AuditIntake intake(&sink, &metrics);
  AuditResponse r = intake.Handle("POST", "/audit-webhook", EventList(kUpdate));
  EXPECT_EQ(r.status, 500);
  EXPECT_TRUE(absl::StrContains(metrics.RenderText(), "outcome=\"write_error\",category=\"error\""));
  // The retry, once the store is back, is accepted.
  sink.fail = false;
  EXPECT_EQ(intake.Handle("POST", "/audit-webhook", EventList(kUpdate)).status, 200);
  EXPECT_EQ(sink.written.size(), 1u);
}

TEST(AuditWebhookServerTest, RequiresTlsMaterialUnlessInsecure) {
  RecordingSink sink;
  runtime::MetricsRegistry metrics;
  AuditIntake intake(&sink, &metrics);
  AuditWebhookOptions options;
  options.port = 0;
  AuditWebhookServer server(options, &intake);
  auto started = server.Start();
  ASSERT_FALSE(started.ok());
  EXPECT_TRUE(absl::StrContains(started.status().message(), "--audit_insecure"));
}

TEST(AuditWebhookServerTest, MutualTlsAcceptsTheClientCertAndRefusesOthers) {
  testing::ScopedTempDir dir("pki");
  auto pki = testing::MakeTestPki(dir.path());
  ASSERT_TRUE(pki.ok()) << pki.status();
  RecordingSink sink;
  runtime::MetricsRegistry metrics;
  AuditIntake intake(&sink, &metrics);
  AuditWebhookOptions options;
  options.listen_address = "127.0.0.1";
  options.port = 0;
  options.max_body_bytes = 64 * 1024;
  options.tls = {pki->server_cert, pki->server_key, pki->ca_cert};
  AuditWebhookServer server(options, &intake);
  auto port = server.Start();
  ASSERT_TRUE(port.ok()) << port.status();

  httplib::SSLClient good("127.0.0.1", *port, pki->client_cert, pki->client_key);
  good.set_ca_cert_path(pki->ca_cert.c_str());
  good.enable_server_certificate_verification(true);
  auto res = good.Post("/audit-webhook", EventList(kUpdate), "application/json");
  ASSERT_TRUE(res) << httplib::to_string(res.error());
  EXPECT_EQ(res->status, 200) << res->body;
  EXPECT_EQ(sink.written.size(), 1u);

  // Oversized bodies get a clear 400 and the server keeps serving.
  std::string huge = EventList(std::string(kUpdate) + std::string(70 * 1024, ' '));
  auto too_big = good.Post("/audit-webhook", huge, "application/json");
  if (too_big) {
    EXPECT_EQ(too_big->status, 400);
  }
  auto after = good.Post("/audit-webhook", EventList(kUpdate), "application/json");
  ASSERT_TRUE(after);
  EXPECT_EQ(after->status, 200);

  httplib::SSLClient anonymous("127.0.0.1", *port);
  anonymous.enable_server_certificate_verification(false);
  EXPECT_FALSE(anonymous.Post("/audit-webhook", EventList(kUpdate), "application/json"));

  httplib::SSLClient rogue("127.0.0.1", *port, pki->rogue_cert, pki->rogue_key);
  rogue.enable_server_certificate_verification(false);
  EXPECT_FALSE(rogue.Post("/audit-webhook", EventList(kUpdate), "application/json"));
  EXPECT_EQ(sink.written.size(), 2u);
  server.Stop();
}

}  // namespace
}  // namespace reverser::materializer
