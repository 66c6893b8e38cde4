#pragma once

// The API server's audit log as the audit webhook receives it (`audit.k8s.io/v1` EventList):
// decoding, the reference's per-event filters with their outcome labels, the effective user, and
// the author facts an accepted event yields (docs/behaviour.md, Author attribution; checklist
// items 22, 23, 26).
//
// An EventList is decoded once (simdjson On-Demand, one pass) into compact AuditEvents holding
// exactly the fields the filters, facts and metric labels read; the request and response bodies
// are kept as their raw JSON text for the few consumers that need a whole object. Input is
// untrusted: a field of the wrong type reads as absent, never as an error.

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "libs/redisstore/author_fact_store.h"

namespace reverser::audit {

// String fields below view into the EventList that decoded them; "" means absent or not a string.

// The metadata fields an identity needs.
struct ObjectIdentity {
  absl::string_view name;
  absl::string_view namespace_;
  absl::string_view uid;
  absl::string_view resource_version;
};

// `objectRef`.
struct ObjectReference {
  absl::string_view resource;
  absl::string_view api_group;
  absl::string_view api_version;
  absl::string_view namespace_;
  absl::string_view name;
  absl::string_view uid;
  absl::string_view resource_version;
  absl::string_view subresource;
};

// `user` or `impersonatedUser`, with the first value of the two identity claims in `extra`.
struct UserInfo {
  absl::string_view username;
  absl::string_view display_name;  // extra["configbutler.ai/claims/display-name"][0]
  absl::string_view email;         // extra["configbutler.ai/claims/email"][0]
};

// `requestObject` or `responseObject`.
struct EmbeddedObject {
  bool present = false;  // a JSON object (absent, null or any other type: false)
  absl::string_view kind;
  absl::string_view api_version;
  ObjectIdentity metadata;
  absl::string_view details_name;  // a Status's details.name
  absl::string_view details_uid;   // a Status's details.uid
  // `items` when it is a list (a deletecollection's answer): each item's metadata (all "" for an
  // item that is not an object).
  bool has_items = false;
  std::vector<ObjectIdentity> items;
  absl::string_view json;  // the object's raw JSON text ("" when not present)
};

struct AuditEvent {
  bool is_object = false;  // false: the item is not a JSON object (outcome nil_event)
  absl::string_view stage;
  absl::string_view verb;
  absl::string_view audit_id;
  absl::string_view stage_timestamp;
  absl::string_view request_uri;
  ObjectReference object_ref;
  int response_code = 0;  // responseStatus.code; 0 when absent or not an integer
  UserInfo user;
  UserInfo impersonated_user;
  EmbeddedObject request_object;
  EmbeddedObject response_object;
};

// Decoded events together with the text their fields view into. Move-only; moving keeps the
// views valid.
class EventList {
 public:
  EventList(EventList&&) = default;
  EventList& operator=(EventList&&) = default;

  const std::vector<AuditEvent>& events() const { return events_; }
  size_t size() const { return events_.size(); }
  bool empty() const { return events_.empty(); }
  const AuditEvent& operator[](size_t i) const { return events_[i]; }
  std::vector<AuditEvent>::const_iterator begin() const { return events_.begin(); }
  std::vector<AuditEvent>::const_iterator end() const { return events_.end(); }

 private:
  friend class EventDecoder;
  EventList() = default;

  std::unique_ptr<std::string> text_;                    // the body, padded for simdjson
  std::vector<std::unique_ptr<std::string>> unescaped_;  // strings that held escapes
  std::vector<AuditEvent> events_;
};

// Spare capacity (simdjson's padding) a body needs beyond its size to be decoded in place.
inline constexpr size_t kBodyPadding = 64;

// Decodes a webhook body; takes it over so the events can view into it without a copy (a body
// with kBodyPadding spare capacity is not copied at all). Errors (malformed JSON, not an
// audit.k8s.io/v1 EventList, items not a list) are InvalidArgument with a message fit for a 400
// answer.
absl::StatusOr<EventList> ParseEventList(std::string body);

// Decodes the JSON text of one event (tests, tools). InvalidArgument for malformed JSON; any other
// JSON value decodes to a single event (one that is not an object has is_object false).
absl::StatusOr<EventList> ParseEvent(std::string event_json);

// Why an event was accepted or ignored; labels are the reference's `outcome` values.
enum class Outcome {
  kQueued,                    // accepted: yields facts
  kNonScaleSubresource,       // a subresource other than a mutating `scale`
  kNilEvent,                  // not an object
  kStage,                     // stage != ResponseComplete
  kReadOnlyOrUnknownVerb,     // verb not create/update/patch/delete/deletecollection
  kFailedRequest,             // responseStatus.code >= 300
  kDryRun,                    // requestURI has dryRun=All
  kUnchangedResourceVersion,  // request RV == response RV: nothing was persisted
};

absl::string_view OutcomeLabel(Outcome outcome);
// The coarse `category` label: "accepted" or "ignored".
absl::string_view OutcomeCategory(Outcome outcome);

// Applies the reference's filters in order.
Outcome Classify(const AuditEvent& event);

// Who made the change: the impersonated user when present, else the authenticated user.
struct Actor {
  std::string username;
  std::string display_name;
  std::string email;
  bool is_service_account = false;
};
Actor EffectiveActor(const AuditEvent& event);

// The facts (the reference's AuthorFact, as stored) an accepted (kQueued) event yields: one for a
// single-object write (none when the object's resource, name or the username cannot be found),
// one per listed item for a deletecollection (verb "deletecollection": stored as `:last` only;
// none for a hollow Status body). Appended to `facts`.
void AppendFacts(const AuditEvent& event, std::vector<redisstore::AuthorFact>& facts);
std::vector<redisstore::AuthorFact> ExtractFacts(const AuditEvent& event);

}  // namespace reverser::audit
