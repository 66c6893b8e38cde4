#include "services/materializer/audit_webhook.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <mutex>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "tests/fixtures/certs.h"
#include "tests/fixtures/temp_dir.h"

namespace reverser::materializer {
namespace {

class RecordingSink : public FactSink {
 public:
  absl::Status Write(const std::vector<redisstore::AuthorFact>& facts) override {
    std::lock_guard lock(mu);
    ++writes;
    if (fail || (fail_from_write > 0 && writes >= fail_from_write)) {
      return absl::UnavailableError("redis down");
    }
    written.insert(written.end(), facts.begin(), facts.end());
    return absl::OkStatus();
  }
  std::vector<std::string> Names() {
    std::lock_guard lock(mu);
    std::vector<std::string> names;
    for (const auto& fact : written) names.push_back(fact.name);
    return names;
  }
  std::mutex mu;
  bool fail = false;
  int fail_from_write = 0;  // > 0: this write and every later one fail
  int writes = 0;
  std::vector<redisstore::AuthorFact> written;
};

// An accepted update of ConfigMap `name` in team, with `request_object` as its request body.
std::string Update(const std::string& id, const std::string& name,
                   const std::string& request_object = R"({"kind":"ConfigMap"})") {
  return absl::StrCat(
      R"({"auditID":")", id,
      R"(","stage":"ResponseComplete","verb":"update","user":{"username":"alice"},)",
      R"("objectRef":{"resource":"configmaps","namespace":"team","name":")", name,
      R"(","apiVersion":"v1","uid":"u-)", name,
      R"("},"responseStatus":{"code":200},"requestObject":)", request_object,
      R"(,"responseObject":{"kind":"ConfigMap","metadata":{"name":")", name, R"(","uid":"u-)", name,
      R"(","resourceVersion":"42"}}})");
}

std::string Nested(int levels) {
  std::string text;
  for (int i = 1; i < levels; ++i) text += R"({"a":)";
  text += "{}";
  text.append(levels - 1, '}');
  return text;
}

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
  AuditResponse r =
      intake.Handle("POST", "/audit-webhook", EventList(std::string(kUpdate) + "," + kGet));
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
  EXPECT_TRUE(
      absl::StrContains(text, "gitopsreverser_audit_eventlists_total{outcome=\"processed\"} 1"));
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
  EXPECT_TRUE(
      absl::StrContains(metrics.RenderText(), "outcome=\"write_error\",category=\"error\""));
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

// The webhook on a free loopback port with mTLS from `pki` (client certificates required).
AuditWebhookOptions MutualTlsOn(const testing::TestPki& pki) {
  AuditWebhookOptions options;
  options.listen_address = "127.0.0.1";
  options.port = 0;
  options.tls = {pki.server_cert, pki.server_key, pki.ca_cert};
  return options;
}

TEST(AuditWebhookServerTest, MutualTlsAcceptsTheClientCertAndRefusesOthers) {
  testing::ScopedTempDir dir("pki");
  auto pki = testing::MakeTestPki(dir.path());
  ASSERT_TRUE(pki.ok()) << pki.status();
  RecordingSink sink;
  runtime::MetricsRegistry metrics;
  AuditIntake intake(&sink, &metrics);
  AuditWebhookOptions options = MutualTlsOn(*pki);
  options.max_body_bytes = 64 * 1024;
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

  // Oversized bodies get a clear 413 (counted) and the server keeps serving.
  std::string huge = EventList(std::string(kUpdate) + std::string(70 * 1024, ' '));
  auto too_big = good.Post("/audit-webhook", huge, "application/json");
  if (too_big) {
    EXPECT_EQ(too_big->status, 413);
  }
  EXPECT_TRUE(absl::StrContains(
      metrics.RenderText(),
      "reverser_materializer_audit_bodies_refused_total{reason=\"too_large\"} 1"));
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

  // The right CA, a foreign name: 403, counted, nothing recorded; the server keeps serving.
  auto stranger = testing::MakeClientCert(*pki, "stranger", "kube-apiserver-impostor",
                                          "DNS:kube-apiserver.example.com");
  ASSERT_TRUE(stranger.ok()) << stranger.status();
  auto refused =
      testing::PostWithClientCert(*pki, *stranger, *port, "/audit-webhook", EventList(kUpdate));
  ASSERT_TRUE(refused) << httplib::to_string(refused.error());
  EXPECT_EQ(refused->status, 403) << refused->body;
  EXPECT_TRUE(absl::StrContains(refused->body, "kube-apiserver-impostor")) << refused->body;
  EXPECT_TRUE(absl::StrContains(
      metrics.RenderText(),
      "reverser_materializer_audit_bodies_refused_total{reason=\"client_not_allowed\"} 1"));
  EXPECT_EQ(sink.written.size(), 2u);
  auto still = good.Post("/audit-webhook", EventList(kUpdate), "application/json");
  ASSERT_TRUE(still);
  EXPECT_EQ(still->status, 200);
  server.Stop();
}

