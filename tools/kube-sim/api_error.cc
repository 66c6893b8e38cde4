#include "tools/kube-sim/api_error.h"

#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace reverser::kubesim {
namespace {

ApiError Make(int code, std::string reason, std::string message, Json details = nullptr) {
  ApiError e;
  e.code = code;
  e.reason = std::move(reason);
  e.message = std::move(message);
  e.details = std::move(details);
  return e;
}

Json NamedDetails(const ErrorSubject& s, const std::string& name) {
  Json d = Json::object();
  if (!name.empty()) d["name"] = name;
  if (!s.group.empty()) d["group"] = s.group;
  d["kind"] = s.resource;
  return d;
}

// Go's %q for the strings we quote (names, values): escapes quotes and backslashes.
std::string Quote(const std::string& s) { return Json(s).dump(); }

std::string ValueText(const Json& value) {
  if (value.is_string()) return Quote(value.get<std::string>());
  return value.dump();
}

}  // namespace

std::string FieldValueText(const Json& value) { return ValueText(value); }

std::string ErrorSubject::QualifiedResource() const {
  return group.empty() ? resource : absl::StrCat(resource, ".", group);
}
std::string ErrorSubject::QualifiedKind() const {
  return group.empty() ? kind : absl::StrCat(kind, ".", group);
}

nlohmann::ordered_json ApiError::ToOrderedStatus() const {
  // Field order as Go's metav1.Status marshals it.
  nlohmann::ordered_json s;
  s["kind"] = "Status";
  s["apiVersion"] = "v1";
  s["metadata"] = nlohmann::ordered_json::object();
  s["status"] = "Failure";
  s["message"] = message;
  if (!reason.empty()) s["reason"] = reason;
  Json d = details;
  if (retry_after_seconds > 0) {
    if (d.is_null()) d = Json::object();
    d["retryAfterSeconds"] = retry_after_seconds;
  }
  if (!d.is_null()) {
    nlohmann::ordered_json od = nlohmann::ordered_json::object();
    for (const char* k : {"name", "group", "kind", "uid", "causes", "retryAfterSeconds"}) {
      if (!d.contains(k)) continue;
      if (std::string(k) == "causes" && d[k].is_array()) {
        // StatusCause marshals as reason, message, field (each omitempty).
        nlohmann::ordered_json causes = nlohmann::ordered_json::array();
        for (const auto& c : d[k]) {
          nlohmann::ordered_json oc = nlohmann::ordered_json::object();
          for (const char* ck : {"reason", "message", "field"}) {
            if (c.contains(ck) && !(c[ck].is_string() && c[ck].get<std::string>().empty())) {
              oc[ck] = c[ck].get<std::string>();
            }
          }
          causes.push_back(oc);
        }
        od[k] = causes;
      } else {
        od[k] = nlohmann::ordered_json::parse(d[k].dump());
      }
    }
    s["details"] = od;
  }
  s["code"] = code;
  return s;
}

Json ApiError::ToStatus() const { return Json::parse(ToOrderedStatus().dump()); }

std::string ApiError::StatusBody() const { return ToOrderedStatus().dump(); }

ApiError NotFound(const ErrorSubject& s, const std::string& name) {
  return Make(404, "NotFound", absl::StrCat(s.QualifiedResource(), " ", Quote(name), " not found"),
              NamedDetails(s, name));
}

ApiError PathNotFound() {
  return Make(404, "NotFound", "the server could not find the requested resource", Json::object());
}

ApiError AlreadyExists(const ErrorSubject& s, const std::string& name) {
  return Make(409, "AlreadyExists",
              absl::StrCat(s.QualifiedResource(), " ", Quote(name), " already exists"),
              NamedDetails(s, name));
}

ApiError Conflict(const ErrorSubject& s, const std::string& name, const std::string& detail) {
  return Make(409, "Conflict",
              absl::StrCat("Operation cannot be fulfilled on ", s.QualifiedResource(), " ",
                           Quote(name), ": ", detail),
              NamedDetails(s, name));
}

ApiError ModifiedConflict(const ErrorSubject& s, const std::string& name) {
  return Conflict(s, name,
                  "the object has been modified; please apply your changes to the latest version "
                  "and try again");
}

ApiError Invalid(const ErrorSubject& s, const std::string& name,
                 const std::vector<StatusCause>& causes) {
  std::vector<std::string> parts;
  std::set<std::string> seen;
  Json jcauses = Json::array();
  for (const auto& c : causes) {
    // The message lists each distinct error once (ErrorList.ToAggregate); causes keep them all.
    std::string part = c.field.empty() ? c.message : absl::StrCat(c.field, ": ", c.message);
    if (seen.insert(part).second) parts.push_back(std::move(part));
    jcauses.push_back({{"reason", c.reason}, {"message", c.message}, {"field", c.field}});
  }
  std::string joined =
      parts.size() == 1 ? parts[0] : absl::StrCat("[", absl::StrJoin(parts, ", "), "]");
  Json d = Json::object();
  if (!name.empty()) d["name"] = name;
  if (!s.group.empty()) d["group"] = s.group;
  d["kind"] = s.kind;
  d["causes"] = jcauses;
  return Make(422, "Invalid",
              absl::StrCat(s.QualifiedKind(), " ", Quote(name), " is invalid: ", joined), d);
}

