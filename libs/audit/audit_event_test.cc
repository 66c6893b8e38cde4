#include "libs/audit/audit_event.h"

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/fixtures/runfiles.h"

namespace reverser::audit {
namespace {

using nlohmann::json;

// Decodes one event as the webhook would; the list holds the text the event views into.
EventList Decode(const json& event) {
  auto list = ParseEvent(event.dump());
  EXPECT_TRUE(list.ok()) << list.status();
  return list.ok() ? std::move(*list) : *ParseEvent("null");
}

// A payload below tests/testdata/k8s/audit/.
json Load(const std::string& name) {
  return json::parse(testing::ReadTestdata("k8s/audit/" + name));
}

// A minimal accepted update, edited per test.
json UpdateEvent() {
  return json::parse(R"({
    "kind": "Event", "apiVersion": "audit.k8s.io/v1", "level": "RequestResponse",
    "auditID": "a-1", "stage": "ResponseComplete", "verb": "update",
    "requestURI": "/api/v1/namespaces/team/configmaps/cm-a",
    "user": {"username": "alice@example.com", "groups": ["system:authenticated"],
             "extra": {"configbutler.ai/claims/display-name": ["Alice A."],
                       "configbutler.ai/claims/email": ["alice@example.com"]}},
    "objectRef": {"resource": "configmaps", "namespace": "team", "name": "cm-a",
                  "apiVersion": "v1", "uid": "u-1", "resourceVersion": "41"},
    "responseStatus": {"metadata": {}, "code": 200},
    "requestObject": {"kind": "ConfigMap", "metadata": {"name": "cm-a", "resourceVersion": "41"}},
    "responseObject": {"kind": "ConfigMap", "metadata": {"name": "cm-a", "namespace": "team",
                       "uid": "u-1", "resourceVersion": "42"}},
    "stageTimestamp": "2026-06-02T11:16:29.174537Z"})");
}

TEST(ParseEventListTest, AcceptsEventListsAndRejectsEverythingElse) {
  auto items = ParseEventList(
      R"({"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[{"verb":"get"},{"verb":"create"}]})");
  ASSERT_TRUE(items.ok()) << items.status();
  EXPECT_EQ(items->size(), 2u);
  auto empty =
      ParseEventList(R"({"kind":"EventList","apiVersion":"audit.k8s.io/v1","metadata":{}})");
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
  for (const char* bad :
       {"", "{", "[]", "null", R"({"kind":"Event","apiVersion":"audit.k8s.io/v1"})",
        R"({"kind":"EventList","apiVersion":"audit.k8s.io/v1beta1","items":[]})",
        R"({"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":{}})"}) {
    auto parsed = ParseEventList(bad);
    EXPECT_FALSE(parsed.ok()) << bad;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

TEST(ClassifyTest, AppliesTheReferenceFiltersInOrder) {
  EXPECT_EQ(Classify(Decode(UpdateEvent())[0]), Outcome::kQueued);
  EXPECT_EQ(Classify(Decode(json())[0]), Outcome::kNilEvent);
  EXPECT_EQ(Classify(Decode(json::array())[0]), Outcome::kNilEvent);

  json status = UpdateEvent();
  status["objectRef"]["subresource"] = "status";
  EXPECT_EQ(Classify(Decode(status)[0]), Outcome::kNonScaleSubresource);
  json scale_get = UpdateEvent();
  scale_get["objectRef"]["subresource"] = "scale";
  scale_get["verb"] = "get";
  EXPECT_EQ(Classify(Decode(scale_get)[0]), Outcome::kNonScaleSubresource);

  json received = UpdateEvent();
  received["stage"] = "RequestReceived";
  EXPECT_EQ(Classify(Decode(received)[0]), Outcome::kStage);
  // Subresource is checked before stage, as in the reference.
  status["stage"] = "RequestReceived";
  EXPECT_EQ(Classify(Decode(status)[0]), Outcome::kNonScaleSubresource);

  json get = UpdateEvent();
  get["verb"] = "get";
  EXPECT_EQ(Classify(Decode(get)[0]), Outcome::kReadOnlyOrUnknownVerb);
  json conflict = UpdateEvent();
  conflict["responseStatus"]["code"] = 409;
  EXPECT_EQ(Classify(Decode(conflict)[0]), Outcome::kFailedRequest);
  json dry = UpdateEvent();
  dry["requestURI"] = "/api/v1/namespaces/team/configmaps/cm-a?fieldManager=kubectl&dryRun=All";
  EXPECT_EQ(Classify(Decode(dry)[0]), Outcome::kDryRun);
  json unchanged = UpdateEvent();
  unchanged["responseObject"]["metadata"]["resourceVersion"] = "41";
  EXPECT_EQ(Classify(Decode(unchanged)[0]), Outcome::kUnchangedResourceVersion);

  EXPECT_EQ(OutcomeLabel(Outcome::kUnchangedResourceVersion), "unchanged_resource_version");
  EXPECT_EQ(OutcomeCategory(Outcome::kQueued), "accepted");
  EXPECT_EQ(OutcomeCategory(Outcome::kDryRun), "ignored");
}

TEST(ClassifyTest, MutatingScaleSubresourceIsAccepted) {
  json scale = Load("gitops-reverser-testdata/deployment-scale-subresource.json");
  EXPECT_EQ(Classify(Decode(scale)[0]), Outcome::kQueued);
  auto facts = ExtractFacts(Decode(scale)[0]);
  ASSERT_EQ(facts.size(), 1u);
  EXPECT_EQ(facts[0].group_resource, "apps/deployments");
  EXPECT_EQ(facts[0].name, "scale-audit-target");
  EXPECT_EQ(facts[0].uid, "251415e8-3e88-4fd3-93e0-a07f99d0a890");
  EXPECT_EQ(facts[0].resource_version, "6977");
  EXPECT_EQ(facts[0].subresource, "scale");
}

TEST(ExtractFactsTest, SingleWriteUsesPostWriteResourceVersionAndClaims) {
  auto facts = ExtractFacts(Decode(UpdateEvent())[0]);
  ASSERT_EQ(facts.size(), 1u);
  const redisstore::AuthorFact& f = facts[0];
  EXPECT_EQ(f.group_resource, "configmaps");
  EXPECT_EQ(f.namespace_, "team");
  EXPECT_EQ(f.name, "cm-a");
  EXPECT_EQ(f.uid, "u-1");
  EXPECT_EQ(f.resource_version, "42");  // response RV, never the request's precondition
  EXPECT_EQ(f.author, "alice@example.com");
  EXPECT_EQ(f.display_name, "Alice A.");
  EXPECT_EQ(f.email, "alice@example.com");
  EXPECT_FALSE(f.is_service_account);
  EXPECT_EQ(f.verb, "update");
}

TEST(ExtractFactsTest, ImpersonatedUserIsTheAuthor) {
  json event = UpdateEvent();
  event["user"]["username"] = "system:admin";
  event["impersonatedUser"] = {
      {"username", "system:serviceaccount:flux-system:kustomize-controller"}};
  auto facts = ExtractFacts(Decode(event)[0]);
  ASSERT_EQ(facts.size(), 1u);
  EXPECT_EQ(facts[0].author, "system:serviceaccount:flux-system:kustomize-controller");
  EXPECT_TRUE(facts[0].is_service_account);
  EXPECT_EQ(facts[0].display_name, "");
}

TEST(ExtractFactsTest, GenerateNameCreateTakesNameFromResponse) {
  json create = Load("falco-k8s_audit/create_configmap.json");
  auto facts = ExtractFacts(Decode(create)[0]);
  ASSERT_EQ(facts.size(), 1u);
  EXPECT_EQ(facts[0].name, "my-config");
  json generated = UpdateEvent();
  generated["verb"] = "create";
  generated["objectRef"].erase("name");
  generated["objectRef"].erase("uid");
  generated["objectRef"].erase("resourceVersion");
  generated["requestObject"] = {{"metadata", {{"generateName", "cm-"}}}};
  generated["responseObject"]["metadata"]["name"] = "cm-x7k2p";
  facts = ExtractFacts(Decode(generated)[0]);
  ASSERT_EQ(facts.size(), 1u);
  EXPECT_EQ(facts[0].name, "cm-x7k2p");
  EXPECT_EQ(facts[0].uid, "u-1");
}

TEST(ExtractFactsTest, SkipsFactsWithoutIdentityOrUser) {
  json no_user = UpdateEvent();
  no_user.erase("user");
  EXPECT_TRUE(ExtractFacts(Decode(no_user)[0]).empty());
  json no_name = UpdateEvent();
  no_name["objectRef"].erase("name");
  no_name["requestObject"]["metadata"].erase("name");
  no_name["responseObject"]["metadata"].erase("name");
  EXPECT_TRUE(ExtractFacts(Decode(no_name)[0]).empty());
  json ignored = UpdateEvent();
  ignored["verb"] = "get";
  EXPECT_TRUE(ExtractFacts(Decode(ignored)[0]).empty());
}

TEST(ExtractFactsTest, DeleteWithStatusBodyKeepsObjectRefIdentity) {
  json del = Load("falco-k8s_audit/delete_configmap.json");
  ASSERT_EQ(Classify(Decode(del)[0]), Outcome::kQueued);
  auto facts = ExtractFacts(Decode(del)[0]);
  ASSERT_EQ(facts.size(), 1u);
  EXPECT_EQ(facts[0].verb, "delete");
  EXPECT_EQ(facts[0].name, "my-config");
}

TEST(ExtractFactsTest, ImmediateDeleteTakesTheUidFromTheStatusDetails) {
  json del = UpdateEvent();
  del["verb"] = "delete";
  del["objectRef"].erase("uid");
  del["objectRef"].erase("resourceVersion");
  del["responseObject"] = json::parse(R"({"kind":"Status","apiVersion":"v1","status":"Success",
      "details":{"name":"cm-a","kind":"configmaps","uid":"u-9"}})");
  auto facts = ExtractFacts(Decode(del)[0]);
  ASSERT_EQ(facts.size(), 1u);
  EXPECT_EQ(facts[0].uid, "u-9");
  EXPECT_EQ(facts[0].resource_version, "");  // stored as `:last` only
}

TEST(ExtractFactsTest, DeletecollectionExpandsListedItems) {
  json list =
      Load("gitops-reverser-testdata/audit-deletecollection-proxy-raw-listbody.json")["items"][0];
  auto facts = ExtractFacts(Decode(list)[0]);
  ASSERT_GE(facts.size(), 2u);
  EXPECT_EQ(facts[0].name, "member-0");
  EXPECT_EQ(facts[0].uid, "e1b076ff-f430-4b82-ad7b-c170c4095fe3");
  EXPECT_EQ(facts[0].group_resource, "wardle.example.com/flunders");
  EXPECT_EQ(facts[0].author, "system:admin");
  for (const auto& f : facts) EXPECT_EQ(f.verb, "deletecollection");  // `:last` only
  json hollow =
      Load("gitops-reverser-testdata/audit-deletecollection-official-raw-hollow.json")["items"][0];
  EXPECT_EQ(Classify(Decode(hollow)[0]), Outcome::kQueued);
  EXPECT_TRUE(ExtractFacts(Decode(hollow)[0]).empty());
}

TEST(ExtractFactsTest, HostileInputNeverThrows) {
  for (const char* text :
       {R"({"objectRef": 5, "verb": "update", "stage": "ResponseComplete", "user": "x"})",
        R"({"objectRef": {"resource": ["x"]}, "verb": "delete", "stage": "ResponseComplete",
            "responseStatus": {"code": "200"}, "user": {"username": 3}})",
        R"({"verb": "deletecollection", "stage": "ResponseComplete", "user": {"username": "u"},
            "objectRef": {"resource": "r"}, "responseObject": {"items": [1, null, {"metadata": 2}]}})"}) {
    json event = json::parse(text);
    EXPECT_NO_THROW((void)Classify(Decode(event)[0]));
    EXPECT_NO_THROW((void)ExtractFacts(Decode(event)[0]));
  }
}

