#include "libs/audit/audit_event.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace reverser::audit {
namespace {

using nlohmann::json;

// Reads a string member, "" when absent or not a string (input is untrusted).
std::string Str(const json& object, const char* key) {
  if (!object.is_object()) return "";
  auto it = object.find(key);
  if (it == object.end() || !it->is_string()) return "";
  return it->get<std::string>();
}

const json& Member(const json& object, const char* key) {
  static const json* null_value = new json();
  if (!object.is_object()) return *null_value;
  auto it = object.find(key);
  return it == object.end() ? *null_value : *it;
}

std::string MetadataField(const json& object, const char* key) {
  return Str(Member(object, "metadata"), key);
}

bool IsMutatingVerb(absl::string_view verb) {
  return verb == "create" || verb == "update" || verb == "patch" || verb == "delete" ||
         verb == "deletecollection";
}

// True when the request URI's query has dryRun=All (the only value the API accepts).
bool IsDryRun(absl::string_view request_uri) {
  size_t q = request_uri.find('?');
  if (q == absl::string_view::npos) return false;
  for (absl::string_view param : absl::StrSplit(request_uri.substr(q + 1), '&')) {
    if (param == "dryRun=All") return true;
  }
  return false;
}

int ResponseCode(const json& event) {
  const json& status = Member(event, "responseStatus");
  const json& code = Member(status, "code");
  return code.is_number_integer() ? code.get<int>() : 0;
}

std::string FirstExtra(const json& user, const char* key) {
  const json& values = Member(Member(user, "extra"), key);
  if (values.is_array() && !values.empty() && values[0].is_string()) {
    return values[0].get<std::string>();
  }
  return "";
}

}  // namespace

absl::StatusOr<std::vector<json>> ParseEventList(absl::string_view body) {
  json doc = json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return absl::InvalidArgumentError("request body is not valid JSON");
  if (!doc.is_object()) return absl::InvalidArgumentError("request body is not a JSON object");
  std::string kind = Str(doc, "kind");
  std::string api_version = Str(doc, "apiVersion");
  if (kind != "EventList" || api_version != "audit.k8s.io/v1") {
    return absl::InvalidArgumentError(
        absl::StrCat("expected an audit.k8s.io/v1 EventList, got apiVersion=\"", api_version,
                     "\" kind=\"", kind, "\""));
  }
  auto items = doc.find("items");
  if (items == doc.end() || items->is_null()) return std::vector<json>{};
  if (!items->is_array()) return absl::InvalidArgumentError("EventList items is not a list");
  // Moved out, not copied: a 400-event list is megabytes of parsed JSON.
  std::vector<json> events = std::move(items->get_ref<json::array_t&>());
  return events;
}

absl::string_view OutcomeLabel(Outcome outcome) {
  switch (outcome) {
    case Outcome::kQueued:
      return "queued";
    case Outcome::kNonScaleSubresource:
      return "non_scale_subresource";
    case Outcome::kNilEvent:
      return "nil_event";
    case Outcome::kStage:
      return "stage";
    case Outcome::kReadOnlyOrUnknownVerb:
      return "read_only_or_unknown_verb";
    case Outcome::kFailedRequest:
      return "failed_request";
    case Outcome::kDryRun:
      return "dry_run";
    case Outcome::kUnchangedResourceVersion:
      return "unchanged_resource_version";
  }
  return "unknown";
}

absl::string_view OutcomeCategory(Outcome outcome) {
  return outcome == Outcome::kQueued ? "accepted" : "ignored";
}

Outcome Classify(const json& event) {
  if (!event.is_object()) return Outcome::kNilEvent;
  const json& ref = Member(event, "objectRef");
  std::string verb = Str(event, "verb");
  std::string subresource = Str(ref, "subresource");
  if (!subresource.empty() && !(subresource == "scale" && IsMutatingVerb(verb))) {
    return Outcome::kNonScaleSubresource;
  }
  if (Str(event, "stage") != "ResponseComplete") return Outcome::kStage;
  if (!IsMutatingVerb(verb)) return Outcome::kReadOnlyOrUnknownVerb;
  if (ResponseCode(event) >= 300) return Outcome::kFailedRequest;
  if (IsDryRun(Str(event, "requestURI"))) return Outcome::kDryRun;
  std::string request_rv = MetadataField(Member(event, "requestObject"), "resourceVersion");
  std::string response_rv = MetadataField(Member(event, "responseObject"), "resourceVersion");
  if (!request_rv.empty() && request_rv == response_rv) return Outcome::kUnchangedResourceVersion;
  return Outcome::kQueued;
}

