// What one bad event costs (audit_event.h): a damaged element of `items` is skipped and named,
// the others decode; only broken framing refuses a whole body. Whole-body and piece-by-piece
// decoding agree on every body here.

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "libs/audit/audit_event.h"

namespace reverser::audit {
namespace {

std::string Body(const std::vector<std::string>& items) {
  std::string body =
      R"({"kind":"EventList","apiVersion":"audit.k8s.io/v1","metadata":{},"items":[)";
  for (size_t i = 0; i < items.size(); ++i) absl::StrAppend(&body, i ? "," : "", items[i]);
  return body + "]}";
}

// An accepted update of ConfigMap `name`, `request_object` as its request body.
std::string Update(const std::string& id, const std::string& name,
                   const std::string& request_object = R"({"kind":"ConfigMap"})") {
  return absl::StrCat(
      R"({"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"RequestResponse",)",
      R"("auditID":")", id, R"(","stage":"ResponseComplete","verb":"update",)",
      R"("user":{"username":"alice"},"objectRef":{"resource":"configmaps",)",
      R"("namespace":"team","name":")", name, R"(","apiVersion":"v1"},)",
      R"("responseStatus":{"code":200},"requestObject":)", request_object,
      R"(,"responseObject":{"kind":"ConfigMap","metadata":{"name":")", name, R"(","uid":"u-)", name,
      R"(","resourceVersion":"7"}}})");
}

// An object nested `levels` deep: {"a":{"a":...{}...}}.
std::string Nested(int levels) {
  std::string text;
  for (int i = 1; i < levels; ++i) text += R"({"a":)";
  text += "{}";
  text.append(levels - 1, '}');
  return text;
}

std::vector<std::string> AuditIds(const EventList& list) {
  std::vector<std::string> ids;
  for (const AuditEvent& event : list) ids.emplace_back(event.audit_id);
  return ids;
}

// The outcome of decoding a body: accepted events' IDs, refusals, verdict.
struct Decoded {
  absl::StatusCode code = absl::StatusCode::kOk;
  std::vector<std::string> ids;
  std::vector<RefusedEvent> refused;
};

Decoded Whole(const std::string& body, const DecodeLimits& limits) {
  Decoded out;
  auto list = ParseEventList(body, limits);
  out.code = list.status().code();
  if (!list.ok()) return out;
  out.ids = AuditIds(*list);
  out.refused = list->refused();
  return out;
}

Decoded InPieces(const std::string& body, const DecodeLimits& limits, size_t piece,
                 size_t* most_buffered = nullptr) {
  Decoded out;
  EventListReader reader(limits);
  absl::Status status;
  for (size_t at = 0; at < body.size() && status.ok(); at += piece) {
    status = reader.Feed(absl::string_view(body).substr(at, piece), [&](EventList item) {
      for (const AuditEvent& event : item) out.ids.emplace_back(event.audit_id);
      for (const RefusedEvent& refused : item.refused()) out.refused.push_back(refused);
    });
    if (most_buffered != nullptr)
      *most_buffered = std::max(*most_buffered, reader.buffered_bytes());
  }
  if (status.ok()) status = reader.Finish();
  out.code = status.code();
  if (!status.ok()) {
    out.ids.clear();
    out.refused.clear();
  }
  return out;
}

// Decodes `body` whole and in pieces of several sizes; all must agree. Returns the whole result.
Decoded DecodeEveryWay(const std::string& body, const DecodeLimits& limits = {}) {
  Decoded whole = Whole(body, limits);
  for (size_t piece : {size_t{1}, size_t{7}, size_t{64}, size_t{4096}, body.size() + 1}) {
    Decoded pieces = InPieces(body, limits, piece);
    EXPECT_EQ(pieces.code, whole.code) << "pieces of " << piece;
    EXPECT_EQ(pieces.ids, whole.ids) << "pieces of " << piece;
    EXPECT_EQ(pieces.refused.size(), whole.refused.size()) << "pieces of " << piece;
    for (size_t i = 0; i < std::min(pieces.refused.size(), whole.refused.size()); ++i) {
      EXPECT_EQ(pieces.refused[i].reason, whole.refused[i].reason);
      EXPECT_EQ(pieces.refused[i].index, whole.refused[i].index);
      EXPECT_EQ(pieces.refused[i].audit_id, whole.refused[i].audit_id);
      EXPECT_EQ(pieces.refused[i].name, whole.refused[i].name);
    }
  }
  return whole;
}

