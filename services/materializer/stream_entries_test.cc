#include "services/materializer/stream_entries.h"

#include <gtest/gtest.h>

#include <thread>

#include "libs/core/json_depth.h"
#include "libs/sanitize/sanitize.h"

namespace reverser::materializer {
namespace {

using nlohmann::json;

// StoredObjectJson skips the copy RemoveManagedFields makes; the bytes must not change.
std::string Reference(const json& object) {
  return sanitize::RemoveManagedFields(object).dump(-1, ' ', false, json::error_handler_t::replace);
}

TEST(StoredObjectJsonTest, SameBytesAsDumpingACopyWithoutManagedFields) {
  const json objects[] = {
      json::parse(R"({"apiVersion":"v1","kind":"ConfigMap","data":{"k":"v \"q\" \u00e9"},
        "metadata":{"name":"a","namespace":"n","resourceVersion":"7","uid":"u",
          "annotations":{"z":"1","a":"2"},
          "managedFields":[{"manager":"kubectl","fieldsV1":{"f:data":{}}}]},
        "zzz":[1,2.5,null,true,{}],"managedFields":"top level stays"})"),
      json::parse(R"({"metadata":{"managedFields":[]}})"),
      json::parse(R"({"metadata":{"name":"no-managed-fields"},"data":{}})"),
      json::parse(R"({"metadata":"not an object"})"),
      json::parse(R"([1,2])"),
      json(nullptr),
      // Invalid UTF-8 is replaced, as in the reference's dump.
      json{{"metadata", {{"name", std::string("bad\xff")}, {"managedFields", json::array()}}}},
  };
  for (const json& object : objects) {
    EXPECT_EQ(StoredObjectJson(object), Reference(object)) << object.dump();
  }
  EXPECT_EQ(StoredObjectJson(objects[1]), R"({"metadata":{}})");
}

TEST(StoreObjectJsonTest, SameEntryAsTheNlohmannPathForEveryShape) {
  for (const char* text : {
           R"({"apiVersion":"v1","kind":"ConfigMap","data":{"k":"v \"q\" \u00e9","b":"x"},
              "metadata":{"name":"a","namespace":"n","resourceVersion":"7","uid":"u",
                "annotations":{"z":"1","a":"2"},
                "managedFields":[{"manager":"kubectl","fieldsV1":{"f:data":{}}}]},
              "managedFields":"top level stays"})",
           // Floats and duplicate keys take the nlohmann path: same bytes either way.
           R"({"metadata":{"name":"f","managedFields":[]},"spec":{"ratio":0.25,"n":1e3}})",
           R"({"metadata":{"name":"d","name":"dup"},"x":1})",
           R"({"metadata":{"name":7,"uid":["u"]},"big":123456789012345678901234567890})",
           R"({"metadata":"not an object"})",
           R"([1,2])",
       }) {
    absl::StatusOr<StoredObject> stored = StoreObjectJson(text);
    ASSERT_TRUE(stored.ok()) << stored.status() << text;
    json object = json::parse(text);
    EXPECT_EQ(stored->json, StoredObjectJson(object)) << text;
    EXPECT_EQ(stored->uid, ObjectMetadata(object, "uid"));
    EXPECT_EQ(stored->namespace_, ObjectMetadata(object, "namespace"));
    EXPECT_EQ(stored->name, ObjectMetadata(object, "name"));
    EXPECT_EQ(stored->resource_version, ObjectMetadata(object, "resourceVersion"));
    redisstore::StreamEntry entry = MakeStreamEntry(redisstore::ChangeOp::kModified, *stored,
                                                    redisstore::ChangeSource::kWatch);
    redisstore::StreamEntry reference = MakeStreamEntry(redisstore::ChangeOp::kModified, object,
                                                        redisstore::ChangeSource::kWatch);
    EXPECT_EQ(entry.object_json, reference.object_json);
    EXPECT_EQ(entry.uid, reference.uid);
    EXPECT_EQ(entry.name, reference.name);
    EXPECT_EQ(entry.resource_version, reference.resource_version);
  }
  EXPECT_EQ(StoreObjectJson(R"({"metadata":{"name":"d","name":"dup"}})")->name, "dup");
}

TEST(StoreObjectJsonTest, InvalidJsonIsAnError) {
  for (const char* text : {"", "{", "{\"a\":tru}", "{\"a\":\"\xff\"}"}) {
    EXPECT_TRUE(absl::IsInvalidArgument(StoreObjectJson(text).status())) << text;
  }
}

TEST(StoreObjectJsonTest, TheDeepestObjectTheApiServerAcceptsIsStored) {
  // 10,000 levels: past the fast writer's depth, so nlohmann's recursive dump takes it. On a
  // worker thread's default stack, as in the service.
  std::string text = R"({"metadata":{"name":"deep","uid":"u","resourceVersion":"3"},"spec":)";
  for (int64_t i = 2; i < core::kApiObjectMaxDepth; ++i) text += R"({"a":)";
  text += "{}";
  text.append(core::kApiObjectMaxDepth - 2, '}');
  text += "}";
  ASSERT_EQ(core::JsonNestingDepth(text), core::kApiObjectMaxDepth);
  absl::StatusOr<StoredObject> stored = absl::UnknownError("not run");
  std::thread worker([&] { stored = StoreObjectJson(text); });
  worker.join();
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_EQ(stored->name, "deep");
  EXPECT_EQ(core::JsonNestingDepth(stored->json), core::kApiObjectMaxDepth);
}

}  // namespace
}  // namespace reverser::materializer
