#pragma once

// Kubernetes `Status` failures: the exact codes, reasons and message texts kube-apiserver sends
// (staging/src/k8s.io/apimachinery/pkg/api/errors/errors.go).

#include <cstdint>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "nlohmann/json.hpp"

namespace reverser::kubesim {

using Json = nlohmann::json;

struct StatusCause {
  std::string reason;  // e.g. "FieldValueInvalid"
  std::string message;
  std::string field;
};

// One failed API request, rendered as a `Status` body with HTTP status == code.
struct ApiError {
  int code = 500;
  std::string reason;  // "NotFound", "AlreadyExists", ... (empty for 500 without reason)
  std::string message;
  Json details;                 // null: no details
  int retry_after_seconds = 0;  // >0: Retry-After header and details.retryAfterSeconds

  Json ToStatus() const;
  // The body as kube-apiserver writes it (Go field order).
  std::string StatusBody() const;
  nlohmann::ordered_json ToOrderedStatus() const;
};

// The identity of the resource an error talks about. `qualified_resource` is "configmaps" or
// "deployments.apps"; `group`/`kind` feed `details`.
struct ErrorSubject {
  std::string group;
  std::string resource;  // plural
  std::string kind;      // e.g. "ConfigMap"

  std::string QualifiedResource() const;  // "deployments.apps"
  std::string QualifiedKind() const;      // "Deployment.apps"
};

ApiError NotFound(const ErrorSubject& subject, const std::string& name);
ApiError PathNotFound();  // "the server could not find the requested resource"
ApiError AlreadyExists(const ErrorSubject& subject, const std::string& name);
ApiError Conflict(const ErrorSubject& subject, const std::string& name, const std::string& detail);
ApiError ModifiedConflict(const ErrorSubject& subject, const std::string& name);
ApiError Invalid(const ErrorSubject& subject, const std::string& name,
                 const std::vector<StatusCause>& causes);
// 422 on ListOptions.meta.k8s.io with the given field errors ("field: Type: detail").
ApiError InvalidListOptions(const std::vector<StatusCause>& causes);
ApiError BadRequest(const std::string& message);
ApiError MethodNotSupported(const ErrorSubject& subject, const std::string& action);
// The router's 405 for a method a path does not serve (GET on tokenreviews): "the server does
// not allow this method on the requested resource", empty details.
ApiError MethodNotAllowed();
ApiError UnsupportedMediaType(const std::string& accepted);
ApiError RequestEntityTooLarge(size_t limit);
ApiError Gone(const std::string& message);  // 410 Expired
ApiError Forbidden(const ErrorSubject& subject, const std::string& name, const std::string& why);
ApiError Unauthorized();
ApiError TooManyRequests(int retry_after_seconds);
ApiError ServiceUnavailable(const std::string& message, int retry_after_seconds);
ApiError InternalError(const std::string& message);
ApiError TooLargeResourceVersion(int64_t requested, int64_t current);

// Field-error helpers producing the `field: Type: detail` message pieces.
StatusCause FieldInvalid(const std::string& field, const Json& value, const std::string& detail);
StatusCause FieldRequired(const std::string& field, const std::string& detail);  // "" = none
StatusCause FieldTypeInvalid(const std::string& field, const Json& value,
                             const std::string& detail);
// `modern`: kube-apiserver >= 1.32's wording.
StatusCause FieldTooLong(const std::string& field, int64_t max_length, bool modern);
StatusCause FieldTooMany(const std::string& field, int64_t actual, int64_t max_items);
// `value_text` as Go's field.Error prints the value (%q, %v or %#v).
StatusCause FieldDuplicate(const std::string& field, const std::string& value_text);
// Go's field.Error rendering of a bad value: strings quoted, numbers and bools bare.
std::string FieldValueText(const Json& value);
StatusCause FieldForbidden(const std::string& field, const std::string& detail);
StatusCause FieldNotSupported(const std::string& field, const Json& value,
                              const std::vector<std::string>& supported);

// A value or the API error that prevented it.
template <typename T>
class ApiOr {
 public:
  ApiOr(T value) : v_(std::move(value)) {}         // NOLINT: implicit by design
  ApiOr(ApiError error) : v_(std::move(error)) {}  // NOLINT
  bool ok() const { return std::holds_alternative<T>(v_); }
  T& value() { return std::get<T>(v_); }
  const T& value() const { return std::get<T>(v_); }
  T& operator*() { return value(); }
  T* operator->() { return &value(); }
  const ApiError& error() const { return std::get<ApiError>(v_); }

 private:
  std::variant<T, ApiError> v_;
};

}  // namespace reverser::kubesim