TEST(EventListSkipTest, ATooDeepEventIsSkippedAndNamedTheOthersDecode) {
  DecodeLimits limits;
  limits.max_object_depth = 8;
  Decoded d = DecodeEveryWay(Body({Update("a-1", "one"), Update("a-2", "deep", Nested(9)),
                                   Update("a-3", "three", Nested(8))}),
                             limits);
  ASSERT_EQ(d.code, absl::StatusCode::kOk);
  EXPECT_EQ(d.ids, (std::vector<std::string>{"a-1", "a-3"}));  // depth 8 is within the limit
  ASSERT_EQ(d.refused.size(), 1u);
  const RefusedEvent& r = d.refused[0];
  EXPECT_EQ(r.reason, Refusal::kTooDeep);
  EXPECT_EQ(RefusalLabel(r.reason), "too_deep");
  EXPECT_EQ(r.index, 1u);
  EXPECT_EQ(r.audit_id, "a-2");
  EXPECT_EQ(r.verb, "update");
  EXPECT_EQ(r.resource, "configmaps");
  EXPECT_EQ(r.namespace_, "team");
  EXPECT_EQ(r.name, "deep");
  EXPECT_NE(r.message.find("deeper than 9 levels"), std::string::npos) << r.message;
}

TEST(EventListSkipTest, TheDefaultDepthIsTheApiServersOwn) {
  // kube-apiserver accepts objects nested 10,000 levels and no deeper: so does the decoder.
  auto list =
      ParseEventList(Body({Update("a-1", "deepest", Nested(core::kApiObjectMaxDepth)),
                           Update("a-2", "too-deep", Nested(core::kApiObjectMaxDepth + 1))}));
  ASSERT_TRUE(list.ok()) << list.status();
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0].audit_id, "a-1");
  EXPECT_EQ(ExtractFacts((*list)[0]).size(), 1u);
  ASSERT_EQ(list->refused().size(), 1u);
  EXPECT_EQ(list->refused()[0].name, "too-deep");
}

TEST(EventListSkipTest, ATooLargeEventIsSkippedAndNamedFromItsFirstMembers) {
  DecodeLimits limits;
  limits.max_event_bytes = 2048;
  const std::string big = absl::StrCat(R"({"data":")", std::string(8192, 'x'), R"("})");
  size_t most_buffered = 0;
  const std::string body =
      Body({Update("a-1", "one"), Update("a-2", "big", big), Update("a-3", "three")});
  Decoded d = DecodeEveryWay(body, limits);
  ASSERT_EQ(d.code, absl::StatusCode::kOk);
  EXPECT_EQ(d.ids, (std::vector<std::string>{"a-1", "a-3"}));
  ASSERT_EQ(d.refused.size(), 1u);
  EXPECT_EQ(d.refused[0].reason, Refusal::kTooLarge);
  EXPECT_EQ(d.refused[0].index, 1u);
  EXPECT_GT(d.refused[0].bytes, 8192u);
  // auditID and objectRef precede the request body, as kube-apiserver writes them.
  EXPECT_EQ(d.refused[0].audit_id, "a-2");
  EXPECT_EQ(d.refused[0].name, "big");
  // Read in pieces, only the head of the large event is held.
  InPieces(body, limits, 512, &most_buffered);
  EXPECT_LE(most_buffered, limits.max_event_bytes);
}

