#include "libs/audit/audit_event.h"

#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "libs/audit/items_scanner.h"
#include "libs/core/status.h"
#include "simdjson.h"

namespace reverser::audit {

namespace od = simdjson::ondemand;
using simdjson::error_code;

namespace {

static_assert(kBodyPadding >= simdjson::SIMDJSON_PADDING);

constexpr char kNotJson[] = "request body is not valid JSON";
constexpr char kNotObject[] = "request body is not a JSON object";

// Bodies up to this size reuse the thread's parser; a larger one gets its own, so a rare huge
// list does not pin its buffers (several times its size) to an HTTP thread for good.
constexpr size_t kReusedParserMaxBytes = 4 << 20;

// On-Demand finds errors only in the parts it reads. A body about to be rejected is validated in
// full (DOM) so the answer says "not valid JSON" exactly when the text is malformed.
enum class FullParse { kMalformed, kObject, kOtherValue };
FullParse ParseFully(absl::string_view text) {
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  // As deep as an accepted event may be (simdjson's default stops at 1,024 levels).
  if (parser.allocate(text.size(), core::kApiObjectMaxDepth + 3) ||
      parser.parse(text.data(), text.size(), /*realloc_if_needed=*/true).get(root)) {
    return FullParse::kMalformed;
  }
  return root.is_object() ? FullParse::kObject : FullParse::kOtherValue;
}

// A field's key: its raw text, which is the key unless it holds an escape (then unescaped; none
// of the keys read here needs one, but `"st\u0061ge"` is still "stage").
error_code Key(od::field& field, std::string_view& key) {
  const char* begin = field.key().raw();
  const char* end = begin;
  while (*end != '"' && *end != '\\') ++end;  // stage 1 found the closing quote
  if (*end == '"') {
    key = std::string_view(begin, static_cast<size_t>(end - begin));
    return simdjson::SUCCESS;
  }
  return field.unescaped_key().get(key);
}

template <typename T>
bool TypeIs(T& value, od::json_type expected, error_code& error) {
  od::json_type type;
  error = value.type().get(type);
  return !error && type == expected;
}

// Calls visit(key, value) for each member of `object`, stopping at the first error.
template <typename Visit>
error_code ForEachMember(od::object& object, Visit&& visit) {
  for (auto member : object) {
    od::field field;
    SIMDJSON_TRY(std::move(member).get(field));
    std::string_view key;
    SIMDJSON_TRY(Key(field, key));
    SIMDJSON_TRY(visit(key, field.value()));
  }
  return simdjson::SUCCESS;
}

// The same over a value that should be an object; any other type reads as absent (no call).
template <typename Visit>
error_code ForEachMember(od::value value, Visit&& visit) {
  error_code error;
  if (!TypeIs(value, od::json_type::object, error)) return error;
  od::object object;
  SIMDJSON_TRY(value.get_object().get(object));
  return ForEachMember(object, visit);
}

// Takes over `body` into `texts` and pads it for simdjson (a copy only when it has no room).
const std::string& AdoptPadded(std::vector<std::unique_ptr<std::string>>& texts, std::string body) {
  texts.push_back(std::make_unique<std::string>(std::move(body)));
  std::string& text = *texts.back();
  if (text.capacity() - text.size() < kBodyPadding) text.reserve(text.size() + kBodyPadding);
  return text;
}

}  // namespace

// Decodes into an EventList: every string field is a view into the element's text when it holds
// no escape (the common case), else into a copy the list keeps. Each Read* assigns its output
// afresh, so a repeated key ends with the last value, as a JSON object map would.
class EventDecoder {
 public:
  using Element = internal::ItemsScanner::Element;

