// The splice and event derivation, with a model-based test against a real Redis
// materialization: whatever sequence of creates, updates, deletes, compactions, checkpoint
// rebuilds and restarts happens, each target's splice equals the model scoped to that target.

#include "services/splicer/splice.h"

#include <random>

#include "gtest/gtest.h"
#include "libs/core/proto_convert.h"
#include "nlohmann/json.hpp"
#include "tests/fixtures/redis_server.h"
#include "libs/redisstore/test_redis.h"

namespace reverser::splicer {
namespace {

using nlohmann::json;

reverser::v1::Claim ConfigMapClaim() {
  reverser::v1::Claim claim;
  claim.mutable_type()->mutable_gvr()->set_version("v1");
  claim.mutable_type()->mutable_gvr()->set_resource("configmaps");
  claim.mutable_scope()->set_cluster(true);
  return claim;
}

reverser::v1::OperationSet All() {
  reverser::v1::OperationSet ops;
  ops.set_all(true);
  return ops;
}

TargetScope Namespaces(std::vector<std::string> namespaces) {
  TargetScope scope;
  for (auto& ns : namespaces) scope.namespaces[ns] = All();
  return scope;
}

redisstore::StreamEntry Entry(redisstore::ChangeOp op, const std::string& ns,
                              const std::string& name, int rv, const std::string& value,
                              bool deleting = false) {
  json object = {{"apiVersion", "v1"},
                 {"kind", "ConfigMap"},
                 {"metadata",
                  {{"name", name},
                   {"namespace", ns},
                   {"uid", "uid-" + ns + "-" + name},
                   {"resourceVersion", std::to_string(rv)},
                   {"managedFields", json::array()}}},
                 {"data", {{"k", value}}},
                 {"status", {{"x", 1}}}};
  if (deleting) object["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z";
  redisstore::StreamEntry e;
  e.op = op;
  e.uid = "uid-" + ns + "-" + name;
  e.namespace_ = ns;
  e.name = name;
  e.resource_version = std::to_string(rv);
  e.object_json = object.dump();
  return e;
}

TEST(BuildSnapshotTest, FailsClosedWithoutCheckpoint) {
  redisstore::MaterializationView view;
  auto snapshot = BuildSnapshot(view, Namespaces({""}), {}, ConfigMapClaim());
  EXPECT_EQ(snapshot.status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(BuildSnapshotTest, FoldsScopesAndSanitizes) {
  redisstore::MaterializationView view;
  view.checkpoint = core::StreamPosition::EndOf(10);
  view.checkpoint_items["a/one"] = json::parse(Entry(redisstore::ChangeOp::kAdded, "a", "one", 5, "1").object_json).dump();
  view.checkpoint_items["b/two"] = json::parse(Entry(redisstore::ChangeOp::kAdded, "b", "two", 6, "1").object_json).dump();
  auto update = Entry(redisstore::ChangeOp::kModified, "a", "one", 11, "2");
  update.position = {11, 0};
  auto gone = Entry(redisstore::ChangeOp::kModified, "a", "three", 12, "1", /*deleting=*/true);
  gone.position = {12, 0};
  view.tail = {update, gone};
  auto snapshot = BuildSnapshot(view, Namespaces({"a"}), {}, ConfigMapClaim());
  ASSERT_TRUE(snapshot.ok()) << snapshot.status();
  EXPECT_EQ(snapshot->revision(), 10u);
  EXPECT_EQ(core::FromProto(snapshot->coverage_head()), core::StreamPosition(12, 0));
  ASSERT_EQ(snapshot->desired_size(), 1);  // b is out of scope, three is being deleted
  json body = json::parse(snapshot->desired(0).sanitized_json());
  EXPECT_EQ(body["data"]["k"], "2");
  EXPECT_FALSE(body.contains("status"));
  EXPECT_FALSE(body["metadata"].contains("uid"));
  EXPECT_EQ(snapshot->desired(0).ref().uid(), "uid-a-one");

  // Seeding while building gives the cache SeedDedup gives from the finished snapshot.
  DedupCache built;
  ASSERT_TRUE(BuildSnapshot(view, Namespaces({"a"}), {}, ConfigMapClaim(), &built).ok());
  DedupCache seeded;
  SeedDedup(*snapshot, seeded);
  EXPECT_EQ(built, seeded);
  ASSERT_EQ(built.size(), 1u);
  EXPECT_TRUE(built.count("uid-a-one"));
}

TEST(DeriveEventTest, DeletionIntentFilterAndDedup) {
  DedupCache dedup;
  TargetScope scope = Namespaces({"a"});
  auto gvr = ConfigMapClaim().type().gvr();
  auto created = DeriveEvent(Entry(redisstore::ChangeOp::kAdded, "a", "x", 1, "1"), scope, gvr, dedup);
  ASSERT_TRUE(created.event);
  EXPECT_EQ(created.event->operation, reverser::v1::OPERATION_CREATE);
  // Same content (status-only churn): dropped.
  auto same = DeriveEvent(Entry(redisstore::ChangeOp::kModified, "a", "x", 2, "1"), scope, gvr, dedup);
  EXPECT_FALSE(same.event);
  EXPECT_EQ(same.skipped, SkipReason::kUnchanged);
  auto changed = DeriveEvent(Entry(redisstore::ChangeOp::kModified, "a", "x", 3, "2"), scope, gvr, dedup);
  ASSERT_TRUE(changed.event);
  EXPECT_EQ(changed.event->operation, reverser::v1::OPERATION_UPDATE);
  // deletionTimestamp on MODIFIED is a DELETE, and the final DELETED is routed again (no-op).
  auto intent = DeriveEvent(Entry(redisstore::ChangeOp::kModified, "a", "x", 4, "2", true), scope, gvr, dedup);
  ASSERT_TRUE(intent.event);
  EXPECT_EQ(intent.event->operation, reverser::v1::OPERATION_DELETE);
  EXPECT_TRUE(intent.event->removal);
  auto deleted = DeriveEvent(Entry(redisstore::ChangeOp::kDeleted, "a", "x", 5, "2", true), scope, gvr, dedup);
  ASSERT_TRUE(deleted.event);
  EXPECT_EQ(deleted.event->operation, reverser::v1::OPERATION_DELETE);
  // Out of scope, and filtered operations.
  EXPECT_EQ(DeriveEvent(Entry(redisstore::ChangeOp::kAdded, "b", "y", 6, "1"), scope, gvr, dedup).skipped,
            SkipReason::kOutOfScope);
  TargetScope creates_only;
  reverser::v1::OperationSet ops;
  ops.add_operations(reverser::v1::OPERATION_CREATE);
  creates_only.namespaces["a"] = ops;
  EXPECT_EQ(DeriveEvent(Entry(redisstore::ChangeOp::kModified, "a", "z", 7, "9"), creates_only, gvr, dedup).skipped,
            SkipReason::kOperationFiltered);
}

// Entry() with `extra` nested `levels` deep (10,000 is what the API server and the materializer
// accept), as text: building it with nlohmann would copy it recursively.
redisstore::StreamEntry DeepEntry(redisstore::ChangeOp op, const std::string& ns,
                                  const std::string& name, int rv, int levels) {
  redisstore::StreamEntry e = Entry(op, ns, name, rv, "deep");
  e.object_json.pop_back();  // the closing brace
  e.object_json += ",\"extra\":" + std::string(levels, '[') + std::string(levels, ']') + "}";
  return e;
}

TEST(DeepObjectTest, RefusedByTextWithoutParsing) {
  EXPECT_FALSE(TooDeepToDeliver(Entry(redisstore::ChangeOp::kAdded, "a", "x", 1, "1").object_json));
  // `{}` is one level: the object itself plus 511 nested arrays is 512, the most that fits.
  EXPECT_FALSE(
      TooDeepToDeliver(DeepEntry(redisstore::ChangeOp::kAdded, "a", "x", 1, 511).object_json));
  EXPECT_TRUE(
      TooDeepToDeliver(DeepEntry(redisstore::ChangeOp::kAdded, "a", "x", 1, 512).object_json));
  EXPECT_TRUE(
      TooDeepToDeliver(DeepEntry(redisstore::ChangeOp::kAdded, "a", "x", 1, 10000).object_json));
}

TEST(DeepObjectTest, SnapshotListsItAsRefusedAndKeepsTheOthers) {
  redisstore::MaterializationView view;
  view.checkpoint = core::StreamPosition::EndOf(10);
  view.checkpoint_items["a/one"] =
      Entry(redisstore::ChangeOp::kAdded, "a", "one", 5, "1").object_json;
  view.checkpoint_items["a/deep"] =
      DeepEntry(redisstore::ChangeOp::kAdded, "a", "deep", 6, 10000).object_json;
  auto later = DeepEntry(redisstore::ChangeOp::kModified, "a", "one-later", 11, 10000);
  later.position = {11, 0};
  view.tail = {later};
  reverser::v1::Claim claim = ConfigMapClaim();
  claim.mutable_type()->mutable_gvk()->set_kind("ConfigMap");
  DedupCache dedup;
  auto snapshot = BuildSnapshot(view, Namespaces({"a"}), {}, claim, &dedup);
  ASSERT_TRUE(snapshot.ok()) << snapshot.status();
  ASSERT_EQ(snapshot->desired_size(), 1);
  EXPECT_EQ(snapshot->desired(0).ref().name(), "one");
  ASSERT_EQ(snapshot->refused_size(), 2);
  EXPECT_EQ(snapshot->refused(0).ref().namespace_(), "a");
  EXPECT_EQ(snapshot->refused(0).ref().name(), "deep");
  EXPECT_EQ(snapshot->refused(0).gvk().kind(), "ConfigMap");
  EXPECT_EQ(snapshot->refused(0).ref().gvr().resource(), "configmaps");
  EXPECT_TRUE(snapshot->refused(0).sanitized_json().empty());
  EXPECT_EQ(snapshot->refused(1).ref().name(), "one-later");
  EXPECT_EQ(dedup.size(), 1u);
}

TEST(DeepObjectTest, ChangesAreSkippedAndDeletionsGoOutByIdentity) {
  DedupCache dedup;
  TargetScope scope = Namespaces({"a"});
  auto gvr = ConfigMapClaim().type().gvr();
  ASSERT_TRUE(
      DeriveEvent(Entry(redisstore::ChangeOp::kAdded, "a", "x", 1, "1"), scope, gvr, dedup).event);
  auto deep = DeriveEvent(DeepEntry(redisstore::ChangeOp::kModified, "a", "x", 2, 10000), scope,
                          gvr, dedup, "ConfigMap");
  EXPECT_FALSE(deep.event);
  EXPECT_EQ(deep.skipped, SkipReason::kTooDeep);
  EXPECT_STREQ(SkipReasonName(deep.skipped), "too_deep");
  // Back to what Git last got: delivered again (the refusal left Git unchanged, not the dedup).
  auto back =
      DeriveEvent(Entry(redisstore::ChangeOp::kModified, "a", "x", 3, "1"), scope, gvr, dedup);
  ASSERT_TRUE(back.event);
  EXPECT_EQ(back.event->operation, reverser::v1::OPERATION_UPDATE);
  auto deleted = DeriveEvent(DeepEntry(redisstore::ChangeOp::kDeleted, "a", "x", 4, 10000), scope,
                             gvr, dedup, "ConfigMap");
  ASSERT_TRUE(deleted.event);
  EXPECT_EQ(deleted.event->operation, reverser::v1::OPERATION_DELETE);
  EXPECT_TRUE(deleted.event->removal);
  EXPECT_EQ(deleted.event->object.ref().name(), "x");
  EXPECT_EQ(deleted.event->object.ref().uid(), "uid-a-x");
  EXPECT_EQ(deleted.event->object.gvk().kind(), "ConfigMap");
  EXPECT_TRUE(deleted.event->object.sanitized_json().empty());
}

// The model: namespace/name -> value, as the cluster has it.
using Model = std::map<std::string, std::string>;

Model Scoped(const Model& model, const std::set<std::string>& namespaces) {
  Model out;
  for (const auto& [key, value] : model) {
    if (namespaces.count(key.substr(0, key.find('/')))) out[key] = value;
  }
  return out;
}

Model SpliceOf(redisstore::MaterializationStore& store, const TargetScope& scope) {
  auto view = store.Load();
  EXPECT_TRUE(view.ok());
  auto snapshot = BuildSnapshot(*view, scope, {}, ConfigMapClaim());
  EXPECT_TRUE(snapshot.ok()) << snapshot.status();
  Model out;
  for (const auto& body : snapshot->desired()) {
    json object = json::parse(body.sanitized_json());
    out[body.ref().namespace_() + "/" + body.ref().name()] = object["data"]["k"];
  }
  return out;
}

TEST(SpliceModelTest, RandomHistoriesSpliceToTheScopedModel) {
  auto redis = testing::RedisServer::Start();
  ASSERT_TRUE(redis.ok()) << redis.status();
  auto conn = redisstore::ConnectTo(**redis);
  ASSERT_TRUE(conn.ok());
  auto gvr = core::GroupVersionResource{"", "v1", "configmaps"};
  auto store = std::make_unique<redisstore::MaterializationStore>(
      conn->get(), redisstore::KeyPrefix::Default(), gvr, core::WatchScope::Cluster());
  ASSERT_TRUE(store->ReplaceCheckpoint({}, core::StreamPosition::EndOf(1)).ok());

  std::mt19937 rng(20261129);
  Model model;
  const std::vector<std::string> namespaces = {"a", "b", "c"};
  const std::set<std::string> target1 = {"a"}, target2 = {"b", "c"};
  int rv = 1;
  for (int step = 0; step < 400; ++step) {
    int action = rng() % 100;
    std::string ns = namespaces[rng() % namespaces.size()];
    std::string name = "cm" + std::to_string(rng() % 6);
    std::string key = ns + "/" + name;
    if (action < 70) {
      std::string value = std::to_string(rng() % 4);
      bool exists = model.count(key) > 0;
      ASSERT_TRUE(store->Append(Entry(exists ? redisstore::ChangeOp::kModified : redisstore::ChangeOp::kAdded,
                                      ns, name, ++rv, value)).ok());
      model[key] = value;
    } else if (action < 85) {
      if (!model.count(key)) continue;
      ASSERT_TRUE(store->Append(Entry(redisstore::ChangeOp::kDeleted, ns, name, ++rv, model[key])).ok());
      model.erase(key);
    } else if (action < 92) {
      ASSERT_TRUE(store->Compact().ok());
    } else if (action < 96) {
      // A fresh replay: the checkpoint is rebuilt from the model at the current RV.
      redisstore::ObjectMap items;
      for (const auto& [k, v] : model) {
        std::string n = k.substr(k.find('/') + 1), s = k.substr(0, k.find('/'));
        items[redisstore::ObjectIdentity(s, n)] = Entry(redisstore::ChangeOp::kAdded, s, n, rv, v).object_json;
      }
      ASSERT_TRUE(store->ReplaceCheckpoint(items, core::StreamPosition::EndOf(rv)).ok());
    } else {
      // A restart of the reader: a new connection and store.
      store = std::make_unique<redisstore::MaterializationStore>(
          conn->get(), redisstore::KeyPrefix::Default(), gvr, core::WatchScope::Cluster());
    }
    ASSERT_EQ(SpliceOf(*store, Namespaces({"a"})), Scoped(model, target1)) << "step " << step;
    ASSERT_EQ(SpliceOf(*store, Namespaces({"b", "c"})), Scoped(model, target2)) << "step " << step;
  }
}

}  // namespace
}  // namespace reverser::splicer