TEST(ParseEventListTest, RejectionsSayWhatIsWrong) {
  auto message = [](const std::string& body) {
    auto parsed = ParseEventList(body);
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument) << body;
    return std::string(parsed.status().message());
  };
  for (const char* malformed :
       {"", "{not json", "{", R"({"kind":"EventList"} x)", R"({"kind":"EventList"}})",
        R"({"kind" "EventList"})", R"({"kind":"EventList","items":[{"verb":"get"},]})", "[1,",
        // Malformed inside a value the decoder skips, in a body rejected for its kind.
        R"({"kind":"Event","items":[{"annotations":{"a" "b"}}]})"}) {
    EXPECT_EQ(message(malformed), "request body is not valid JSON") << malformed;
  }
  for (const char* not_object : {"[]", "null", "42", R"("EventList")"}) {
    EXPECT_EQ(message(not_object), "request body is not a JSON object") << not_object;
  }
  EXPECT_EQ(message(R"({"kind":"Event","apiVersion":"audit.k8s.io/v1"})"),
            "expected an audit.k8s.io/v1 EventList, got apiVersion=\"audit.k8s.io/v1\" "
            "kind=\"Event\"");
  // A kind of the wrong type reads as absent.
  EXPECT_EQ(message(R"({"kind":7,"apiVersion":"audit.k8s.io/v1","items":[]})"),
            "expected an audit.k8s.io/v1 EventList, got apiVersion=\"audit.k8s.io/v1\" kind=\"\"");
  EXPECT_EQ(message(R"({"items":5,"kind":"EventList","apiVersion":"audit.k8s.io/v1"})"),
            "EventList items is not a list");
  auto null_items =
      ParseEventList(R"({"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":null})");
  ASSERT_TRUE(null_items.ok());
  EXPECT_TRUE(null_items->empty());
}

