// Golden tests: real objects (see testdata/SOURCES.md) against hand-checked sanitized forms.

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "libs/sanitize/sanitize.h"
#include "nlohmann/json.hpp"

namespace reverser::sanitize {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const fs::path kTestdata = "libs/sanitize/testdata";

json ReadJson(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return json::parse(buffer.str());
}

std::vector<fs::path> Inputs() {
  std::vector<fs::path> inputs;
  for (const auto& entry : fs::directory_iterator(kTestdata)) {
    if (entry.path().extension() == ".json") inputs.push_back(entry.path());
  }
  std::sort(inputs.begin(), inputs.end());
  return inputs;
}

TEST(SanitizeGoldenTest, EveryInputMatchesItsExpectedForm) {
  const std::vector<fs::path> inputs = Inputs();
  ASSERT_GE(inputs.size(), 19u);
  for (const fs::path& input : inputs) {
    SCOPED_TRACE(input.filename().string());
    const fs::path expected_path = kTestdata / "expected" / input.filename();
    ASSERT_TRUE(fs::exists(expected_path));
    auto sanitized = Sanitize(ReadJson(input));
    ASSERT_TRUE(sanitized.ok()) << sanitized.status();
    EXPECT_EQ(*sanitized, ReadJson(expected_path)) << sanitized->dump(2);
  }
}

TEST(SanitizeGoldenTest, NoServerFieldEverSurvives) {
  for (const fs::path& input : Inputs()) {
    SCOPED_TRACE(input.filename().string());
    auto sanitized = Sanitize(ReadJson(input));
    ASSERT_TRUE(sanitized.ok()) << sanitized.status();
    EXPECT_FALSE(sanitized->contains("status"));
    const json metadata = sanitized->value("metadata", json::object());
    for (const char* field : {"uid", "resourceVersion", "generation", "creationTimestamp",
                              "managedFields", "ownerReferences", "selfLink", "finalizers",
                              "deletionTimestamp", "generateName"}) {
      EXPECT_FALSE(metadata.contains(field)) << field;
    }
    // Sanitizing is idempotent.
    auto twice = Sanitize(*sanitized);
    ASSERT_TRUE(twice.ok());
    EXPECT_EQ(*twice, *sanitized);
  }
}

TEST(SanitizeGoldenTest, StatusOnlyChurnHashesEqualAndSpecChangeDoesNot) {
  // Two real MODIFIED events of one Deployment that differ only in resourceVersion and status.
  const json first = ReadJson(kTestdata / "captured-deployment-status-update-1.json");
  const json second = ReadJson(kTestdata / "captured-deployment-status-update-2.json");
  ASSERT_NE(first, second);
  EXPECT_EQ(*SanitizedContentHash(first), *SanitizedContentHash(second));

  // The scale patch changes spec.replicas (and a label), so it must hash differently.
  const json scaled = ReadJson(kTestdata / "captured-deployment-scale-patch-2.json");
  EXPECT_NE(*SanitizedContentHash(first), *SanitizedContentHash(scaled));
}

}  // namespace
}  // namespace reverser::sanitize
