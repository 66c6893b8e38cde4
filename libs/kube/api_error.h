#pragma once

// Errors from the Kubernetes API server as a typed value.
//
// The server answers failures with a `Status` object (kind Status, apiVersion v1) whose `code`
// equals the HTTP status. Some rejections are not JSON at all (API priority and fairness sends
// `429 text/plain` with Retry-After). ApiError captures both; it travels inside an absl::Status
// as a payload so library signatures stay `absl::StatusOr<T>` and callers that care can recover
// the server's reason with GetApiError().

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace reverser::kube {

// One entry of Status.details.causes.
struct StatusCause {
  std::string reason;  // e.g. "FieldValueInvalid", "ResourceVersionTooLarge"
  std::string message;
  std::string field;
};

struct ApiError {
  int code = 0;         // HTTP status (== Status.code when the body was a Status)
  std::string reason;   // Status.reason: "NotFound", "Expired", "Conflict", ... ("" if unknown)
  std::string message;  // Status.message, or the text body
  std::string name;     // details.name
  std::string kind;     // details.kind
  std::vector<StatusCause> causes;
  // From Status.details.retryAfterSeconds or the Retry-After header (header wins).
  std::optional<absl::Duration> retry_after;

  bool IsNotFound() const { return code == 404; }
  bool IsAlreadyExists() const { return code == 409 && reason == "AlreadyExists"; }
  bool IsConflict() const { return code == 409 && reason != "AlreadyExists"; }
  bool IsInvalid() const { return code == 422; }
  // 410 Expired, or Gone from pre-1.18 servers: the resourceVersion or continue token is too old.
  bool IsExpired() const { return code == 410 || reason == "Expired" || reason == "Gone"; }
  bool IsTooManyRequests() const { return code == 429; }
  // 504 with cause ResourceVersionTooLarge: the watch cache is behind the requested RV.
  bool IsResourceVersionTooLarge() const;
  // Whether a retry of the same request may succeed (429, 503, 504 with Retry-After, 500 with
  // Retry-After), as client-go's retry logic decides.
  bool IsRetryable() const;

  // "configmaps \"x\" not found (404 NotFound)".
  std::string ToString() const;
};

// Parses a failure response. `body` may be a JSON Status, any other JSON, text or empty;
// `retry_after_header` is the raw Retry-After header value ("" if absent). Never fails: unknown
// bodies become the message.
ApiError ParseApiError(int http_status, absl::string_view body,
                       absl::string_view retry_after_header = "");

// Parses a Status object (the body of an error response, or a watch ERROR event's object).
// Returns nullopt when `status_json` is not a Status.
std::optional<ApiError> ParseStatusObject(absl::string_view status_json);

// The absl code matching an HTTP status (404 → NotFound, 409 → AlreadyExists/Aborted, ...).
absl::StatusCode StatusCodeForHttp(int http_status, absl::string_view reason);

// Wraps an ApiError into an absl::Status carrying it as a payload.
absl::Status ToStatus(const ApiError& error);

// The ApiError inside a status made by ToStatus, or nullopt.
std::optional<ApiError> GetApiError(const absl::Status& status);

// Predicates over statuses made by ToStatus (named Api* to stay clear of absl::IsNotFound).
bool IsApiNotFound(const absl::Status& status);
bool IsApiAlreadyExists(const absl::Status& status);
bool IsApiConflict(const absl::Status& status);
bool IsApiExpired(const absl::Status& status);
bool IsApiInvalid(const absl::Status& status);

}  // namespace reverser::kube