  static absl::StatusOr<EventList> DecodeList(std::string body, const DecodeLimits& limits);
  static absl::StatusOr<EventList> DecodeOne(std::string body);
  // One element of `items` into `list`: one more event or one more refusal. `readable`: the
  // bytes readable from element.text.data() (its size plus simdjson's padding); unused for an
  // element too large to decode.
  static void DecodeItem(EventList& list, const Element& element, size_t readable,
                         const DecodeLimits& limits);
  // The answer for a body whose framing scan ended with `framing`: OK for an EventList, else the
  // reason. `whole_body`, when at hand, is validated in full before a rejection.
  static absl::Status Verdict(const internal::ItemsScanner& scanner, const absl::Status& framing,
                              bool malformed_element, const std::string* whole_body);

 private:
  explicit EventDecoder(EventList& list) : list_(list) {}

  static od::parser& ThreadParser() {
    thread_local od::parser parser;
    return parser;
  }
  // What can be read of a refused element's auditID, verb and objectRef, up to the first error.
  static void ReadRefusedIdentity(absl::string_view text, size_t readable, RefusedEvent& refused);

  error_code ReadString(od::value value, absl::string_view& out);
  error_code ReadEvent(od::object object, AuditEvent& event);
  error_code ReadObjectRef(od::value value, ObjectReference& ref);
  error_code ReadResponseCode(od::value value, int& code);
  error_code ReadUser(od::value value, UserInfo& user);
  error_code ReadFirstString(od::value value, absl::string_view& out);
  error_code ReadIdentity(od::value value, ObjectIdentity& identity);
  error_code ReadEmbedded(od::value value, EmbeddedObject& embedded);

