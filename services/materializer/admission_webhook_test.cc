#include "services/materializer/admission_webhook.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <map>
#include <nlohmann/json.hpp>

namespace reverser::materializer {
namespace {

// Records what the reviewer stores (Redis's part is covered by author_fact_store_test and the
// e2e CommitRequest tests).
class RecordingSink final : public CommandAuthorSink {
 public:
  absl::Status RecordCommandAuthor(absl::string_view uid,
                                   const redisstore::CommandAuthor& author) override {
    if (fail) return absl::UnavailableError("redis down");
    recorded[std::string(uid)] = author.author;
    return absl::OkStatus();
  }
  std::map<std::string, std::string> recorded;
  bool fail = false;
};

nlohmann::json Review(const std::string& resource, const std::string& operation,
                      bool dry_run = false) {
  return {{"apiVersion", "admission.k8s.io/v1"},
          {"kind", "AdmissionReview"},
          {"request",
           {{"uid", "req-1"},
            {"operation", operation},
            {"resource",
             {{"group", "configbutler.ai"}, {"version", "v1alpha3"}, {"resource", resource}}},
            {"namespace", "team"},
            {"name", "save"},
            {"dryRun", dry_run},
            {"userInfo", {{"username", "alice"}, {"groups", {"devs"}}}},
            {"object", {{"metadata", {{"name", "save"}, {"uid", "cr-uid-1"}}}}}}}};
}

bool AllowedFor(const AdmissionAnswer& answer, const std::string& uid) {
  nlohmann::json body = nlohmann::json::parse(answer.body, nullptr, false);
  return answer.status == 200 && body["kind"] == "AdmissionReview" &&
         body["response"]["uid"] == uid && body["response"]["allowed"] == true;
}

class AdmissionReviewerTest : public ::testing::Test {
 protected:
  RecordingSink sink_;
  runtime::MetricsRegistry metrics_;
  AdmissionReviewer reviewer_{&sink_, &core::Clock::Real(), &metrics_};
};

TEST_F(AdmissionReviewerTest, ACommitRequestCreateRecordsItsAuthorByObjectUid) {
  EXPECT_TRUE(AllowedFor(reviewer_.Review(Review("commitrequests", "CREATE").dump()), "req-1"));
  EXPECT_EQ(sink_.recorded, (std::map<std::string, std::string>{{"cr-uid-1", "alice"}}));
}

TEST_F(AdmissionReviewerTest, OtherRequestsAndDryRunsAreAllowedAndRecordNothing) {
  EXPECT_TRUE(AllowedFor(reviewer_.Review(Review("commitrequests", "UPDATE").dump()), "req-1"));
  EXPECT_TRUE(AllowedFor(reviewer_.Review(Review("gittargets", "CREATE").dump()), "req-1"));
  EXPECT_TRUE(
      AllowedFor(reviewer_.Review(Review("commitrequests", "CREATE", true).dump()), "req-1"));
  nlohmann::json no_uid = Review("commitrequests", "CREATE");
  no_uid["request"]["object"]["metadata"].erase("uid");
  EXPECT_TRUE(AllowedFor(reviewer_.Review(no_uid.dump()), "req-1"));
  EXPECT_TRUE(sink_.recorded.empty());
}

TEST_F(AdmissionReviewerTest, AStoreFailureStillAllows) {
  sink_.fail = true;
  EXPECT_TRUE(AllowedFor(reviewer_.Review(Review("commitrequests", "CREATE").dump()), "req-1"));
}

TEST_F(AdmissionReviewerTest, BadBodiesAreRefusedWithAReasonAndCounted) {
  for (const std::string& body :
       {std::string("not json"), std::string(R"({"kind":"Other"})"),
        std::string(R"({"kind":"AdmissionReview","request":{}})"), std::string(20000, '[')}) {
    AdmissionAnswer answer = reviewer_.Review(body);
    EXPECT_EQ(answer.status, 400) << body.substr(0, 40);
    EXPECT_TRUE(nlohmann::json::parse(answer.body, nullptr, false).contains("error"));
  }
  EXPECT_EQ(metrics_
                .GetCounter("reverser_materializer_admission_reviews_total", "",
                            {{"outcome", "malformed"}})
                .Value(),
            3);
  EXPECT_EQ(metrics_
                .GetCounter("reverser_materializer_admission_reviews_total", "",
                            {{"outcome", "too_deep"}})
                .Value(),
            1);
}

TEST(AdmissionWebhookServerTest, ServesReviewsOverHttpAndRefusesLongBodies) {
  RecordingSink sink;
  runtime::MetricsRegistry metrics;
  AdmissionReviewer reviewer(&sink, &core::Clock::Real(), &metrics);
  AdmissionWebhookOptions options;
  options.listen_address = "127.0.0.1";
  options.port = 0;
  options.insecure = true;
  options.max_body_bytes = 4096;
  AdmissionWebhookServer server(options, &reviewer);
  absl::StatusOr<int> port = server.Start();
  ASSERT_TRUE(port.ok()) << port.status();
  httplib::Client client("127.0.0.1", *port);
  auto answer =
      client.Post(kAdmissionPath, Review("commitrequests", "CREATE").dump(), "application/json");
  ASSERT_TRUE(answer);
  EXPECT_EQ(answer->status, 200);
  EXPECT_EQ(sink.recorded.count("cr-uid-1"), 1u);
  auto long_body = client.Post(kAdmissionPath, std::string(8192, ' '), "application/json");
  ASSERT_TRUE(long_body);
  EXPECT_EQ(long_body->status, 413);
  server.Stop();
}

TEST(AdmissionWebhookServerTest, TlsIsRequiredUnlessInsecure) {
  AdmissionReviewer reviewer(nullptr, &core::Clock::Real(), nullptr);
  AdmissionWebhookServer server(AdmissionWebhookOptions{}, &reviewer);
  absl::StatusOr<int> port = server.Start();
  ASSERT_FALSE(port.ok());
  EXPECT_NE(port.status().message().find("--admission_tls_cert"), std::string::npos);
}

}  // namespace
}  // namespace reverser::materializer
