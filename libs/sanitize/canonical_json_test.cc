#include "libs/sanitize/canonical_json.h"

#include <cstdint>
#include <limits>

#include "gtest/gtest.h"

namespace reverser::sanitize {
namespace {

using nlohmann::json;

// Expected strings are what Go's encoding/json.Marshal prints for the same decoded value.
TEST(CanonicalJsonTest, SortsKeysAndIsCompact) {
  const json value = json::parse(R"({"b": [1, true, null], "a": {"z": "", "B": 2}})");
  EXPECT_EQ(CanonicalJson(value), R"({"a":{"B":2,"z":""},"b":[1,true,null]})");
}

TEST(CanonicalJsonTest, EscapesStringsLikeGo) {
  EXPECT_EQ(CanonicalJson("<a&b>"), R"("\u003ca\u0026b\u003e")");
  EXPECT_EQ(CanonicalJson("q\"b\\"), R"("q\"b\\")");
  EXPECT_EQ(CanonicalJson("\n\r\t\b\f"), R"("\n\r\t\b\f")");
  EXPECT_EQ(CanonicalJson(std::string("\x01\x1f", 2)), R"("\u0001\u001f")");
  EXPECT_EQ(CanonicalJson("line\u2028sep\u2029"), R"("line\u2028sep\u2029")");
  EXPECT_EQ(CanonicalJson("héllo ✓ 😀"), "\"héllo ✓ 😀\"");
  // Invalid UTF-8 (a lone continuation byte, an overlong form, a surrogate) becomes U+FFFD.
  EXPECT_EQ(CanonicalJson(std::string("a\x80z")), R"("a\ufffdz")");
  EXPECT_EQ(CanonicalJson(std::string("\xC0\xAF")), R"("\ufffd\ufffd")");
  EXPECT_EQ(CanonicalJson(std::string("\xED\xA0\x80")), R"("\ufffd\ufffd\ufffd")");
  EXPECT_EQ(CanonicalJson("\x7f"), "\"\x7f\"");
}

TEST(CanonicalJsonTest, EscapesKeysToo) {
  EXPECT_EQ(CanonicalJson(json{{"a<b", 1}}), R"({"a\u003cb":1})");
}

TEST(CanonicalJsonTest, FormatsNumbersLikeGo) {
  EXPECT_EQ(CanonicalJson(json(-5)), "-5");
  EXPECT_EQ(CanonicalJson(json(std::numeric_limits<uint64_t>::max())), "18446744073709551615");
  EXPECT_EQ(CanonicalJson(json(std::numeric_limits<int64_t>::min())), "-9223372036854775808");
  EXPECT_EQ(CanonicalJson(json::parse("1.0")), "1");
  EXPECT_EQ(CanonicalJson(json::parse("0.5")), "0.5");
  EXPECT_EQ(CanonicalJson(json::parse("-0.0")), "-0");
  EXPECT_EQ(CanonicalJson(json::parse("0.1")), "0.1");
  EXPECT_EQ(CanonicalJson(json::parse("1e20")), "100000000000000000000");
  EXPECT_EQ(CanonicalJson(json::parse("1e21")), "1e+21");
  EXPECT_EQ(CanonicalJson(json::parse("0.000001")), "0.000001");
  EXPECT_EQ(CanonicalJson(json::parse("1e-7")), "1e-7");
  EXPECT_EQ(CanonicalJson(json::parse("1.5e-10")), "1.5e-10");
  EXPECT_EQ(CanonicalJson(json::parse("123456.789")), "123456.789");
}

}  // namespace
}  // namespace reverser::sanitize