  EventList& list_;
};

void EventDecoder::DecodeItem(EventList& list, const Element& element, size_t readable,
                              const DecodeLimits& limits) {
  auto refuse = [&](Refusal reason, std::string message) -> RefusedEvent& {
    RefusedEvent& refused = list.refused_.emplace_back();
    refused.reason = reason;
    refused.index = element.index;
    refused.bytes = element.bytes;
    refused.message = std::move(message);
    return refused;
  };
  if (element.too_large) {
    RefusedEvent& refused =
        refuse(Refusal::kTooLarge,
               absl::StrCat("event of ", element.bytes, " bytes is larger than the limit of ",
                            limits.max_event_bytes, " bytes"));
    // Its first complete members, closed, still name it (auditID and objectRef come early).
    if (element.last_member_end != internal::ValueScanner::kNone) {
      std::string head;
      head.reserve(element.last_member_end + 1 + kBodyPadding);
      head.append(element.text.data(), element.last_member_end);
      head.push_back('}');
      ReadRefusedIdentity(head, head.capacity(), refused);
    }
    return;
  }
  if (element.too_deep) {
    RefusedEvent& refused = refuse(
        Refusal::kTooDeep,
        absl::StrCat("event nested deeper than ", limits.max_object_depth + 1,
                     " levels (an embedded object deeper than ", limits.max_object_depth, ")"));
    ReadRefusedIdentity(element.text, readable, refused);  // On-Demand skips the deep parts
    return;
  }
  const absl::string_view text = element.text;
  od::parser local_parser;
  od::parser& parser = text.size() <= kReusedParserMaxBytes ? ThreadParser() : local_parser;
  od::document doc;
  EventDecoder decoder(list);
  AuditEvent event;
  auto decode = [&]() -> error_code {
    SIMDJSON_TRY(
        parser.iterate(simdjson::padded_string_view(text.data(), text.size(), readable)).get(doc));
    error_code error;
    if (!TypeIs(doc, od::json_type::object, error)) {
      // Not an object: an event with nothing to read (nil_event), if the text is still JSON.
      if (error) return error;
      return ParseFully(text) == FullParse::kOtherValue ? simdjson::SUCCESS : simdjson::TAPE_ERROR;
    }
    od::object object;
    SIMDJSON_TRY(doc.get_object().get(object));
    SIMDJSON_TRY(decoder.ReadEvent(object, event));
    const char* trailing = nullptr;
    if (doc.current_location().get(trailing) != simdjson::OUT_OF_BOUNDS) {
      return simdjson::TAPE_ERROR;
    }
    return simdjson::SUCCESS;
  };
  if (error_code error = decode()) {
    RefusedEvent& refused =
        refuse(Refusal::kMalformed,
               absl::StrCat("event is not valid JSON: ", simdjson::error_message(error)));
    ReadRefusedIdentity(text, readable, refused);
    return;
  }
  list.events_.push_back(std::move(event));
}

void EventDecoder::ReadRefusedIdentity(absl::string_view text, size_t readable,
                                       RefusedEvent& refused) {
  EventList scratch;  // holds unescaped strings while they are copied out
  EventDecoder reader(scratch);
  od::parser parser;
  od::document doc;
  od::object object;
  if (parser.iterate(simdjson::padded_string_view(text.data(), text.size(), readable)).get(doc) ||
      doc.get_object().get(object)) {
    return;
  }
  auto copy = [](absl::string_view from, std::string& to) { to.assign(from.data(), from.size()); };
  (void)ForEachMember(object, [&](std::string_view key, od::value value) -> error_code {
    absl::string_view text_value;
    if (key == "auditID" || key == "verb") {
      SIMDJSON_TRY(reader.ReadString(value, text_value));
      copy(text_value, key == "verb" ? refused.verb : refused.audit_id);
    } else if (key == "objectRef") {
      ObjectReference ref;
      SIMDJSON_TRY(reader.ReadObjectRef(value, ref));
      copy(ref.resource, refused.resource);
      copy(ref.api_group, refused.api_group);
      copy(ref.api_version, refused.api_version);
      copy(ref.namespace_, refused.namespace_);
      copy(ref.name, refused.name);
    }
    return simdjson::SUCCESS;
  });
}

absl::Status EventDecoder::Verdict(const internal::ItemsScanner& scanner,
                                   const absl::Status& framing, bool malformed_element,
                                   const std::string* whole_body) {
  if (scanner.root_is_other_value()) {
    // Not an object: say which of "not JSON" and "another JSON value" it is, if it is short
    // enough to tell.
    const bool other_value = scanner.other_root_truncated() ||
                             ParseFully(scanner.other_root_text()) == FullParse::kOtherValue;
    return absl::InvalidArgumentError(other_value ? kNotObject : kNotJson);
  }
  if (!framing.ok()) return absl::InvalidArgumentError(kNotJson);
  const bool is_event_list =
      scanner.kind() == "EventList" && scanner.api_version() == "audit.k8s.io/v1";
  if (is_event_list && scanner.items_is_list()) return absl::OkStatus();
  // Rejected: malformed text is reported as such wherever the fault is.
  if (malformed_element ||
      (whole_body != nullptr && ParseFully(*whole_body) == FullParse::kMalformed)) {
    return absl::InvalidArgumentError(kNotJson);
  }
  if (!is_event_list) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected an audit.k8s.io/v1 EventList, got apiVersion=\"",
                     scanner.api_version(), "\" kind=\"", scanner.kind(), "\""));
  }
  return absl::InvalidArgumentError("EventList items is not a list");
}

absl::StatusOr<EventList> EventDecoder::DecodeList(std::string body, const DecodeLimits& limits) {
  EventList list;
  const std::string& text = AdoptPadded(list.texts_, std::move(body));
  const char* const readable_end = text.data() + text.capacity();
  internal::ItemsScanner scanner(limits.max_event_bytes, limits.max_object_depth + 1);
  bool malformed_element = false;
  // The whole body is one piece: every element is a view into it, decoded in place.
  absl::Status framing = scanner.Feed(text, [&](Element& element) {
    const size_t refused = list.refused_.size();
    DecodeItem(list, element, static_cast<size_t>(readable_end - element.text.data()), limits);
    if (list.refused_.size() > refused && list.refused_.back().reason == Refusal::kMalformed) {
      malformed_element = true;
    }
  });
  if (framing.ok()) framing = scanner.Finish();
  RETURN_IF_ERROR(Verdict(scanner, framing, malformed_element, &text));
  return list;
}