TEST(AuditWebhookServerTest, AClientIsAllowedByASubjectAlternativeNameOrByTheWildcard) {
  testing::ScopedTempDir dir("pki");
  auto pki = testing::MakeTestPki(dir.path());
  ASSERT_TRUE(pki.ok()) << pki.status();
  auto by_san = testing::MakeClientCert(*pki, "by-san", "some-cn", "DNS:audit.example.com");
  ASSERT_TRUE(by_san.ok()) << by_san.status();
  for (const auto& [allowed, want] : std::vector<std::pair<std::vector<std::string>, int>>{
           {{"audit.example.com"}, 200}, {{"*"}, 200}, {{"kube-apiserver"}, 403}}) {
    RecordingSink sink;
    runtime::MetricsRegistry metrics;
    AuditIntake intake(&sink, &metrics);
    AuditWebhookOptions options = MutualTlsOn(*pki);
    options.allowed_client_names = allowed;
    AuditWebhookServer server(options, &intake);
    auto port = server.Start();
    ASSERT_TRUE(port.ok()) << port.status();
    auto res =
        testing::PostWithClientCert(*pki, *by_san, *port, "/audit-webhook", EventList(kUpdate));
    ASSERT_TRUE(res) << httplib::to_string(res.error());
    EXPECT_EQ(res->status, want) << allowed[0] << ": " << res->body;
    server.Stop();
  }
  AuditWebhookOptions none = MutualTlsOn(*pki);
  none.allowed_client_names = {};
  RecordingSink sink;
  runtime::MetricsRegistry metrics;
  AuditIntake intake(&sink, &metrics);
  AuditWebhookServer server(none, &intake);
  EXPECT_FALSE(server.Start().ok());
}

TEST(AuditIntakeTest, OneBadEventSkipsOnlyThatEvent) {
  RecordingSink sink;
  runtime::MetricsRegistry metrics;
  AuditIntakeOptions options;
  options.limits.max_object_depth = 4;
  options.limits.max_event_bytes = 4096;
  AuditIntake intake(&sink, &metrics, nullptr, options);
  const std::string items = absl::StrJoin(
      {Update("a-1", "one"), Update("a-2", "deep", Nested(5)),
       Update("a-3", "big", absl::StrCat(R"({"data":")", std::string(8192, 'x'), R"("})")),
       Update("a-4", "bad\xff"), Update("a-5", "five", Nested(4))},
      ",");
  AuditResponse r = intake.Handle("POST", "/audit-webhook", EventList(items));
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_TRUE(absl::StrContains(r.body, "3 event(s) refused")) << r.body;
  EXPECT_EQ(sink.Names(), (std::vector<std::string>{"one", "five"}));
  const std::string text = metrics.RenderText();
  for (const char* reason : {"too_deep", "too_large", "malformed"}) {
    EXPECT_TRUE(absl::StrContains(
        text, absl::StrCat("reverser_materializer_audit_events_refused_total{reason=\"", reason,
                           "\"} 1")))
        << reason << "\n"
        << text;
  }
  EXPECT_TRUE(absl::StrContains(text,
                                "outcome=\"queued\",category=\"accepted\",group=\"\","
                                "version=\"v1\",resource=\"configmaps\",verb=\"update\"} 2"))
      << text;
}

TEST(AuditIntakeTest, ALongListIsWrittenInRoundsAndAFailedRoundAnswers500) {
  AuditIntakeOptions options;
  options.write_round_facts = 10;
  std::vector<std::string> events;
  for (int i = 0; i < 35; ++i)
    events.push_back(Update(absl::StrCat("a-", i), absl::StrCat("cm-", i)));
  const std::string body = EventList(absl::StrJoin(events, ","));
  {
    RecordingSink sink;
    runtime::MetricsRegistry metrics;
    AuditIntake intake(&sink, &metrics, nullptr, options);
    AuditResponse r = intake.Handle("POST", "/audit-webhook", body);
    EXPECT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(sink.written.size(), 35u);
    EXPECT_EQ(sink.writes, 4);  // 10 + 10 + 10 + 5: memory holds one round, not the list
  }
  RecordingSink sink;
  sink.fail_from_write = 2;
  runtime::MetricsRegistry metrics;
  AuditIntake intake(&sink, &metrics, nullptr, options);
  AuditResponse r = intake.Handle("POST", "/audit-webhook", body);
  EXPECT_EQ(r.status, 500);   // the API server resends; the first round's facts are keyed
  EXPECT_EQ(sink.writes, 2);  // reading stopped at the failure
  EXPECT_TRUE(absl::StrContains(metrics.RenderText(),
                                "outcome=\"write_error\",category=\"error\",group=\"\","
                                "version=\"v1\",resource=\"configmaps\",verb=\"update\"} 10"));
}

