#pragma once

// The API server's audit log as the audit webhook receives it (`audit.k8s.io/v1` EventList):
// decoding, the reference's per-event filters with their outcome labels, the effective user, and
// the author facts an accepted event yields (docs/behaviour.md, Author attribution; checklist
// items 22, 23, 26).
//
// Each event is decoded once (simdjson On-Demand) into a compact AuditEvent holding exactly the
// fields the filters, facts and metric labels read; the request and response bodies are kept as
// their raw JSON text for the few consumers that need a whole object. Input is untrusted: a field
// of the wrong type reads as absent, never as an error.
//
// What one bad event costs. A body is read in two layers:
//
//  * The framing, checked by a scanner as the bytes arrive: the root is a JSON object whose
//    members are `"name": value` separated by commas; `items` (at most one) is an array whose
//    elements are separated by commas; in every value brackets pair up (`{` with `}`, `[` with
//    `]`, checked down to the depth limit below and counted beyond it), strings end, and scalars
//    stop at a delimiter; nothing but whitespace follows the root. Root members other than kind,
//    apiVersion and items are skipped unread. Broken framing means the extent of the events can
//    no longer be told: the body is refused as a whole (InvalidArgument: answer 400, the API
//    server resends it).
//  * Each element of `items`, decoded on its own. An element is refused — skipped, reported as a
//    RefusedEvent with its index and whatever of its auditID, verb and objectRef can be read — when
//      - too_large: it is longer than DecodeLimits::max_event_bytes (only its first bytes are
//        kept, to name it);
//      - too_deep: it nests deeper than DecodeLimits::max_object_depth + 1 (the event object
//        around an embedded request/response object adds one level);
//      - malformed: simdjson finds an error in what the decoder reads (invalid UTF-8, an
//        unterminated string, a bad number or literal, a missing ':' among the members read, ...).
//        Parts the decoder does not read are skipped by counting brackets, so damage there goes
//        unnoticed, as it always did.
//    Every other element is an event: one that is not a JSON object decodes as is_object false
//    (outcome nil_event), fields of the wrong type read as absent. So one bad event never costs
//    the others.
//
// A body can be decoded whole (ParseEventList; the events view into it without a copy) or piece
// by piece as it arrives (EventListReader: one element in memory at a time, so memory is bounded
// by max_event_bytes whatever the body's size). Both apply the same rules.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "libs/core/json_depth.h"
#include "libs/redisstore/author_fact_store.h"

namespace reverser::audit {

namespace internal {
class ItemsScanner;
}  // namespace internal

// The most a single event may be. Defaults take every event a real API server sends: a
// RequestResponse event carries the request body (at most 3 MiB) and the stored object (etcd
// holds at most 1.5 MiB), re-encoded with Go's escaping (`<` becomes `\u003c`), so a few times
// that at worst; objects nest at most core::kApiObjectMaxDepth levels.
inline constexpr size_t kDefaultMaxEventBytes = 32 << 20;
struct DecodeLimits {
  size_t max_event_bytes = kDefaultMaxEventBytes;
  int64_t max_object_depth = core::kApiObjectMaxDepth;
};

// Why an element of `items` was skipped (see the header comment).
enum class Refusal { kTooLarge, kTooDeep, kMalformed };
// The metric label: "too_large", "too_deep", "malformed".
absl::string_view RefusalLabel(Refusal refusal);

struct RefusedEvent {
  Refusal reason = Refusal::kMalformed;
  size_t index = 0;  // position in `items`
  uint64_t bytes = 0;
  std::string message;  // what was wrong, for the log line
  // As far as they could be read ("" otherwise).
  std::string audit_id;
  std::string verb;
  std::string resource;
  std::string api_group;
  std::string api_version;
  std::string namespace_;
  std::string name;
};

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

// Decoded events together with the text their fields view into, and the elements refused.
// Move-only; moving keeps the views valid.
class EventList {
 public:
  EventList(EventList&&) = default;
  EventList& operator=(EventList&&) = default;

  const std::vector<RefusedEvent>& refused() const { return refused_; }
  const std::vector<AuditEvent>& events() const { return events_; }
  size_t size() const { return events_.size(); }
  bool empty() const { return events_.empty(); }
  const AuditEvent& operator[](size_t i) const { return events_[i]; }
  std::vector<AuditEvent>::const_iterator begin() const { return events_.begin(); }
  std::vector<AuditEvent>::const_iterator end() const { return events_.end(); }
  // The bytes of text the events view into (what holding the list costs).
  size_t text_bytes() const {
    size_t bytes = 0;
    for (const auto& text : texts_) bytes += text->size();
    return bytes;
  }

 private:
  friend class EventDecoder;
  friend class EventListReader;
  EventList() = default;

  std::vector<std::unique_ptr<std::string>> texts_;      // what the events view into, padded
  std::vector<std::unique_ptr<std::string>> unescaped_;  // strings that held escapes
  std::vector<AuditEvent> events_;
  std::vector<RefusedEvent> refused_;
};

// Spare capacity (simdjson's padding) a body needs beyond its size to be decoded in place.
inline constexpr size_t kBodyPadding = 64;

// Decodes a whole webhook body; takes it over so the events can view into it without a copy (a
// body with kBodyPadding spare capacity is not copied at all). Refused elements are in
// refused(). Errors (broken framing, not an audit.k8s.io/v1 EventList, items not a list) are
// InvalidArgument with a message fit for a 400 answer; a rejected body is validated in full, so
// the message says "not valid JSON" exactly when the text is malformed.
absl::StatusOr<EventList> ParseEventList(std::string body, const DecodeLimits& limits = {});

// Decodes a webhook body that arrives in pieces, under the rules of ParseEventList, holding only
// the element in progress (at most max_event_bytes of it). The one difference: a rejected body
// is not at hand to be validated in full, so its message names the first fault found.
class EventListReader {
 public:
  explicit EventListReader(const DecodeLimits& limits = {});
  ~EventListReader();
  EventListReader(const EventListReader&) = delete;
  EventListReader& operator=(const EventListReader&) = delete;

  // Each element of `items`, in order, as an EventList holding that one event or one refusal.
  using ItemCallback = std::function<void(EventList item)>;
  // Consumes the next piece of the body. Broken framing is InvalidArgument (answer 400); the
  // reader then stays failed and the rest of the body need not be read.
  absl::Status Feed(absl::string_view piece, const ItemCallback& on_item);
  // After the last piece: OK for an audit.k8s.io/v1 EventList, else the reason for a 400.
  absl::Status Finish();
  // True while the kind and apiVersion read so far are an audit.k8s.io/v1 EventList's (the
  // API server sends them before `items`): events can be acted on before the body ends.
  bool looks_like_event_list() const;
  size_t buffered_bytes() const;

 private:
  DecodeLimits limits_;
  std::unique_ptr<internal::ItemsScanner> scanner_;
  bool malformed_element_ = false;
};

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