absl::StatusOr<EventList> EventDecoder::DecodeOne(std::string body) {
  // One element without limits: an event, or why its text is not JSON.
  EventList list;
  const std::string& text = AdoptPadded(list.texts_, std::move(body));
  Element element;
  element.text = text;
  element.bytes = text.size();
  DecodeItem(list, element, text.capacity(), DecodeLimits{});
  if (!list.refused_.empty()) return absl::InvalidArgumentError(list.refused_[0].message);
  return list;
}

error_code EventDecoder::ReadString(od::value value, absl::string_view& out) {
  out = {};
  error_code error;
  if (!TypeIs(value, od::json_type::string, error)) return error;  // other types read as absent
  const std::string_view raw = value.raw_json_token();             // `"…"` then any whitespace
  std::string_view decoded;
  SIMDJSON_TRY(value.get_string().get(decoded));
  const size_t n = decoded.size();
  // Without a backslash before the closing quote the text between the quotes is the value.
  if (raw.size() >= n + 2 && raw[n + 1] == '"' && std::memchr(raw.data() + 1, '\\', n) == nullptr) {
    out = absl::string_view(raw.data() + 1, n);
  } else {
    list_.unescaped_.push_back(std::make_unique<std::string>(decoded));
    out = *list_.unescaped_.back();
  }
  return simdjson::SUCCESS;
}

error_code EventDecoder::ReadEvent(od::object object, AuditEvent& event) {
  event = AuditEvent{};
  event.is_object = true;
  return ForEachMember(object, [&](std::string_view key, od::value value) -> error_code {
    if (key == "stage") return ReadString(value, event.stage);
    if (key == "verb") return ReadString(value, event.verb);
    if (key == "auditID") return ReadString(value, event.audit_id);
    if (key == "stageTimestamp") return ReadString(value, event.stage_timestamp);
    if (key == "requestURI") return ReadString(value, event.request_uri);
    if (key == "objectRef") return ReadObjectRef(value, event.object_ref);
    if (key == "responseStatus") return ReadResponseCode(value, event.response_code);
    if (key == "user") return ReadUser(value, event.user);
    if (key == "impersonatedUser") return ReadUser(value, event.impersonated_user);
    if (key == "requestObject") return ReadEmbedded(value, event.request_object);
    if (key == "responseObject") return ReadEmbedded(value, event.response_object);
    return simdjson::SUCCESS;
  });
}

error_code EventDecoder::ReadObjectRef(od::value value, ObjectReference& ref) {
  ref = ObjectReference{};
  return ForEachMember(value, [&](std::string_view key, od::value member) -> error_code {
    absl::string_view* target = key == "resource"          ? &ref.resource
                                : key == "apiGroup"        ? &ref.api_group
                                : key == "apiVersion"      ? &ref.api_version
                                : key == "namespace"       ? &ref.namespace_
                                : key == "name"            ? &ref.name
                                : key == "uid"             ? &ref.uid
                                : key == "resourceVersion" ? &ref.resource_version
                                : key == "subresource"     ? &ref.subresource
                                                           : nullptr;
    return target != nullptr ? ReadString(member, *target) : simdjson::SUCCESS;
  });
}