ApiError InvalidListOptions(const std::vector<StatusCause>& causes) {
  return Invalid(ErrorSubject{"meta.k8s.io", "listoptions", "ListOptions"}, "", causes);
}

ApiError BadRequest(const std::string& message) { return Make(400, "BadRequest", message); }

ApiError MethodNotSupported(const ErrorSubject& s, const std::string& action) {
  Json d = Json::object();
  if (!s.group.empty()) d["group"] = s.group;
  d["kind"] = s.resource;
  return Make(
      405, "MethodNotAllowed",
      absl::StrCat(action, " is not supported on resources of kind ", Quote(s.QualifiedResource())),
      d);
}

ApiError MethodNotAllowed() {
  return Make(405, "MethodNotAllowed",
              "the server does not allow this method on the requested resource", Json::object());
}

ApiError UnsupportedMediaType(const std::string& accepted) {
  return Make(415, "UnsupportedMediaType",
              absl::StrCat("the body of the request was in an unknown format - accepted media "
                           "types include: ",
                           accepted));
}

ApiError RequestEntityTooLarge(size_t limit) {
  return Make(413, "RequestEntityTooLarge",
              absl::StrCat("Request entity too large: limit is ", limit));
}

ApiError Gone(const std::string& message) { return Make(410, "Expired", message); }

ApiError Forbidden(const ErrorSubject& s, const std::string& name, const std::string& why) {
  std::string subject =
      name.empty() ? s.QualifiedResource() : absl::StrCat(s.QualifiedResource(), " ", Quote(name));
  return Make(403, "Forbidden", absl::StrCat(subject, " is forbidden: ", why),
              NamedDetails(s, name));
}

ApiError Unauthorized() { return Make(401, "Unauthorized", "Unauthorized"); }

ApiError TooManyRequests(int retry_after_seconds) {
  ApiError e = Make(429, "TooManyRequests", "storage is (re)initializing");
  e.retry_after_seconds = retry_after_seconds;
  return e;
}

ApiError ServiceUnavailable(const std::string& message, int retry_after_seconds) {
  ApiError e = Make(503, "ServiceUnavailable", message);
  e.retry_after_seconds = retry_after_seconds;
  return e;
}

ApiError InternalError(const std::string& message) {
  return Make(500, "InternalError", absl::StrCat("Internal error occurred: ", message),
              Json{{"causes", Json::array({Json{{"message", message}}})}});
}

ApiError TooLargeResourceVersion(int64_t requested, int64_t current) {
  ApiError e =
      Make(504, "Timeout",
           absl::StrCat("Timeout: Too large resource version: ", requested, ", current: ", current),
           Json{{"causes", Json::array({Json{{"reason", "ResourceVersionTooLarge"},
                                             {"message", "Too large resource version"}}})}});
  e.retry_after_seconds = 1;
  return e;
}

StatusCause FieldInvalid(const std::string& field, const Json& value, const std::string& detail) {
  return {"FieldValueInvalid", absl::StrCat("Invalid value: ", ValueText(value), ": ", detail),
          field};
}

StatusCause FieldRequired(const std::string& field, const std::string& detail) {
  return {"FieldValueRequired",
          detail.empty() ? "Required value" : absl::StrCat("Required value: ", detail), field};
}

StatusCause FieldTypeInvalid(const std::string& field, const Json& value,
                             const std::string& detail) {
  return {"FieldValueTypeInvalid", absl::StrCat("Invalid value: ", ValueText(value), ": ", detail),
          field};
}

StatusCause FieldTooLong(const std::string& field, int64_t max_length, bool modern) {
  return {"FieldValueTooLong",
          modern ? absl::StrCat("Too long: may not be more than ", max_length, " bytes")
                 : absl::StrCat("Too long: may not be longer than ", max_length),
          field};
}

StatusCause FieldTooMany(const std::string& field, int64_t actual, int64_t max_items) {
  return {"FieldValueTooMany",
          absl::StrCat("Too many: ", actual, ": must have at most ", max_items, " items"), field};
}

StatusCause FieldDuplicate(const std::string& field, const std::string& value_text) {
  return {"FieldValueDuplicate", absl::StrCat("Duplicate value: ", value_text), field};
}

StatusCause FieldForbidden(const std::string& field, const std::string& detail) {
  return {"FieldValueForbidden", absl::StrCat("Forbidden: ", detail), field};
}

StatusCause FieldNotSupported(const std::string& field, const Json& value,
                              const std::vector<std::string>& supported) {
  std::vector<std::string> q;
  for (const auto& s : supported) q.push_back(Quote(s));
  return {"FieldValueNotSupported",
          absl::StrCat("Unsupported value: ", ValueText(value),
                       ": supported values: ", absl::StrJoin(q, ", ")),
          field};
}

}  // namespace reverser::kubesim