TEST(ParseEventListTest, DecodesTheFieldsTheFiltersAndFactsRead) {
  // Keys in any order (kind after items), items that are not objects, escapes, and the bodies'
  // raw text.
  json update = UpdateEvent();
  update["objectRef"]["name"] = "cm-\"quoted\"";
  update["user"]["username"] = "\u00e9l\u00e8ve";  // UTF-8, no escape in nlohmann's output
  json list = {{"items", {update, nullptr, 5, "text", json::array()}},
               {"apiVersion", "audit.k8s.io/v1"},
               {"kind", "EventList"}};
  auto events = ParseEventList(list.dump());
  ASSERT_TRUE(events.ok()) << events.status();
  ASSERT_EQ(events->size(), 5u);
  const AuditEvent& e = (*events)[0];
  EXPECT_TRUE(e.is_object);
  EXPECT_EQ(e.stage, "ResponseComplete");
  EXPECT_EQ(e.verb, "update");
  EXPECT_EQ(e.audit_id, "a-1");
  EXPECT_EQ(e.stage_timestamp, "2026-06-02T11:16:29.174537Z");
  EXPECT_EQ(e.request_uri, "/api/v1/namespaces/team/configmaps/cm-a");
  EXPECT_EQ(e.object_ref.resource, "configmaps");
  EXPECT_EQ(e.object_ref.api_version, "v1");
  EXPECT_EQ(e.object_ref.namespace_, "team");
  EXPECT_EQ(e.object_ref.name, "cm-\"quoted\"");
  EXPECT_EQ(e.object_ref.uid, "u-1");
  EXPECT_EQ(e.object_ref.resource_version, "41");
  EXPECT_EQ(e.response_code, 200);
  EXPECT_EQ(e.user.username, "\u00e9l\u00e8ve");
  EXPECT_EQ(e.user.display_name, "Alice A.");
  EXPECT_EQ(e.user.email, "alice@example.com");
  EXPECT_EQ(e.request_object.metadata.resource_version, "41");
  EXPECT_EQ(e.response_object.kind, "ConfigMap");
  EXPECT_EQ(e.response_object.metadata.uid, "u-1");
  EXPECT_EQ(json::parse(std::string(e.response_object.json)), update["responseObject"]);
  EXPECT_EQ(json::parse(std::string(e.request_object.json)), update["requestObject"]);
  for (size_t i = 1; i < events->size(); ++i) {
    EXPECT_FALSE((*events)[i].is_object);
    EXPECT_EQ(Classify((*events)[i]), Outcome::kNilEvent);
  }
  // The views survive moving the list.
  EventList moved = std::move(*events);
  EXPECT_EQ(moved[0].object_ref.name, "cm-\"quoted\"");
  EXPECT_EQ(moved[0].audit_id, "a-1");
}