error_code EventDecoder::ReadResponseCode(od::value value, int& code) {
  code = 0;
  return ForEachMember(value, [&](std::string_view key, od::value number) -> error_code {
    if (key != "code") return simdjson::SUCCESS;
    code = 0;
    error_code error;
    if (!TypeIs(number, od::json_type::number, error)) return error;
    // Only an integer counts (200.0 reads as absent); out-of-range values wrap as a C cast does.
    od::number_type type;
    SIMDJSON_TRY(number.get_number_type().get(type));
    if (type == od::number_type::signed_integer) {
      int64_t n = 0;
      SIMDJSON_TRY(number.get_int64().get(n));
      code = static_cast<int>(n);
    } else if (type == od::number_type::unsigned_integer) {
      uint64_t n = 0;
      SIMDJSON_TRY(number.get_uint64().get(n));
      code = static_cast<int>(n);
    } else {
      double ignored = 0;
      SIMDJSON_TRY(number.get_double().get(ignored));  // still validated
    }
    return simdjson::SUCCESS;
  });
}

error_code EventDecoder::ReadFirstString(od::value value, absl::string_view& out) {
  out = {};
  error_code error;
  if (!TypeIs(value, od::json_type::array, error)) return error;
  od::array array;
  SIMDJSON_TRY(value.get_array().get(array));
  for (auto element : array) {
    od::value first;
    SIMDJSON_TRY(std::move(element).get(first));
    return ReadString(first, out);  // the rest is skipped by the enclosing iteration
  }
  return simdjson::SUCCESS;
}

error_code EventDecoder::ReadUser(od::value value, UserInfo& user) {
  user = UserInfo{};
  return ForEachMember(value, [&](std::string_view key, od::value member) -> error_code {
    if (key == "username") return ReadString(member, user.username);
    if (key != "extra") return simdjson::SUCCESS;
    user.display_name = {};
    user.email = {};
    return ForEachMember(member, [&](std::string_view claim, od::value values) -> error_code {
      if (claim == "configbutler.ai/claims/display-name") {
        return ReadFirstString(values, user.display_name);
      }
      if (claim == "configbutler.ai/claims/email") return ReadFirstString(values, user.email);
      return simdjson::SUCCESS;
    });
  });
}

error_code EventDecoder::ReadIdentity(od::value value, ObjectIdentity& identity) {
  identity = ObjectIdentity{};
  return ForEachMember(value, [&](std::string_view key, od::value member) -> error_code {
    absl::string_view* target = key == "name"              ? &identity.name
                                : key == "namespace"       ? &identity.namespace_
                                : key == "uid"             ? &identity.uid
                                : key == "resourceVersion" ? &identity.resource_version
                                                           : nullptr;
    return target != nullptr ? ReadString(member, *target) : simdjson::SUCCESS;
  });
}

error_code EventDecoder::ReadEmbedded(od::value value, EmbeddedObject& embedded) {
  embedded = EmbeddedObject{};
  error_code error;
  if (!TypeIs(value, od::json_type::object, error)) return error;
  embedded.present = true;
  od::object object;
  SIMDJSON_TRY(value.get_object().get(object));
  SIMDJSON_TRY(ForEachMember(object, [&](std::string_view key, od::value member) -> error_code {
    if (key == "kind") return ReadString(member, embedded.kind);
    if (key == "apiVersion") return ReadString(member, embedded.api_version);
    if (key == "metadata") return ReadIdentity(member, embedded.metadata);
    if (key == "details") {
      embedded.details_name = {};
      embedded.details_uid = {};
      return ForEachMember(member, [&](std::string_view detail, od::value text) -> error_code {
        if (detail == "name") return ReadString(text, embedded.details_name);
        if (detail == "uid") return ReadString(text, embedded.details_uid);
        return simdjson::SUCCESS;
      });
    }
    if (key != "items") return simdjson::SUCCESS;
    embedded.items.clear();
    error_code type_error;
    embedded.has_items = TypeIs(member, od::json_type::array, type_error);
    SIMDJSON_TRY(type_error);
    if (!embedded.has_items) return simdjson::SUCCESS;
    od::array items;
    SIMDJSON_TRY(member.get_array().get(items));
    for (auto element : items) {
      od::value item;
      SIMDJSON_TRY(std::move(element).get(item));
      ObjectIdentity& identity = embedded.items.emplace_back();
      SIMDJSON_TRY(ForEachMember(item, [&](std::string_view item_key, od::value meta) {
        return item_key == "metadata" ? ReadIdentity(meta, identity) : simdjson::SUCCESS;
      }));
    }
    return simdjson::SUCCESS;
  }));
  // Rewind and take the whole object's text, without its trailing whitespace.
  SIMDJSON_TRY(object.reset().error());
  std::string_view raw;
  SIMDJSON_TRY(object.raw_json().get(raw));
  while (!raw.empty() &&
         (raw.back() == ' ' || raw.back() == '\n' || raw.back() == '\r' || raw.back() == '\t')) {
    raw.remove_suffix(1);
  }
  embedded.json = absl::string_view(raw.data(), raw.size());
  return simdjson::SUCCESS;
}

