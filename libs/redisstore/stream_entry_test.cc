#include "libs/redisstore/stream_entry.h"

#include "gtest/gtest.h"

namespace reverser::redisstore {
namespace {

TEST(StreamEntryTest, EncodeDecodeRoundTrip) {
  StreamEntry entry;
  entry.op = ChangeOp::kAdded;
  entry.uid = "u-1";
  entry.namespace_ = "default";
  entry.name = "web";
  entry.resource_version = "42";
  entry.object_json = R"({"metadata":{"name":"web","annotations":{"k":"é\u0000"}}})";
  entry.source = ChangeSource::kAudit;
  entry.audit_id = "a-1";
  entry.user = "alice";
  auto decoded = DecodeEntry("42-3", EncodeEntryFields(entry));
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  entry.position = core::StreamPosition(42, 3);
  EXPECT_EQ(*decoded, entry);
  EXPECT_EQ(decoded->Identity(), "default/web");
}

TEST(StreamEntryTest, OptionalFieldsAreOmitted) {
  StreamEntry entry;
  entry.op = ChangeOp::kDeleted;
  entry.name = "node-a";
  auto fields = EncodeEntryFields(entry);
  EXPECT_EQ(fields.size(), 14u);
  EXPECT_EQ(entry.Identity(), "node-a");
}

TEST(StreamEntryTest, DecodeRejectsMalformedEntries) {
  EXPECT_FALSE(DecodeEntry("1-0", {"op"}).ok());
  EXPECT_FALSE(DecodeEntry("x", {"op", "ADDED", "name", "a", "src", "watch", "obj", "{}"}).ok());
  EXPECT_FALSE(DecodeEntry("1-0", {"op", "PATCHED", "name", "a", "src", "watch"}).ok());
  EXPECT_FALSE(DecodeEntry("1-0", {"op", "ADDED", "name", "a", "src", "carrier-pigeon"}).ok());
  EXPECT_FALSE(DecodeEntry("1-0", {"op", "ADDED", "src", "watch", "obj", "{}"}).ok());
  EXPECT_FALSE(DecodeEntry("1-0", {"op", "MODIFIED", "name", "a", "src", "watch"}).ok());
  EXPECT_TRUE(DecodeEntry("1-0", {"op", "DELETED", "name", "a", "src", "list"}).ok());
}

TEST(StreamEntryTest, ApplyIsLastWriterWinsAndDeletesDrop) {
  ObjectMap objects;
  StreamEntry a{.op = ChangeOp::kAdded, .namespace_ = "ns", .name = "a", .object_json = "1"};
  ApplyEntry(a, objects);
  a.op = ChangeOp::kModified;
  a.object_json = "2";
  ApplyEntry(a, objects);
  EXPECT_EQ(objects.at("ns/a"), "2");
  a.op = ChangeOp::kDeleted;
  ApplyEntry(a, objects);
  EXPECT_TRUE(objects.empty());
  ApplyEntry(a, objects);  // deleting the absent is a no-op
  EXPECT_TRUE(objects.empty());
}

}  // namespace
}  // namespace reverser::redisstore
