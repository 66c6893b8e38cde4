#include "libs/kube/api_error.h"

#include <gtest/gtest.h>

#include "tests/fixtures/runfiles.h"

namespace reverser::kube {
namespace {

using reverser::testing::ReadTestdata;

ApiError ParseFile(int code, const std::string& name, absl::string_view retry_after = "") {
  std::string body = ReadTestdata("k8s/handmade/status/" + name);
  EXPECT_FALSE(body.empty()) << name;
  return ParseApiError(code, body, retry_after);
}

TEST(ApiErrorTest, ParsesConflictStatus) {
  ApiError error = ParseFile(409, "409-conflict.json");
  EXPECT_EQ(error.code, 409);
  EXPECT_EQ(error.reason, "Conflict");
  EXPECT_TRUE(error.IsConflict());
  EXPECT_FALSE(error.IsAlreadyExists());
  EXPECT_EQ(error.name, "a");
  EXPECT_EQ(error.kind, "configmaps");
  EXPECT_NE(error.message.find("the object has been modified"), std::string::npos);
}

TEST(ApiErrorTest, ParsesAlreadyExistsAndNotFound) {
  EXPECT_TRUE(ParseFile(409, "409-alreadyexists.json").IsAlreadyExists());
  ApiError not_found = ParseFile(404, "404-notfound-grouped.json");
  EXPECT_TRUE(not_found.IsNotFound());
  EXPECT_EQ(not_found.reason, "NotFound");
  EXPECT_TRUE(ParseFile(404, "404-path-not-found.json").IsNotFound());
}

TEST(ApiErrorTest, ParsesExpiredAndInvalid) {
  EXPECT_TRUE(ParseFile(410, "410-list-expired.json").IsExpired());
  EXPECT_TRUE(ParseFile(410, "410-continue-expired-inconsistent.json").IsExpired());
  ApiError invalid = ParseFile(422, "422-invalid-sendInitialEvents.json");
  EXPECT_TRUE(invalid.IsInvalid());
  EXPECT_EQ(invalid.reason, "Invalid");
  ASSERT_FALSE(invalid.causes.empty());
  EXPECT_FALSE(invalid.causes[0].field.empty());
}

TEST(ApiErrorTest, ParsesTooLargeResourceVersionWithRetryAfter) {
  ApiError error = ParseFile(504, "504-too-large-resource-version.json");
  EXPECT_TRUE(error.IsResourceVersionTooLarge());
  ASSERT_TRUE(error.retry_after.has_value());
  EXPECT_EQ(*error.retry_after, absl::Seconds(1));
  EXPECT_TRUE(error.IsRetryable());
}

TEST(ApiErrorTest, PlainTextTooManyRequestsTakesRetryAfterHeader) {
  // The APF rejection is text/plain; the capture holds a raw HTTP response, the body is the
  // last line.
  std::string raw = ReadTestdata("k8s/handmade/status/429-apf-reject.txt");
  ASSERT_FALSE(raw.empty());
  std::string body = raw.substr(raw.find("\n\n") + 2);
  ApiError error = ParseApiError(429, body, "1");
  EXPECT_EQ(error.code, 429);
  EXPECT_TRUE(error.IsTooManyRequests());
  EXPECT_TRUE(error.IsRetryable());
  EXPECT_EQ(error.message, "Too many requests, please try again later.");
  EXPECT_EQ(error.retry_after, absl::Seconds(1));
}

TEST(ApiErrorTest, WatchCacheNotReadyIsRetryable) {
  ApiError error = ParseFile(429, "429-watchcache-not-ready.json");
  EXPECT_TRUE(error.IsRetryable());
  EXPECT_TRUE(error.retry_after.has_value());
}

TEST(ApiErrorTest, GarbageBodiesNeverFail) {
  for (absl::string_view body : {"", "{", "<html>bad gateway</html>", "[1,2]", "{\"kind\":7}",
                                 "{\"kind\":\"Status\",\"code\":\"x\",\"details\":[]}"}) {
    ApiError error = ParseApiError(502, body, "soon");
    EXPECT_EQ(error.code, 502) << body;
    EXPECT_FALSE(error.retry_after.has_value()) << body;
  }
}

TEST(ApiErrorTest, RoundTripsThroughAbslStatus) {
  ApiError error = ParseFile(504, "504-too-large-resource-version.json");
  absl::Status status = ToStatus(error);
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded);
  std::optional<ApiError> back = GetApiError(status);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->code, 504);
  EXPECT_EQ(back->reason, "Timeout");
  EXPECT_EQ(back->message, error.message);
  EXPECT_TRUE(back->IsResourceVersionTooLarge());
  EXPECT_EQ(back->retry_after, absl::Seconds(1));

  EXPECT_TRUE(IsApiConflict(ToStatus(ParseFile(409, "409-conflict.json"))));
  EXPECT_TRUE(IsApiAlreadyExists(ToStatus(ParseFile(409, "409-alreadyexists.json"))));
  EXPECT_EQ(ToStatus(ParseFile(409, "409-alreadyexists.json")).code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_TRUE(IsApiNotFound(ToStatus(ParseFile(404, "404-notfound-core.json"))));
  EXPECT_FALSE(IsApiNotFound(absl::NotFoundError("plain")));
  EXPECT_FALSE(GetApiError(absl::OkStatus()).has_value());
}

TEST(ApiErrorTest, ParsesWatchErrorEventObject) {
  std::optional<ApiError> error = ParseStatusObject(
      R"j({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",)j"
      R"j("message":"too old resource version: 1000 (1187)","reason":"Expired","code":410})j");
  ASSERT_TRUE(error.has_value());
  EXPECT_TRUE(error->IsExpired());
  EXPECT_FALSE(ParseStatusObject(R"({"kind":"ConfigMap"})").has_value());
  EXPECT_FALSE(ParseStatusObject("not json").has_value());
}

}  // namespace
}  // namespace reverser::kube