TEST(AuditIntakeTest, BrokenFramingRefusesTheListAndRecordsNothing) {
  RecordingSink sink;
  runtime::MetricsRegistry metrics;
  AuditIntake intake(&sink, &metrics);
  AuditResponse r = intake.Handle("POST", "/audit-webhook",
                                  EventList(Update("a-1", "one") + " " + Update("a-2", "two")));
  EXPECT_EQ(r.status, 400);
  EXPECT_TRUE(sink.written.empty());
  EXPECT_TRUE(absl::StrContains(
      metrics.RenderText(),
      "reverser_materializer_audit_bodies_refused_total{reason=\"malformed\"} 1"));
}

// Plain HTTP on a free loopback port: for tests of the server's own limits, not of its TLS.
AuditWebhookOptions PlainLoopbackOptions() {
  AuditWebhookOptions options;
  options.listen_address = "127.0.0.1";
  options.port = 0;
  options.insecure = true;
  return options;
}

// A client that stops in the middle of its request is answered once the read timeout passes and
// disconnected once the idle timeout does, so it holds a worker thread no longer than those.
TEST(AuditWebhookServerTest, AClientThatStopsSendingIsDisconnected) {
  RecordingSink sink;
  runtime::MetricsRegistry metrics;
  AuditIntake intake(&sink, &metrics);
  AuditWebhookOptions options = PlainLoopbackOptions();
  options.read_timeout = absl::Seconds(1);
  options.idle_timeout = absl::Seconds(1);  // after the read timeout's 400, nothing holds it open
  AuditWebhookServer server(options, &intake);
  auto port = server.Start();
  ASSERT_TRUE(port.ok()) << port.status();
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(*port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  const std::string partial = "POST /audit-webhook HTTP/1.1\r\nHost: x\r\nContent-Le";
  ASSERT_EQ(write(fd, partial.data(), partial.size()), static_cast<ssize_t>(partial.size()));
  // The server may answer the torn request first; then it closes the connection.
  std::string answer;
  char chunk[512];
  ssize_t n;
  while ((n = read(fd, chunk, sizeof(chunk))) > 0) answer.append(chunk, static_cast<size_t>(n));
  EXPECT_EQ(n, 0) << "the server closes the connection";
  EXPECT_FALSE(absl::StrContains(answer, "200 OK")) << answer;
  close(fd);
  EXPECT_TRUE(sink.Names().empty());
}

TEST(AuditWebhookServerTest, ABodyOverTheLimitRecordsWhatCameBeforeIt) {
  RecordingSink sink;
  runtime::MetricsRegistry metrics;
  AuditIntake intake(&sink, &metrics);
  AuditWebhookOptions options = PlainLoopbackOptions();
  options.max_body_bytes = 64 * 1024;
  AuditWebhookServer server(options, &intake);
  auto port = server.Start();
  ASSERT_TRUE(port.ok()) << port.status();
  std::vector<std::string> events;
  for (int i = 0; i < 400; ++i)
    events.push_back(Update(absl::StrCat("a-", i), absl::StrCat("cm-", i)));
  const std::string body = EventList(absl::StrJoin(events, ","));
  ASSERT_GT(body.size(), 2 * options.max_body_bytes);
  // Chunked: no length announced, so the limit is met while reading.
  httplib::Client client("127.0.0.1", *port);
  auto res = client.Post(
      "/audit-webhook",
      [&](size_t offset, httplib::DataSink& sink_out) {
        if (offset >= body.size()) {
          sink_out.done();
          return true;
        }
        return sink_out.write(body.data() + offset, std::min<size_t>(4096, body.size() - offset));
      },
      "application/json");
  if (res) EXPECT_EQ(res->status, 413);
  // The events read before the limit are recorded; the rest is not.
  const size_t recorded = sink.Names().size();
  EXPECT_GT(recorded, 100u);
  EXPECT_LT(recorded, 400u);
  EXPECT_TRUE(absl::StrContains(
      metrics.RenderText(),
      "reverser_materializer_audit_bodies_refused_total{reason=\"too_large\"} 1"));
  server.Stop();
}

}  // namespace
}  // namespace reverser::materializer
