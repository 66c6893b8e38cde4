#include "services/materializer/admission_webhook.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <map>
#include <nlohmann/json.hpp>
#include <vector>

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

// Change facts (attribution from admission): what the reviewer hands the store.
class RecordingChanges final : public ChangeAuthorSink {
 public:
  absl::Status RecordAdmission(const redisstore::AdmissionFact& admitted) override {
    if (admitted.fact.uid.empty()) return absl::InvalidArgumentError("no uid");
    if (fail) return absl::UnavailableError("redis down");
    recorded.push_back(admitted);
    return absl::OkStatus();
  }
  std::vector<redisstore::AdmissionFact> recorded;
  bool fail = false;
};

nlohmann::json ChangeReview(const std::string& operation, const std::string& subresource = "") {
  nlohmann::json object = {
      {"metadata", {{"name", "web"}, {"uid", "d-1"}, {"resourceVersion", "8"}}}};
  nlohmann::json request = {
      {"uid", "req-7"},
      {"operation", operation},
      {"resource", {{"group", "apps"}, {"version", "v1"}, {"resource", "deployments"}}},
      {"namespace", "shop"},
      {"name", "web"},
      {"dryRun", false},
      {"userInfo", {{"username", "system:serviceaccount:ci:deployer"}}}};
  if (!subresource.empty()) request["subResource"] = subresource;
  if (operation != "DELETE") request["object"] = object;
  if (operation != "CREATE") request["oldObject"] = object;
  if (operation == "UPDATE") request["object"]["metadata"].erase("resourceVersion");
  return {{"apiVersion", "admission.k8s.io/v1"}, {"kind", "AdmissionReview"}, {"request", request}};
}

class ChangeFactsTest : public ::testing::Test {
 protected:
  double Outcome(const std::string& outcome) {
    return metrics_
        .GetCounter("reverser_materializer_admission_reviews_total", "", {{"outcome", outcome}})
        .Value();
  }
  RecordingSink commands_;
  RecordingChanges changes_;
  runtime::MetricsRegistry metrics_;
  AdmissionReviewer reviewer_{&commands_, &core::Clock::Real(), &metrics_, &changes_};
};

TEST_F(ChangeFactsTest, EachChangeIsRecordedByWhatItsStreamEntryCanName) {
  for (const char* operation : {"CREATE", "UPDATE", "DELETE"}) {
    EXPECT_TRUE(AllowedFor(reviewer_.Review(ChangeReview(operation).dump()), "req-7"));
  }
  ASSERT_EQ(changes_.recorded.size(), 3u);
  const redisstore::AdmissionFact& created = changes_.recorded[0];
  EXPECT_EQ(created.change, redisstore::AdmissionChange::kCreate);
  EXPECT_EQ(created.request_uid, "req-7");
  EXPECT_EQ(created.fact.group_resource, "apps/deployments");
  EXPECT_EQ(created.fact.namespace_, "shop");
  EXPECT_EQ(created.fact.name, "web");
  EXPECT_EQ(created.fact.uid, "d-1");
  EXPECT_EQ(created.fact.verb, "create");
  EXPECT_EQ(created.fact.author, "system:serviceaccount:ci:deployer");
  EXPECT_TRUE(created.fact.is_service_account);
  EXPECT_FALSE(created.fact.stage_timestamp.empty());
  // An update by the version it was admitted against; a delete by the old object's uid.
  EXPECT_EQ(changes_.recorded[1].change, redisstore::AdmissionChange::kUpdate);
  EXPECT_EQ(changes_.recorded[1].old_resource_version, "8");
  EXPECT_EQ(changes_.recorded[2].change, redisstore::AdmissionChange::kDelete);
  EXPECT_EQ(changes_.recorded[2].fact.uid, "d-1");
  EXPECT_EQ(Outcome("change_recorded"), 3);
  EXPECT_TRUE(commands_.recorded.empty());
}

TEST_F(ChangeFactsTest, ScaleCountsStatusDryRunsAndConnectDoNot) {
  EXPECT_TRUE(AllowedFor(reviewer_.Review(ChangeReview("UPDATE", "scale").dump()), "req-7"));
  ASSERT_EQ(changes_.recorded.size(), 1u);
  EXPECT_EQ(changes_.recorded[0].fact.subresource, "scale");
  EXPECT_EQ(changes_.recorded[0].fact.group_resource, "apps/deployments");
  EXPECT_TRUE(AllowedFor(reviewer_.Review(ChangeReview("UPDATE", "status").dump()), "req-7"));
  EXPECT_TRUE(AllowedFor(reviewer_.Review(ChangeReview("CONNECT").dump()), "req-7"));
  nlohmann::json dry = ChangeReview("UPDATE");
  dry["request"]["dryRun"] = true;
  EXPECT_TRUE(AllowedFor(reviewer_.Review(dry.dump()), "req-7"));
  EXPECT_EQ(changes_.recorded.size(), 1u);
  EXPECT_EQ(Outcome("dry_run"), 1);
  // A CommitRequest create is still a command author, not a change.
  EXPECT_TRUE(AllowedFor(reviewer_.Review(Review("commitrequests", "CREATE").dump()), "req-1"));
  EXPECT_EQ(commands_.recorded.size(), 1u);
  EXPECT_EQ(changes_.recorded.size(), 1u);
}

TEST_F(ChangeFactsTest, FailuresAndUnkeyableChangesStillAllowAndAreCounted) {
  changes_.fail = true;
  EXPECT_TRUE(AllowedFor(reviewer_.Review(ChangeReview("UPDATE").dump()), "req-7"));
  nlohmann::json no_uid = ChangeReview("CREATE");
  no_uid["request"]["object"]["metadata"].erase("uid");
  EXPECT_TRUE(AllowedFor(reviewer_.Review(no_uid.dump()), "req-7"));
  EXPECT_EQ(Outcome("change_record_failed"), 1);
  EXPECT_EQ(Outcome("change_unkeyable"), 1);
}

TEST_F(AdmissionReviewerTest, WithoutChangeFactsOtherTypesRecordNothing) {
  EXPECT_TRUE(AllowedFor(reviewer_.Review(ChangeReview("UPDATE").dump()), "req-7"));
  EXPECT_TRUE(sink_.recorded.empty());
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