absl::StatusOr<EventList> ParseEventList(std::string body, const DecodeLimits& limits) {
  return EventDecoder::DecodeList(std::move(body), limits);
}

absl::string_view RefusalLabel(Refusal refusal) {
  switch (refusal) {
    case Refusal::kTooLarge:
      return "too_large";
    case Refusal::kTooDeep:
      return "too_deep";
    case Refusal::kMalformed:
      return "malformed";
  }
  return "malformed";
}

EventListReader::EventListReader(const DecodeLimits& limits)
    : limits_(limits),
      scanner_(std::make_unique<internal::ItemsScanner>(limits.max_event_bytes,
                                                        limits.max_object_depth + 1)) {}

EventListReader::~EventListReader() = default;

absl::Status EventListReader::Feed(absl::string_view piece, const ItemCallback& on_item) {
  return scanner_->Feed(piece, [&](internal::ItemsScanner::Element& element) {
    EventList item;
    if (element.too_large) {
      EventDecoder::DecodeItem(item, element, 0, limits_);  // reads only a copy of its head
    } else {
      // The element's own padded copy (taken over when the scanner had to gather it).
      std::string text =
          element.buffer != nullptr ? std::move(*element.buffer) : std::string(element.text);
      const std::string& own = AdoptPadded(item.texts_, std::move(text));
      internal::ItemsScanner::Element in_place = element;
      in_place.text = own;
      in_place.buffer = nullptr;
      EventDecoder::DecodeItem(item, in_place, own.capacity(), limits_);
    }
    if (!item.refused_.empty() && item.refused_.back().reason == Refusal::kMalformed) {
      malformed_element_ = true;
    }
    on_item(std::move(item));
  });
}

absl::Status EventListReader::Finish() {
  return EventDecoder::Verdict(*scanner_, scanner_->Finish(), malformed_element_, nullptr);
}

bool EventListReader::looks_like_event_list() const {
  return scanner_->kind() == "EventList" && scanner_->api_version() == "audit.k8s.io/v1";
}

size_t EventListReader::buffered_bytes() const { return scanner_->buffered_bytes(); }

absl::StatusOr<EventList> ParseEvent(std::string event_json) {
  return EventDecoder::DecodeOne(std::move(event_json));
}

// --- The reference's filters and facts, over decoded events ---------------------------------

namespace {

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

}  // namespace

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

Outcome Classify(const AuditEvent& event) {
  if (!event.is_object) return Outcome::kNilEvent;
  const absl::string_view verb = event.verb;
  const absl::string_view subresource = event.object_ref.subresource;
  if (!subresource.empty() && !(subresource == "scale" && IsMutatingVerb(verb))) {
    return Outcome::kNonScaleSubresource;
  }
  if (event.stage != "ResponseComplete") return Outcome::kStage;
  if (!IsMutatingVerb(verb)) return Outcome::kReadOnlyOrUnknownVerb;
  if (event.response_code >= 300) return Outcome::kFailedRequest;
  if (IsDryRun(event.request_uri)) return Outcome::kDryRun;
  const absl::string_view request_rv = event.request_object.metadata.resource_version;
  if (!request_rv.empty() && request_rv == event.response_object.metadata.resource_version) {
    return Outcome::kUnchangedResourceVersion;
  }
  return Outcome::kQueued;
}

