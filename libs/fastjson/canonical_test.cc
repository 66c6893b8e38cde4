#include "libs/fastjson/canonical.h"

#include <filesystem>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/fixtures/runfiles.h"
#include "tests/fixtures/temp_dir.h"

namespace reverser::fastjson {
namespace {

using nlohmann::json;

// What the project wrote before this writer existed.
std::string NlohmannDump(absl::string_view text) { return json::parse(text).dump(); }

std::string Canonical(absl::string_view text, Omit omit = {}) {
  CanonicalWriter writer;
  absl::StatusOr<std::string> out = writer.Canonicalize(text, omit);
  EXPECT_TRUE(out.ok()) << out.status() << " for " << text;
  return out.ok() ? *out : "";
}

TEST(CanonicalWriterTest, MatchesNlohmannOnHandWrittenDocuments) {
  for (absl::string_view text : {
           R"({})",
           R"([])",
           R"({"b":1,"a":{"d":[1,2,{"z":null,"y":true}],"c":false},"":"empty key"})",
           R"({"s":"quote \" backslash \\ slash \/ tab \t nl \n cr \r bs \b ff \f"})",
           R"({"ctl":"\u0001\u001f\u007f","uni":"é 日本 \ud83d\ude00","esc":"\u00e9"})",
           R"({"n":[0,-1,9223372036854775807,-9223372036854775808,18446744073709551615]})",
           R"({"B":1,"a":2,"_":3,"aa":4,"a-b":5,"é":6,"z":7})",
           R"(  {"spaces" : [ 1 , 2 ] }  )",
           R"("top-level string")",
           R"(42)",
           R"(null)",
       }) {
    EXPECT_EQ(Canonical(text), NlohmannDump(text)) << text;
  }
}

TEST(CanonicalWriterTest, MatchesNlohmannOnEveryCapturedKubernetesDocument) {
  absl::StatusOr<std::string> testdata = testing::TestdataDir();
  ASSERT_TRUE(testdata.ok()) << testdata.status();
  int compared = 0;
  for (const auto& file : std::filesystem::recursive_directory_iterator(*testdata + "/k8s")) {
    if (file.path().extension() != ".json") continue;
    absl::StatusOr<std::string> text = testing::ReadFile(file.path().string());
    ASSERT_TRUE(text.ok());
    json parsed = json::parse(*text, nullptr, /*allow_exceptions=*/false);
    if (parsed.is_discarded()) continue;
    CanonicalWriter writer;
    absl::StatusOr<std::string> out = writer.Canonicalize(*text);
    if (absl::IsUnimplemented(out.status())) continue;  // floats: the caller falls back
    ASSERT_TRUE(out.ok()) << file.path() << ": " << out.status();
    EXPECT_EQ(*out, parsed.dump()) << file.path();
    ++compared;
  }
  EXPECT_GT(compared, 40);
}

TEST(CanonicalWriterTest, OmitsOneMemberOfOneRootMember) {
  const char* text =
      R"({"metadata":{"name":"a","managedFields":[{"manager":"kubectl"}]},)"
      R"("spec":{"managedFields":"kept: not under metadata"},"managedFields":"kept: root"})";
  EXPECT_EQ(Canonical(text, {"metadata", "managedFields"}),
            R"({"managedFields":"kept: root","metadata":{"name":"a"},)"
            R"("spec":{"managedFields":"kept: not under metadata"}})");
  // Nested deeper than one level is not the member asked for.
  EXPECT_EQ(Canonical(R"({"metadata":{"x":{"managedFields":1}}})", {"metadata", "managedFields"}),
            R"({"metadata":{"x":{"managedFields":1}}})");
  // A metadata that is not an object is written as it is.
  EXPECT_EQ(Canonical(R"({"metadata":"m"})", {"metadata", "managedFields"}), R"({"metadata":"m"})");
}

TEST(CanonicalWriterTest, LeavesWhatItCannotReproduceToTheCaller) {
  CanonicalWriter writer;
  EXPECT_TRUE(absl::IsUnimplemented(writer.Canonicalize(R"({"f":1.5})").status()));
  EXPECT_TRUE(absl::IsUnimplemented(writer.Canonicalize(R"({"f":1e3})").status()));
  EXPECT_TRUE(absl::IsUnimplemented(writer.Canonicalize(R"({"a":1,"a":2})").status()));
  EXPECT_TRUE(
      absl::IsUnimplemented(writer.Canonicalize(R"({"big":123456789012345678901234567890})")
                                .status()));
  // The writer is still usable afterwards.
  EXPECT_EQ(*writer.Canonicalize(R"({"b":1,"a":0})"), R"({"a":0,"b":1})");
}

TEST(CanonicalWriterTest, RejectsInvalidInputWithAClearError) {
  CanonicalWriter writer;
  for (absl::string_view text : {"", "{", "{\"a\":}", "[1,2", "{\"a\":\"\xff\xfe\"}", "nul",
                                 "{\"a\":1}x"}) {
    absl::StatusOr<std::string> out = writer.Canonicalize(text);
    EXPECT_TRUE(absl::IsInvalidArgument(out.status())) << text << ": " << out.status();
  }
  std::string deep(100000, '[');
  EXPECT_FALSE(writer.Canonicalize(deep).ok());
  std::string nested;
  for (int i = 0; i < 600; ++i) nested += "{\"a\":";
  nested += "1";
  for (int i = 0; i < 600; ++i) nested += "}";
  EXPECT_FALSE(writer.Canonicalize(nested).ok());
}

TEST(AppendQuotedTest, EscapesAsNlohmannDoes) {
  for (std::string text : {std::string(""), std::string("plain"), std::string("\"\\\n\x01\x7f"),
                           std::string("\0x", 2), std::string("日本")}) {
    std::string out;
    AppendQuoted(text, out);
    EXPECT_EQ(out, json(text).dump());
  }
}

TEST(AppendQuotedTest, EveryEscapeAtEveryPositionOfTheWordAtATimeScan) {
  for (size_t length = 1; length <= 40; ++length) {
    for (size_t at = 0; at < length; ++at) {
      for (char special : {'"', '\\', '\n', '\x01', '\x1f', '\x7f', '\x20', '\xc3'}) {
        std::string text(length, 'a');
        text[at] = special;
        if (special == '\xc3') text.insert(at + 1, 1, '\xa9');  // é, valid UTF-8
        std::string out;
        AppendQuoted(text, out);
        ASSERT_EQ(out, json(text).dump()) << "length " << length << " at " << at;
      }
    }
  }
}

}  // namespace
}  // namespace reverser::fastjson
