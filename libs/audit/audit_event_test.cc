#include "libs/audit/audit_event.h"

#include <fstream>
#include <sstream>

#include "gtest/gtest.h"

namespace reverser::audit {
namespace {

using nlohmann::json;

json Load(const std::string& name) {
  std::ifstream in("libs/audit/testdata/" + name);
  std::stringstream ss;
  ss << in.rdbuf();
  return json::parse(ss.str());
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
  auto empty = ParseEventList(R"({"kind":"EventList","apiVersion":"audit.k8s.io/v1","metadata":{}})");
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
  for (const char* bad : {"", "{", "[]", "null", R"({"kind":"Event","apiVersion":"audit.k8s.io/v1"})",
                          R"({"kind":"EventList","apiVersion":"audit.k8s.io/v1beta1","items":[]})",
                          R"({"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":{}})"}) {
    auto parsed = ParseEventList(bad);
    EXPECT_FALSE(parsed.ok()) << bad;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

TEST(ClassifyTest, AppliesTheReferenceFiltersInOrder) {
  EXPECT_EQ(Classify(UpdateEvent()), Outcome::kQueued);
  EXPECT_EQ(Classify(json()), Outcome::kNilEvent);
  EXPECT_EQ(Classify(json::array()), Outcome::kNilEvent);

  json status = UpdateEvent();
  status["objectRef"]["subresource"] = "status";
  EXPECT_EQ(Classify(status), Outcome::kNonScaleSubresource);
  json scale_get = UpdateEvent();
  scale_get["objectRef"]["subresource"] = "scale";
  scale_get["verb"] = "get";
  EXPECT_EQ(Classify(scale_get), Outcome::kNonScaleSubresource);

  json received = UpdateEvent();
  received["stage"] = "RequestReceived";
  EXPECT_EQ(Classify(received), Outcome::kStage);
  // Subresource is checked before stage, as in the reference.
  status["stage"] = "RequestReceived";
  EXPECT_EQ(Classify(status), Outcome::kNonScaleSubresource);

  json get = UpdateEvent();
  get["verb"] = "get";
  EXPECT_EQ(Classify(get), Outcome::kReadOnlyOrUnknownVerb);
  json conflict = UpdateEvent();
  conflict["responseStatus"]["code"] = 409;
  EXPECT_EQ(Classify(conflict), Outcome::kFailedRequest);
  json dry = UpdateEvent();
  dry["requestURI"] = "/api/v1/namespaces/team/configmaps/cm-a?fieldManager=kubectl&dryRun=All";
  EXPECT_EQ(Classify(dry), Outcome::kDryRun);
  json unchanged = UpdateEvent();
  unchanged["responseObject"]["metadata"]["resourceVersion"] = "41";
  EXPECT_EQ(Classify(unchanged), Outcome::kUnchangedResourceVersion);

  EXPECT_EQ(OutcomeLabel(Outcome::kUnchangedResourceVersion), "unchanged_resource_version");
  EXPECT_EQ(OutcomeCategory(Outcome::kQueued), "accepted");
  EXPECT_EQ(OutcomeCategory(Outcome::kDryRun), "ignored");
}

TEST(ClassifyTest, MutatingScaleSubresourceIsAccepted) {
  json scale = Load("deployment-scale-subresource.json");
  EXPECT_EQ(Classify(scale), Outcome::kQueued);
  auto facts = ExtractFacts(scale);
  ASSERT_EQ(facts.size(), 1u);
  EXPECT_EQ(facts[0].group_resource, "apps/deployments");
  EXPECT_EQ(facts[0].name, "scale-audit-target");
  EXPECT_EQ(facts[0].uid, "251415e8-3e88-4fd3-93e0-a07f99d0a890");
  EXPECT_EQ(facts[0].resource_version, "6977");
  EXPECT_EQ(facts[0].subresource, "scale");
}

TEST(ExtractFactsTest, SingleWriteUsesPostWriteResourceVersionAndClaims) {
  auto facts = ExtractFacts(UpdateEvent());
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
  event["impersonatedUser"] = {{"username", "system:serviceaccount:flux-system:kustomize-controller"}};
  auto facts = ExtractFacts(event);
  ASSERT_EQ(facts.size(), 1u);
  EXPECT_EQ(facts[0].author, "system:serviceaccount:flux-system:kustomize-controller");
  EXPECT_TRUE(facts[0].is_service_account);
  EXPECT_EQ(facts[0].display_name, "");
}

TEST(ExtractFactsTest, GenerateNameCreateTakesNameFromResponse) {
  json create = Load("create_configmap.json");
  auto facts = ExtractFacts(create);
  ASSERT_EQ(facts.size(), 1u);
  EXPECT_EQ(facts[0].name, "my-config");
  json generated = UpdateEvent();
  generated["verb"] = "create";
  generated["objectRef"].erase("name");
  generated["objectRef"].erase("uid");
  generated["objectRef"].erase("resourceVersion");
  generated["requestObject"] = {{"metadata", {{"generateName", "cm-"}}}};
  generated["responseObject"]["metadata"]["name"] = "cm-x7k2p";
  facts = ExtractFacts(generated);
  ASSERT_EQ(facts.size(), 1u);
  EXPECT_EQ(facts[0].name, "cm-x7k2p");
  EXPECT_EQ(facts[0].uid, "u-1");
}

TEST(ExtractFactsTest, SkipsFactsWithoutIdentityOrUser) {
  json no_user = UpdateEvent();
  no_user.erase("user");
  EXPECT_TRUE(ExtractFacts(no_user).empty());
  json no_name = UpdateEvent();
  no_name["objectRef"].erase("name");
  no_name["requestObject"]["metadata"].erase("name");
  no_name["responseObject"]["metadata"].erase("name");
  EXPECT_TRUE(ExtractFacts(no_name).empty());
  json ignored = UpdateEvent();
  ignored["verb"] = "get";
  EXPECT_TRUE(ExtractFacts(ignored).empty());
}

TEST(ExtractFactsTest, DeleteWithStatusBodyKeepsObjectRefIdentity) {
  json del = Load("delete_configmap.json");
  ASSERT_EQ(Classify(del), Outcome::kQueued);
  auto facts = ExtractFacts(del);
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
  auto facts = ExtractFacts(del);
  ASSERT_EQ(facts.size(), 1u);
  EXPECT_EQ(facts[0].uid, "u-9");
  EXPECT_EQ(facts[0].resource_version, "");  // stored as `:last` only
}

TEST(ExtractFactsTest, DeletecollectionExpandsListedItems) {
  json list = Load("audit-deletecollection-proxy-raw-listbody.json")["items"][0];
  auto facts = ExtractFacts(list);
  ASSERT_GE(facts.size(), 2u);
  EXPECT_EQ(facts[0].name, "member-0");
  EXPECT_EQ(facts[0].uid, "e1b076ff-f430-4b82-ad7b-c170c4095fe3");
  EXPECT_EQ(facts[0].group_resource, "wardle.example.com/flunders");
  EXPECT_EQ(facts[0].author, "system:admin");
  for (const auto& f : facts) EXPECT_EQ(f.verb, "deletecollection");  // `:last` only
  json hollow = Load("audit-deletecollection-official-raw-hollow.json")["items"][0];
  EXPECT_EQ(Classify(hollow), Outcome::kQueued);
  EXPECT_TRUE(ExtractFacts(hollow).empty());
}

TEST(ExtractFactsTest, HostileInputNeverThrows) {
  for (const char* text :
       {R"({"objectRef": 5, "verb": "update", "stage": "ResponseComplete", "user": "x"})",
        R"({"objectRef": {"resource": ["x"]}, "verb": "delete", "stage": "ResponseComplete",
            "responseStatus": {"code": "200"}, "user": {"username": 3}})",
        R"({"verb": "deletecollection", "stage": "ResponseComplete", "user": {"username": "u"},
            "objectRef": {"resource": "r"}, "responseObject": {"items": [1, null, {"metadata": 2}]}})"}) {
    json event = json::parse(text);
    EXPECT_NO_THROW((void)Classify(event));
    EXPECT_NO_THROW((void)ExtractFacts(event));
  }
}

}  // namespace
}  // namespace reverser::audit
