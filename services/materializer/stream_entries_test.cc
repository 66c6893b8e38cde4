#include "services/materializer/stream_entries.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace reverser::materializer
