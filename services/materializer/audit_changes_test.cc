#include "services/materializer/audit_changes.h"

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "services/materializer/stream_entries.h"

namespace reverser::materializer {
namespace {

using nlohmann::json;
using redisstore::ChangeOp;

// Decodes `event` as the webhook does, then converts it.
AuditChanges Changes(const json& event) {
  auto decoded = audit::ParseEvent(event.dump());
  EXPECT_TRUE(decoded.ok()) << decoded.status();
  if (!decoded.ok()) return {};
  return ChangesFromAuditEvent((*decoded)[0]);
}

json Event(const std::string& verb, json response, int code = 200) {
  json event = {{"kind", "Event"},
                {"apiVersion", "audit.k8s.io/v1"},
                {"level", "RequestResponse"},
                {"auditID", "id-1"},
                {"stage", "ResponseComplete"},
                {"verb", verb},
                {"requestURI", "/api/v1/namespaces/team/configmaps"},
                {"user", {{"username", "alice"}}},
                {"objectRef",
                 {{"resource", "configmaps"}, {"namespace", "team"}, {"apiVersion", "v1"}}},
                {"responseStatus", {{"code", code}}}};
  if (!response.is_null()) event["responseObject"] = std::move(response);
  return event;
}

json ConfigMap(const std::string& name, const std::string& rv) {
  return {{"kind", "ConfigMap"},
          {"apiVersion", "v1"},
          {"metadata",
           {{"name", name},
            {"namespace", "team"},
            {"uid", "uid-" + name},
            {"resourceVersion", rv},
            {"managedFields", json::array({{{"manager", "kubectl"}}})}}},
          {"data", {{"k", "v"}}}};
}

TEST(AuditChangesTest, CreateUpdateAndPatchBecomeAddedAndModifiedWithTheResponseBody) {
  AuditChanges created = Changes(Event("create", ConfigMap("a", "10"), 201));
  ASSERT_EQ(created.changes.size(), 1u);
  const redisstore::StreamEntry& entry = created.changes[0].entry;
  EXPECT_EQ(entry.op, ChangeOp::kAdded);
  EXPECT_EQ(entry.source, redisstore::ChangeSource::kAudit);
  EXPECT_EQ(entry.uid, "uid-a");
  EXPECT_EQ(entry.namespace_, "team");
  EXPECT_EQ(entry.name, "a");
  EXPECT_EQ(entry.resource_version, "10");
  json stored = json::parse(entry.object_json);
  EXPECT_FALSE(stored["metadata"].contains("managedFields"));
  // The bytes the watch intake stores for the same object.
  EXPECT_EQ(entry.object_json, StoredObjectJson(ConfigMap("a", "10")));
  EXPECT_EQ(stored["data"]["k"], "v");
  EXPECT_EQ(created.changes[0].gvr, (core::GroupVersionResource{"", "v1", "configmaps"}));
  EXPECT_FALSE(created.changes[0].body_from_materialization);

  EXPECT_EQ(Changes(Event("update", ConfigMap("a", "11"))).changes[0].entry.op,
            ChangeOp::kModified);
  EXPECT_EQ(Changes(Event("patch", ConfigMap("a", "12"))).changes[0].entry.op,
            ChangeOp::kModified);
  // Server-side apply (or an update) that creates answers 201: the watch says ADDED.
  EXPECT_EQ(Changes(Event("patch", ConfigMap("b", "13"), 201)).changes[0].entry.op,
            ChangeOp::kAdded);
}

TEST(AuditChangesTest, DeleteAnsweredWithTheObjectIsDeletedOrModifiedWhenOnlyMarked) {
  AuditChanges deleted = Changes(Event("delete", ConfigMap("a", "20")));
  ASSERT_EQ(deleted.changes.size(), 1u);
  EXPECT_EQ(deleted.changes[0].entry.op, ChangeOp::kDeleted);
  EXPECT_EQ(deleted.changes[0].entry.resource_version, "20");

  json held = ConfigMap("a", "21");
  held["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z";
  held["metadata"]["finalizers"] = json::array({"example.com/keep"});
  EXPECT_EQ(Changes(Event("delete", held, 202)).changes[0].entry.op,
            ChangeOp::kModified);
  json graceful = ConfigMap("p", "22");
  graceful["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z";
  graceful["metadata"]["deletionGracePeriodSeconds"] = 30;
  EXPECT_EQ(Changes(Event("delete", graceful)).changes[0].entry.op,
            ChangeOp::kModified);
}

TEST(AuditChangesTest, DeleteAnsweredWithStatusTakesIdentityFromRefAndUidFromDetails) {
  json event = Event("delete", {{"kind", "Status"},
                                {"apiVersion", "v1"},
                                {"status", "Success"},
                                {"details", {{"name", "a"}, {"kind", "configmaps"}, {"uid", "uid-a"}}}});
  event["objectRef"]["name"] = "a";
  AuditChanges changes = Changes(event);
  ASSERT_EQ(changes.changes.size(), 1u);
  const AuditChange& change = changes.changes[0];
  EXPECT_TRUE(change.body_from_materialization);
  EXPECT_EQ(change.entry.op, ChangeOp::kDeleted);
  EXPECT_EQ(change.entry.name, "a");
  EXPECT_EQ(change.entry.namespace_, "team");
  EXPECT_EQ(change.entry.uid, "uid-a");
  EXPECT_EQ(change.entry.resource_version, "");  // attached to the stream top
  EXPECT_EQ(change.entry.object_json, "");
}

TEST(AuditChangesTest, DeleteCollectionYieldsOneEntryPerItemTypedFromTheList) {
  json a = ConfigMap("a", "30");
  json b = ConfigMap("b", "31");
  for (json* item : {&a, &b}) {
    item->erase("kind");
    item->erase("apiVersion");
  }
  json response = {{"kind", "ConfigMapList"},
                   {"apiVersion", "v1"},
                   {"metadata", {{"resourceVersion", "31"}}},
                   {"items", {a, b}}};
  AuditChanges changes = Changes(Event("deletecollection", response));
  ASSERT_EQ(changes.changes.size(), 2u);
  for (const AuditChange& change : changes.changes) {
    EXPECT_EQ(change.entry.op, ChangeOp::kDeleted);
    json object = json::parse(change.entry.object_json);
    EXPECT_EQ(object["kind"], "ConfigMap");
    EXPECT_EQ(object["apiVersion"], "v1");
  }
  EXPECT_EQ(changes.changes[1].entry.resource_version, "31");
  // A hollow answer (Status) yields nothing.
  EXPECT_EQ(Changes(Event("deletecollection", {{"kind", "Status"}})).skipped,
            AuditSkip::kNoResponseBody);
}

TEST(AuditChangesTest, WhatCannotBecomeAnEntryIsSkippedWithAReason) {
  // Below RequestResponse there is no body.
  EXPECT_EQ(Changes(Event("update", nullptr)).skipped, AuditSkip::kNoResponseBody);
  // Read-only, failed and dry-run requests are not accepted at all.
  EXPECT_EQ(Changes(Event("get", ConfigMap("a", "1"))).skipped,
            AuditSkip::kNotAccepted);
  EXPECT_EQ(Changes(Event("update", ConfigMap("a", "1"), 409)).skipped,
            AuditSkip::kNotAccepted);
  // A scale write answers with a Scale, not the object.
  json scale = Event("update", {{"kind", "Scale"}, {"metadata", {{"name", "web"}}}});
  scale["objectRef"]["subresource"] = "scale";
  EXPECT_EQ(Changes(scale).skipped, AuditSkip::kSubresource);
  // No name anywhere.
  json nameless = ConfigMap("", "5");
  EXPECT_EQ(Changes(Event("create", nameless, 201)).skipped, AuditSkip::kNoIdentity);
  // Garbage never crashes.
  EXPECT_EQ(Changes(json("text")).skipped, AuditSkip::kNotAccepted);
  json odd = Event("create", json::array({1, 2}), 201);
  odd["objectRef"] = 7;
  EXPECT_TRUE(Changes(odd).changes.empty());
}

}  // namespace
}  // namespace reverser::materializer