namespace {

const UserInfo& EffectiveUser(const AuditEvent& event) {
  return event.impersonated_user.username.empty() ? event.user : event.impersonated_user;
}

}  // namespace

Actor EffectiveActor(const AuditEvent& event) {
  const UserInfo& user = EffectiveUser(event);
  Actor actor;
  actor.username = std::string(user.username);
  actor.display_name = std::string(user.display_name);
  actor.email = std::string(user.email);
  actor.is_service_account = absl::StartsWith(user.username, "system:serviceaccount:");
  return actor;
}

void AppendFacts(const AuditEvent& event, std::vector<redisstore::AuthorFact>& facts) {
  if (Classify(event) != Outcome::kQueued) return;
  const ObjectReference& ref = event.object_ref;
  const UserInfo& user = EffectiveUser(event);
  if (ref.resource.empty() || user.username.empty()) return;

  redisstore::AuthorFact base;
  base.group_resource = ref.api_group.empty() ? std::string(ref.resource)
                                              : absl::StrCat(ref.api_group, "/", ref.resource);
  base.namespace_ = std::string(ref.namespace_);
  base.author = std::string(user.username);
  base.display_name = std::string(user.display_name);
  base.email = std::string(user.email);
  base.is_service_account = absl::StartsWith(user.username, "system:serviceaccount:");
  base.verb = std::string(event.verb);
  base.subresource = std::string(ref.subresource);
  base.audit_id = std::string(event.audit_id);
  base.stage_timestamp = std::string(event.stage_timestamp);

  const EmbeddedObject& response = event.response_object;
  const EmbeddedObject& request = event.request_object;
  if (event.verb == "deletecollection") {
    // The response lists what was removed; a hollow body (Status or no items) yields nothing.
    if (!response.has_items) return;
    for (const ObjectIdentity& item : response.items) {
      if (item.name.empty() || item.uid.empty()) continue;
      redisstore::AuthorFact& fact = facts.emplace_back(base);
      fact.name = std::string(item.name);
      fact.uid = std::string(item.uid);
      if (fact.namespace_.empty()) fact.namespace_ = std::string(item.namespace_);
      fact.resource_version = std::string(item.resource_version);
    }
    return;
  }

  // Identity backfill: create with generateName has no objectRef.name; the body has it. A delete
  // answers with the deleted object or a Status, so only an object's metadata is trusted.
  const bool response_is_object = response.kind != "Status";
  absl::string_view name = ref.name;
  if (name.empty() && response_is_object) name = response.metadata.name;
  if (name.empty()) name = request.metadata.name;
  if (name.empty()) return;
  absl::string_view uid = ref.uid;
  if (uid.empty() && response_is_object) uid = response.metadata.uid;
  // An immediate delete answers with a Status whose details name the removed object.
  if (uid.empty() && !response_is_object) uid = response.details_uid;
  redisstore::AuthorFact& fact = facts.emplace_back(std::move(base));
  fact.name = std::string(name);
  fact.uid = std::string(uid);
  if (fact.namespace_.empty() && response_is_object) {
    fact.namespace_ = std::string(response.metadata.namespace_);
  }
  // The post-write RV; the request's RV is the precondition, not the result.
  absl::string_view resource_version =
      response_is_object ? response.metadata.resource_version : absl::string_view();
  if (resource_version.empty()) resource_version = ref.resource_version;
  fact.resource_version = std::string(resource_version);
}

std::vector<redisstore::AuthorFact> ExtractFacts(const AuditEvent& event) {
  std::vector<redisstore::AuthorFact> facts;
  AppendFacts(event, facts);
  return facts;
}

}  // namespace reverser::audit