TEST(ParseEventListTest, WrongTypesReadAsAbsentAndTheLastRepeatedKeyWins) {
  auto events = ParseEventList(R"({"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[
    {"verb":"update","verb":"delete","stage":["ResponseComplete"],
     "objectRef":{"resource":"configmaps","name":"a"},"objectRef":{"name":"b"},
     "responseStatus":{"code":200.0},"user":{"username":{"n":1},"extra":{
       "configbutler.ai/claims/email":[7,"x"],"configbutler.ai/claims/display-name":[]}},
     "requestObject":"text","responseObject":{"metadata":[],"items":{},"kind":"Status",
       "details":{"uid":"u-9"}}}]})");
  ASSERT_TRUE(events.ok()) << events.status();
  const AuditEvent& e = (*events)[0];
  EXPECT_EQ(e.verb, "delete");
  EXPECT_EQ(e.stage, "");
  EXPECT_EQ(e.object_ref.resource, "");
  EXPECT_EQ(e.object_ref.name, "b");
  EXPECT_EQ(e.response_code, 0);
  EXPECT_EQ(e.user.username, "");
  EXPECT_EQ(e.user.email, "");
  EXPECT_EQ(e.user.display_name, "");
  EXPECT_FALSE(e.request_object.present);
  EXPECT_EQ(e.request_object.json, "");
  EXPECT_TRUE(e.response_object.present);
  EXPECT_FALSE(e.response_object.has_items);
  EXPECT_EQ(e.response_object.details_uid, "u-9");
  EXPECT_EQ(Classify(e), Outcome::kStage);
}

TEST(ParseEventTest, EscapedKeysAndValuesReadAsTheirText) {
  auto events = ParseEvent(R"({"st\u0061ge":"Response\u0043omplete","verb":"upd\"ate",
    "objectRef":{"n\u0061me":"a\\b"}})");
  ASSERT_TRUE(events.ok()) << events.status();
  EXPECT_EQ((*events)[0].stage, "ResponseComplete");
  EXPECT_EQ((*events)[0].verb, "upd\"ate");
  EXPECT_EQ((*events)[0].object_ref.name, "a\\b");
}

TEST(ParseEventTest, RejectsMalformedTextAndDecodesAnyValue) {
  EXPECT_FALSE(ParseEvent("{").ok());
  EXPECT_FALSE(ParseEvent("[1,").ok());
  auto scalar = ParseEvent("5");
  ASSERT_TRUE(scalar.ok());
  ASSERT_EQ(scalar->size(), 1u);
  EXPECT_FALSE((*scalar)[0].is_object);
}

}  // namespace
}  // namespace reverser::audit