Actor EffectiveActor(const json& event) {
  const json& impersonated = Member(event, "impersonatedUser");
  const json& user = Str(impersonated, "username").empty() ? Member(event, "user") : impersonated;
  Actor actor;
  actor.username = Str(user, "username");
  actor.display_name = FirstExtra(user, "configbutler.ai/claims/display-name");
  actor.email = FirstExtra(user, "configbutler.ai/claims/email");
  actor.is_service_account = absl::StartsWith(actor.username, "system:serviceaccount:");
  return actor;
}

std::vector<redisstore::AuthorFact> ExtractFacts(const json& event) {
  std::vector<redisstore::AuthorFact> facts;
  if (Classify(event) != Outcome::kQueued) return facts;
  const json& ref = Member(event, "objectRef");
  Actor actor = EffectiveActor(event);
  if (Str(ref, "resource").empty() || actor.username.empty()) return facts;

  redisstore::AuthorFact base;
  std::string group = Str(ref, "apiGroup");
  base.group_resource =
      group.empty() ? Str(ref, "resource") : absl::StrCat(group, "/", Str(ref, "resource"));
  base.namespace_ = Str(ref, "namespace");
  base.author = actor.username;
  base.display_name = actor.display_name;
  base.email = actor.email;
  base.is_service_account = actor.is_service_account;
  base.verb = Str(event, "verb");
  base.subresource = Str(ref, "subresource");
  base.audit_id = Str(event, "auditID");
  base.stage_timestamp = Str(event, "stageTimestamp");

  const json& response = Member(event, "responseObject");
  const json& request = Member(event, "requestObject");
  if (base.verb == "deletecollection") {
    // The response lists what was removed; a hollow body (Status or no items) yields nothing.
    const json& items = Member(response, "items");
    if (!items.is_array()) return facts;
    for (const json& item : items) {
      redisstore::AuthorFact fact = base;
      fact.name = MetadataField(item, "name");
      fact.uid = MetadataField(item, "uid");
      if (fact.namespace_.empty()) fact.namespace_ = MetadataField(item, "namespace");
      fact.resource_version = MetadataField(item, "resourceVersion");
      if (fact.name.empty() || fact.uid.empty()) continue;
      facts.push_back(std::move(fact));
    }
    return facts;
  }

  redisstore::AuthorFact fact = base;
  // Identity backfill: create with generateName has no objectRef.name; the body has it. A delete
  // answers with the deleted object or a Status, so only an object's metadata is trusted.
  bool response_is_object = Str(response, "kind") != "Status";
  fact.name = Str(ref, "name");
  if (fact.name.empty() && response_is_object) fact.name = MetadataField(response, "name");
  if (fact.name.empty()) fact.name = MetadataField(request, "name");
  fact.uid = Str(ref, "uid");
  if (fact.uid.empty() && response_is_object) fact.uid = MetadataField(response, "uid");
  // An immediate delete answers with a Status whose details name the removed object.
  if (fact.uid.empty() && !response_is_object) fact.uid = Str(Member(response, "details"), "uid");
  if (fact.namespace_.empty() && response_is_object) {
    fact.namespace_ = MetadataField(response, "namespace");
  }
  // The post-write RV; the request's RV is the precondition, not the result.
  fact.resource_version = response_is_object ? MetadataField(response, "resourceVersion") : "";
  if (fact.resource_version.empty()) fact.resource_version = Str(ref, "resourceVersion");
  if (fact.name.empty()) return facts;
  facts.push_back(std::move(fact));
  return facts;
}

}  // namespace reverser::audit