TEST(EventListSkipTest, AMalformedEventIsSkippedTheOthersDecode) {
  const std::string bad_utf8 = Update("a-2", "bad\xff");
  const std::string missing_colon = R"({"auditID":"a-3","verb" "update"})";
  const std::string bad_literal = "tru";
  Decoded d = DecodeEveryWay(
      Body({Update("a-1", "one"), bad_utf8, missing_colon, bad_literal, Update("a-5", "five")}));
  ASSERT_EQ(d.code, absl::StatusCode::kOk);
  EXPECT_EQ(d.ids, (std::vector<std::string>{"a-1", "a-5"}));
  ASSERT_EQ(d.refused.size(), 3u);
  for (const RefusedEvent& r : d.refused) EXPECT_EQ(r.reason, Refusal::kMalformed);
  EXPECT_EQ(d.refused[0].index, 1u);
  EXPECT_EQ(d.refused[1].index, 2u);
  EXPECT_EQ(d.refused[1].audit_id, "a-3");  // read before the damage
  EXPECT_EQ(d.refused[2].index, 3u);
}

TEST(EventListSkipTest, WrongTypesAndNonObjectsAreEventsNotRefusals) {
  const std::string deep_array = std::string(2000, '[') + std::string(2000, ']');  // within limits
  Decoded d = DecodeEveryWay(Body({R"({"auditID":"a-1","verb":7,"objectRef":"x"})", "null", "5",
                                   R"("text")", "[1,[2]]", deep_array}));
  ASSERT_EQ(d.code, absl::StatusCode::kOk);
  EXPECT_EQ(d.ids.size(), 6u);
  EXPECT_TRUE(d.refused.empty());
}

TEST(EventListSkipTest, BrokenFramingRefusesTheWholeBody) {
  const std::string good = Update("a-1", "one");
  for (const std::string& body : {
           Body({good}) + "x",           // data after the root
           Body({good}).substr(0, 100),  // cut short
           absl::StrCat(R"({"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[)", good,
                        " ", good, "]}"),  // no comma
           absl::StrCat(R"({"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[)", good,
                        ",]}"),              // trailing comma
           Body({R"({"a":[}])"}),            // brackets do not pair
           Body({R"({"a":"unterminated)"}),  // string never ends
           Body({good}).substr(0, Body({good}).size() - 1) + R"(,"items":[]})",  // second items
           std::string(R"({"kind" "EventList"})"),  // no colon at the root
       }) {
    Decoded d = DecodeEveryWay(body);
    EXPECT_EQ(d.code, absl::StatusCode::kInvalidArgument) << body;
    auto whole = ParseEventList(body);
    EXPECT_EQ(whole.status().message(), "request body is not valid JSON") << body;
  }
}

TEST(EventListSkipTest, TheHeaderIsKnownBeforeTheItemsWhenItComesFirst) {
  const std::string body = Body({Update("a-1", "one")});
  EventListReader reader;
  bool known_at_first_item = false;
  ASSERT_TRUE(
      reader.Feed(body, [&](EventList) { known_at_first_item = reader.looks_like_event_list(); })
          .ok());
  EXPECT_TRUE(known_at_first_item);
  EXPECT_TRUE(reader.Finish().ok());

  // Items first: not known until the end, and then checked.
  const std::string items_first = absl::StrCat(
      R"({"items":[)", Update("a-1", "one"), R"(],"kind":"Event","apiVersion":"audit.k8s.io/v1"})");
  EventListReader late;
  ASSERT_TRUE(
      late.Feed(items_first, [&](EventList) { EXPECT_FALSE(late.looks_like_event_list()); }).ok());
  auto verdict = late.Finish();
  EXPECT_EQ(verdict.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(verdict.message().find("kind=\"Event\""), std::string::npos) << verdict.message();
}

TEST(EventListSkipTest, ALongBodyIsReadWithOneEventInMemory) {
  // 2,000 events read in 4 KiB pieces: what the reader holds stays within one event.
  std::vector<std::string> items;
  for (int i = 0; i < 2000; ++i)
    items.push_back(Update(absl::StrCat("a-", i), absl::StrCat("cm-", i)));
  const std::string body = Body(items);
  size_t most_buffered = 0;
  Decoded d = InPieces(body, {}, 4096, &most_buffered);
  ASSERT_EQ(d.code, absl::StatusCode::kOk);
  EXPECT_EQ(d.ids.size(), 2000u);
  EXPECT_LE(most_buffered, items.back().size());
}

}  // namespace
}  // namespace reverser::audit
