#include "libs/membership/lease.h"

#include <gtest/gtest.h>

#include "libs/membership/timing.h"

namespace reverser::membership {
namespace {

using nlohmann::json;

TEST(MicroTimeTest, FormatsAsGoDoesAndParsesBack) {
  absl::Time t = absl::FromUnixMicros(1'700'000'000'123'456);
  EXPECT_EQ(FormatMicroTime(t), "2023-11-14T22:13:20.123456Z");
  EXPECT_EQ(FormatMicroTime(absl::FromUnixSeconds(1'700'000'000)), "2023-11-14T22:13:20.000000Z");
  EXPECT_EQ(*ParseMicroTime("2023-11-14T22:13:20.123456Z"), t);
  EXPECT_EQ(*ParseMicroTime("2023-11-14T23:13:20.123456+01:00"), t);
  EXPECT_EQ(*ParseMicroTime("2023-11-14T22:13:20Z"), absl::FromUnixSeconds(1'700'000'000));
  EXPECT_FALSE(ParseMicroTime("yesterday").ok());
  EXPECT_FALSE(ParseMicroTime("").ok());
}

MemberIdentity Identity() { return {"splicer", "splicer-0", "reverser", "10.0.0.1:9000"}; }

TEST(LeaseTest, IdentityValidation) {
  EXPECT_TRUE(Identity().Validate().ok());
  EXPECT_EQ(Identity().LeaseName(), "splicer-splicer-0");
  MemberIdentity bad = Identity();
  bad.service = "Splicer";
  EXPECT_FALSE(bad.Validate().ok());
  bad = Identity();
  bad.replica_id = "";
  EXPECT_FALSE(bad.Validate().ok());
  bad = Identity();
  bad.replica_id = "a/b";
  EXPECT_FALSE(bad.Validate().ok());
  bad = Identity();
  bad.namespace_ = "";
  EXPECT_FALSE(bad.Validate().ok());
  bad = Identity();
  bad.service = std::string(64, 'a');
  EXPECT_FALSE(bad.Validate().ok());
}

TEST(LeaseTest, BodyAndRecordRoundTrip) {
  absl::Time acquire = absl::FromUnixMicros(1'700'000'000'000'001);
  absl::Time renew = acquire + absl::Seconds(4);
  json body = LeaseBody(Identity(), 15, acquire, renew, 2, "41");
  EXPECT_EQ(body["apiVersion"], "coordination.k8s.io/v1");
  EXPECT_EQ(body["kind"], "Lease");
  EXPECT_EQ(body["metadata"]["labels"][kMembershipLabel], "splicer");
  EXPECT_EQ(body["metadata"]["resourceVersion"], "41");
  EXPECT_EQ(body["spec"]["renewTime"], "2023-11-14T22:13:24.000001Z");
  auto record = ParseLease(body);
  ASSERT_TRUE(record.ok()) << record.status();
  EXPECT_EQ(record->name, "splicer-splicer-0");
  EXPECT_EQ(record->namespace_, "reverser");
  EXPECT_EQ(record->service, "splicer");
  EXPECT_EQ(record->address, "10.0.0.1:9000");
  EXPECT_EQ(record->holder, "splicer-0");
  EXPECT_EQ(record->lease_duration_seconds, 15);
  EXPECT_EQ(record->acquire_time, acquire);
  EXPECT_EQ(record->renew_time, renew);
  EXPECT_EQ(record->lease_transitions, 2);
  EXPECT_TRUE(record->Held());
  EXPECT_FALSE(
      LeaseBody(Identity(), 15, acquire, renew, 0, "")["metadata"].contains("resourceVersion"));
}

TEST(LeaseTest, HostileOrForeignLeasesAreReadAsFarAsPossible) {
  EXPECT_FALSE(ParseLease(json::array()).ok());
  EXPECT_FALSE(ParseLease(json::object()).ok());
  EXPECT_FALSE(ParseLease(json{{"metadata", "x"}}).ok());
  EXPECT_FALSE(ParseLease(json{{"metadata", {{"name", 3}}}}).ok());
  // Wrong types everywhere: read, not held, no exception.
  json odd = {
      {"metadata", {{"name", "x"}, {"labels", "no"}, {"annotations", {{kAddressAnnotation, 5}}}}},
      {"spec",
       {{"holderIdentity", 7},
        {"leaseDurationSeconds", "15"},
        {"renewTime", "not a time"},
        {"leaseTransitions", 1.5}}}};
  auto record = ParseLease(odd);
  ASSERT_TRUE(record.ok());
  EXPECT_EQ(record->holder, "");
  EXPECT_EQ(record->lease_duration_seconds, 0);
  EXPECT_FALSE(record->renew_time.has_value());
  EXPECT_EQ(record->renew_time_text, "");
  EXPECT_FALSE(record->Held());
  // No spec at all (a Lease someone created empty).
  record = ParseLease(json{{"metadata", {{"name", "x"}}}});
  ASSERT_TRUE(record.ok());
  EXPECT_FALSE(record->Held());
  // Being deleted.
  json deleting = LeaseBody(Identity(), 15, absl::UnixEpoch(), absl::UnixEpoch(), 0, "");
  deleting["metadata"]["deletionTimestamp"] = "2023-11-14T22:13:20Z";
  EXPECT_FALSE(ParseLease(deleting)->Held());
}

TEST(TimingTest, ClientGoOrdering) {
  EXPECT_TRUE(MembershipTiming{}.Validate().ok());
  EXPECT_EQ(MembershipTiming{}.LeaseDurationSeconds(), 15);
  MembershipTiming t;
  t.renew_deadline = t.lease_duration;
  EXPECT_FALSE(t.Validate().ok());
  t = {};
  t.renew_period = t.renew_deadline;
  EXPECT_FALSE(t.Validate().ok());
  t = {};
  t.renew_period = absl::ZeroDuration();
  EXPECT_FALSE(t.Validate().ok());
  t = {};
  t.lease_duration = absl::Milliseconds(15500);
  EXPECT_FALSE(t.Validate().ok());
  t = {};
  t.grace = absl::Seconds(-1);
  EXPECT_FALSE(t.Validate().ok());
}

}  // namespace
}  // namespace reverser::membership
