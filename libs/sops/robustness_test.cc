// Bad input must give an error, never a crash: mutated real SOPS and age files, YAML bombs.

#include <random>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "libs/sops/age.h"
#include "libs/sops/secret_file.h"
#include "libs/sops/sops.h"
#include "libs/sops/sops_yaml.h"
#include "libs/sops/test_random.h"
#include "nlohmann/json.hpp"
#include "tests/fixtures/runfiles.h"
#include "tests/fixtures/temp_dir.h"

namespace reverser::sops {
namespace {

std::string Read(const std::string& relative) {
  auto dir = reverser::testing::TestdataDir();
  EXPECT_TRUE(dir.ok());
  auto text = reverser::testing::ReadFile(*dir + "/sops/" + relative);
  EXPECT_TRUE(text.ok()) << relative;
  return text.ok() ? *text : "";
}

std::string Mutate(std::string s, std::mt19937& rng) {
  if (s.empty()) return s;
  std::uniform_int_distribution<size_t> pos(0, s.size() - 1);
  switch (rng() % 4) {
    case 0:
      s[pos(rng)] = static_cast<char>(rng());
      break;  // flip a byte
    case 1:
      s.erase(pos(rng), 1 + rng() % 8);
      break;  // delete a run
    case 2:
      s.insert(pos(rng), std::string(1 + rng() % 4, "\n :-[\"|"[rng() % 7]));
      break;
    default:
      s.resize(pos(rng));
      break;  // truncate
  }
  return s;
}

TEST(RobustnessTest, MutatedSopsFilesNeverCrashTheReader) {
  const std::string original = Read("fluxcd-kustomize-controller/algorithms/age.yaml");
  auto identities = age::ParseIdentityFile(Read("fluxcd-kustomize-controller/keys/age.txt"));
  ASSERT_TRUE(identities.ok());
  ASSERT_TRUE(DecryptYaml(original, *identities).ok());
  std::mt19937 rng(42);
  int failures = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string mutated = original;
    for (int n = 1 + rng() % 3; n > 0; --n) mutated = Mutate(mutated, rng);
    auto result = DecryptYaml(mutated, *identities);
    if (!result.ok()) ++failures;
  }
  EXPECT_GT(failures, 2000);  // nearly every mutation is caught (the MAC covers every value)
}

TEST(RobustnessTest, MutatedAgeFilesNeverCrashTheDecrypter) {
  auto identities = age::ParseIdentityFile(Read("fluxcd-kustomize-controller/keys/age.txt"));
  ASSERT_TRUE(identities.ok());
  auto binary = age::Encrypt("payload", {identities->front().Recipient()});
  ASSERT_TRUE(binary.ok());
  std::mt19937 rng(7);
  for (int i = 0; i < 3000; ++i) {
    const std::string mutated = Mutate(*binary, rng);
    auto plain = age::Decrypt(mutated, *identities);
    if (plain.ok()) {
      EXPECT_EQ(*plain, "payload");  // only harmless edits may pass
    }
    (void)age::Dearmor(Mutate(age::Armor(*binary), rng));
  }
}

TEST(RobustnessTest, YamlBombsAndDeepNestingAreRefused) {
  std::string deep;
  for (int i = 0; i < 5000; ++i) deep += "[";
  EXPECT_FALSE(ParseSopsYaml(absl::StrCat("a: ", deep)).ok());
  std::string nested = "a:\n";
  for (int i = 1; i < 600; ++i) nested += std::string(i * 2, ' ') + "a:\n";
  EXPECT_FALSE(ParseSopsYaml(nested).ok());
  std::string bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n";
  for (int i = 0; i < 8; ++i) {
    bomb += absl::StrCat(std::string(1, 'b' + i), ": &", std::string(1, 'b' + i), " [",
                         std::string(1, 'a' + i));
    for (int k = 0; k < 9; ++k) bomb += absl::StrCat(", *", std::string(1, 'a' + i));
    bomb += "]\n";
  }
  EXPECT_FALSE(ParseSopsYaml(bomb).ok());
}

TEST(RobustnessTest, SelfReferencingAliasIsRefused) {
  // An alias inside its own anchor names an anchor that is not defined yet.
  auto cyclic = ParseSopsYaml("a: &x [1, *x]\n");
  EXPECT_EQ(cyclic.status().code(), absl::StatusCode::kInvalidArgument) << cyclic.status();
}

// Inputs on which yaml-cpp 0.7 (the reader before libyaml) allocated without bound; the first,
// found by fuzz/sops_file_fuzzer, grew to 7 GB in a minute.
TEST(RobustnessTest, YamlCppRunawayInputsAreRefused) {
  for (const char* text :
       {"  ,   ey: ENCglo[baA", ",|a", ",piVersion: v1\nk: Secret\n{etadata:\n  name> ,est@-se"}) {
    EXPECT_FALSE(ParseSopsYaml(text).ok()) << text;
    EXPECT_FALSE(LooksLikeSopsYaml(absl::StrCat(text, "\nmac: ENC[")));
  }
}

// `{"a": {"a": ... "leaf"}}`, `depth` levels below the top, built without recursion.
template <typename JsonLike>
JsonLike Nested(int depth) {
  JsonLike value = "leaf";
  for (int i = 0; i < depth; ++i) {
    JsonLike outer = JsonLike::object();
    outer["a"] = std::move(value);
    value = std::move(outer);
  }
  return value;
}

// Nesting far beyond what a SOPS file holds is refused before any recursive walk (a stack
// overflow otherwise); moderate nesting still round-trips.
TEST(RobustnessTest, DeepObjectsAreRefusedBeforeAnyRecursion) {
  constexpr int kDeep = 200'000;
  testing::ScriptedRandom keys;
  const auto identity = *age::X25519Identity::Generate(keys);
  nlohmann::json secret = {{"apiVersion", "v1"}, {"kind", "Secret"}};
  secret["metadata"] = {{"name", "deep"}, {"namespace", "prod"}};
  secret["data"] = Nested<nlohmann::json>(kDeep);
  auto refused = EncryptSecretYaml(secret, {identity.Recipient().String()});
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(refused.status().message(), "Secret prod/deep nests deeper"))
      << refused.status();
  EXPECT_EQ(SecretFingerprint(secret, {identity.Recipient().String()}, std::string(32, 'k'))
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);

  // "sops" first: growing an ordered_json object copies its members, and a copy recurses.
  Tree deep = Tree::object();
  deep["sops"] = Tree::object();
  deep["data"] = Nested<Tree>(kDeep);
  EXPECT_EQ(EmitSopsYaml(deep).status().code(), absl::StatusCode::kInvalidArgument);
  Tree plaintext = Tree::object();
  plaintext["data"] = Nested<Tree>(kDeep);
  auto encrypted = EncryptTree(plaintext, {identity.Recipient()}, EncryptOptions{});
  EXPECT_EQ(encrypted.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(encrypted.status().message(), "deeper than 512"))
      << encrypted.status();
  EXPECT_EQ(DecryptTreeWithDataKey(deep, std::string(32, 'k')).status().code(),
            absl::StatusCode::kInvalidArgument);

  secret["data"] = Nested<nlohmann::json>(100);
  auto text = EncryptSecretYaml(secret, {identity.Recipient().String()});
  ASSERT_TRUE(text.ok()) << text.status();
  auto back = DecryptSecretYaml(*text, {identity});
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, secret);
}

}  // namespace
}  // namespace reverser::sops
