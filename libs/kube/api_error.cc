#include "libs/kube/api_error.h"

#include <nlohmann/json.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace reverser::kube {
namespace {

using nlohmann::json;

constexpr char kPayloadUrl[] = "type.reverser.dev/kube.ApiError";

std::string StringField(const json& object, const char* key) {
  auto it = object.find(key);
  if (it == object.end() || !it->is_string()) return "";
  return it->get<std::string>();
}

std::optional<absl::Duration> ParseRetryAfterHeader(absl::string_view value) {
  value = absl::StripAsciiWhitespace(value);
  int64_t seconds = 0;
  // Only delta-seconds: the API server never sends an HTTP-date here.
  if (value.empty() || !absl::SimpleAtoi(value, &seconds) || seconds < 0) return std::nullopt;
  return absl::Seconds(seconds);
}

ApiError FromStatusJson(const json& status) {
  ApiError error;
  if (auto it = status.find("code"); it != status.end() && it->is_number_integer()) {
    error.code = it->get<int>();
  }
  error.reason = StringField(status, "reason");
  error.message = StringField(status, "message");
  if (auto details = status.find("details"); details != status.end() && details->is_object()) {
    error.name = StringField(*details, "name");
    error.kind = StringField(*details, "kind");
    if (auto it = details->find("retryAfterSeconds"); it != details->end() && it->is_number()) {
      error.retry_after = absl::Seconds(it->get<int64_t>());
    }
    if (auto causes = details->find("causes"); causes != details->end() && causes->is_array()) {
      for (const json& cause : *causes) {
        if (!cause.is_object()) continue;
        error.causes.push_back({StringField(cause, "reason"), StringField(cause, "message"),
                                StringField(cause, "field")});
      }
    }
  }
  return error;
}

bool IsStatusKind(const json& value) {
  return value.is_object() && StringField(value, "kind") == "Status";
}

json ToJson(const ApiError& error) {
  json causes = json::array();
  for (const StatusCause& cause : error.causes) {
    causes.push_back(
        {{"reason", cause.reason}, {"message", cause.message}, {"field", cause.field}});
  }
  json out = {{"code", error.code}, {"reason", error.reason}, {"message", error.message},
              {"name", error.name}, {"kind", error.kind},     {"causes", causes}};
  if (error.retry_after) out["retryAfterMs"] = absl::ToInt64Milliseconds(*error.retry_after);
  return out;
}

}  // namespace

bool ApiError::IsResourceVersionTooLarge() const {
  if (code != 504) return false;
  for (const StatusCause& cause : causes) {
    if (cause.reason == "ResourceVersionTooLarge") return true;
  }
  return false;
}

bool ApiError::IsRetryable() const {
  if (code == 429 || code == 503) return true;
  // client-go retries any response that carries Retry-After (e.g. 500/504 from the cacher).
  return retry_after.has_value() && code >= 500;
}

std::string ApiError::ToString() const {
  std::string text = message.empty() ? absl::StrCat("HTTP ", code) : message;
  return absl::StrCat(text, " (", code, reason.empty() ? "" : " ", reason, ")");
}

std::optional<ApiError> ParseStatusObject(absl::string_view status_json) {
  json parsed = json::parse(status_json.begin(), status_json.end(), nullptr,
                            /*allow_exceptions=*/false);
  if (!IsStatusKind(parsed)) return std::nullopt;
  return FromStatusJson(parsed);
}

ApiError ParseApiError(int http_status, absl::string_view body,
                       absl::string_view retry_after_header) {
  ApiError error;
  json parsed = json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (IsStatusKind(parsed)) {
    error = FromStatusJson(parsed);
  } else {
    // Not a Status: APF's text/plain 429, a proxy's HTML page, or nothing at all.
    error.message = std::string(absl::StripAsciiWhitespace(body.substr(0, 4096)));
  }
  // The HTTP status is authoritative: a Status body without a code still has one.
  if (error.code == 0) error.code = http_status;
  if (auto header = ParseRetryAfterHeader(retry_after_header)) error.retry_after = header;
  return error;
}

absl::StatusCode StatusCodeForHttp(int http_status, absl::string_view reason) {
  switch (http_status) {
    case 400:
    case 422:
      return absl::StatusCode::kInvalidArgument;
    case 401:
      return absl::StatusCode::kUnauthenticated;
    case 403:
      return absl::StatusCode::kPermissionDenied;
    case 404:
      return absl::StatusCode::kNotFound;
    case 409:
      return reason == "AlreadyExists" ? absl::StatusCode::kAlreadyExists
                                       : absl::StatusCode::kAborted;
    case 410:
      return absl::StatusCode::kOutOfRange;
    case 429:
      return absl::StatusCode::kResourceExhausted;
    case 501:
      return absl::StatusCode::kUnimplemented;
    case 503:
      return absl::StatusCode::kUnavailable;
    case 504:
      return absl::StatusCode::kDeadlineExceeded;
    default:
      if (http_status >= 500) return absl::StatusCode::kInternal;
      return absl::StatusCode::kUnknown;
  }
}

absl::Status ToStatus(const ApiError& error) {
  absl::Status status(StatusCodeForHttp(error.code, error.reason), error.ToString());
  status.SetPayload(kPayloadUrl, absl::Cord(ToJson(error).dump()));
  return status;
}

std::optional<ApiError> GetApiError(const absl::Status& status) {
  auto payload = status.GetPayload(kPayloadUrl);  // absl::optional in Debian's abseil
  if (!payload) return std::nullopt;
  json parsed = json::parse(std::string(*payload), nullptr, /*allow_exceptions=*/false);
  if (!parsed.is_object()) return std::nullopt;
  ApiError error;
  error.code = parsed.value("code", 0);
  error.reason = parsed.value("reason", "");
  error.message = parsed.value("message", "");
  error.name = parsed.value("name", "");
  error.kind = parsed.value("kind", "");
  if (auto causes = parsed.find("causes"); causes != parsed.end() && causes->is_array()) {
    for (const json& cause : *causes) {
      error.causes.push_back(
          {cause.value("reason", ""), cause.value("message", ""), cause.value("field", "")});
    }
  }
  if (auto it = parsed.find("retryAfterMs"); it != parsed.end() && it->is_number()) {
    error.retry_after = absl::Milliseconds(it->get<int64_t>());
  }
  return error;
}

bool IsApiNotFound(const absl::Status& status) {
  auto error = GetApiError(status);
  return error && error->IsNotFound();
}
bool IsApiAlreadyExists(const absl::Status& status) {
  auto error = GetApiError(status);
  return error && error->IsAlreadyExists();
}
bool IsApiConflict(const absl::Status& status) {
  auto error = GetApiError(status);
  return error && error->IsConflict();
}
bool IsApiExpired(const absl::Status& status) {
  auto error = GetApiError(status);
  return error && error->IsExpired();
}
bool IsApiInvalid(const absl::Status& status) {
  auto error = GetApiError(status);
  return error && error->IsInvalid();
}

}  // namespace reverser::kube
