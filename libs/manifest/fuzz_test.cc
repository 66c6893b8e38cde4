// Robustness: hostile and mutated input must give a Status, never a crash, and whatever the
// path functions accept must stay inside the target directory. Deterministic (fixed seeds).

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "libs/manifest/paths.h"
#include "libs/manifest/yaml_reader.h"
#include "libs/manifest/yaml_writer.h"

namespace reverser::manifest {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Inputs that made yaml-cpp 0.7 allocate without bound (found by this test).
TEST(FuzzTest, KnownYamlCppKillersAreRefusedQuickly) {
  for (const char* text : {",|a", ",piVersion: v1\nk: Secret\n{etadata:\n  name> ,est@-se"}) {
    EXPECT_FALSE(ParseYamlDocuments(text).ok()) << text;
  }
}

TEST(FuzzTest, MutatedManifestsParseOrFailCleanly) {
  std::vector<std::string> seeds;
  for (const auto& entry : fs::directory_iterator("libs/manifest/testdata")) {
    if (entry.path().extension() != ".yaml") continue;
    std::ifstream in(entry.path());
    std::stringstream text;
    text << in.rdbuf();
    seeds.push_back(text.str());
  }
  ASSERT_FALSE(seeds.empty());
  std::mt19937 rng(20261129);
  const std::string specials = "[]{}:-?|>!&*#%@`'\"\n\t ,\\\x85\xC2\xE2\x80\xA8~<";
  int parsed = 0, refused = 0;
  for (int round = 0; round < 3000; ++round) {
    std::string text = seeds[rng() % seeds.size()];
    const int edits = 1 + rng() % 8;
    for (int e = 0; e < edits && !text.empty(); ++e) {
      const size_t at = rng() % text.size();
      switch (rng() % 4) {
        case 0: text[at] = specials[rng() % specials.size()]; break;
        case 1: text.insert(at, 1, specials[rng() % specials.size()]); break;
        case 2: text.erase(at, 1 + rng() % 4); break;
        case 3: text.resize(at); break;
      }
    }
    auto result = ParseYamlDocuments(text);
    if (!result.ok()) {
      ++refused;
      continue;
    }
    ++parsed;
    // Whatever parses re-renders, and the rendering reads back to the same value.
    for (const json& document : *result) {
      auto yaml = MarshalYaml(document);
      ASSERT_TRUE(yaml.ok()) << yaml.status();
      auto again = ParseYaml(*yaml);
      ASSERT_TRUE(again.ok()) << again.status() << "\n" << *yaml;
      EXPECT_EQ(*again, document) << *yaml;
    }
  }
  EXPECT_GT(parsed, 0);
  EXPECT_GT(refused, 0);
}

TEST(FuzzTest, AcceptedPlacementPathsNeverEscape) {
  std::mt19937 rng(7);
  const std::vector<std::string> pieces = {
      "{name}", "{namespace}", "{namespaceOrCluster}", "{groupPath}", "{resource}", "{kind}",
      "{apiVersion}", "{sensitiveSuffix}", "{bogus}", "/", "//", "..", ".", "\\", "a", ".yaml",
      ".yml", "{", "}", "%", std::string(1, '\0'), "\n"};
  const std::vector<std::string> names = {"web", "..", "a/b", "a%2Fb", "system:x", "x\\y", ".",
                                          "with space", "ünï"};
  int accepted = 0;
  for (int round = 0; round < 20000; ++round) {
    std::string tmpl;
    const int n = 1 + rng() % 7;
    for (int i = 0; i < n; ++i) tmpl += pieces[rng() % pieces.size()];
    ObjectIdentity id{{rng() % 2 ? "" : "apps", "v1", "deployments"},
                      "Deployment",
                      rng() % 2 ? core::Scope::kCluster : core::Scope::kNamespaced,
                      "",
                      names[rng() % names.size()],
                      rng() % 2 == 0};
    if (id.scope == core::Scope::kNamespaced) id.namespace_ = rng() % 2 ? "prod" : "../x";
    auto path = RenderPlacementTemplate(tmpl, id);
    if (!path.ok()) continue;
    ++accepted;
    EXPECT_TRUE(ValidateRelativePath(*path).ok()) << *path;
    EXPECT_NE(path->front(), '/') << *path;
    EXPECT_FALSE(absl::StrContains("/" + *path + "/", "/../")) << *path;
    EXPECT_FALSE(absl::StrContains(*path, "\\")) << *path;
    EXPECT_EQ(path->find('\0'), std::string::npos);
  }
  EXPECT_GT(accepted, 100);
}

}  // namespace
}  // namespace reverser::manifest
