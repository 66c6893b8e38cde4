// Objects near etcd's 1.5 MiB limit through the gitworker's SOPS writer: a Secret with a 1 MiB
// data value and one with 1 MiB annotation values are encrypted (with the writer's self-check),
// and the file decrypts to the input, with the data key unwrapped by Debian's `age` CLI. Values
// this long crashed the old std::regex matchers (a stack frame per character).

#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "libs/sops/age.h"
#include "libs/sops/crypto.h"
#include "libs/sops/secret_file.h"
#include "libs/sops/sops.h"
#include "libs/sops/sops_yaml.h"
#include "nlohmann/json.hpp"
#include "tests/fixtures/process.h"
#include "tests/fixtures/temp_dir.h"

namespace reverser::sops {
namespace {

constexpr size_t kMiB = 1 << 20;

// An age key pair made by the `age-keygen` CLI.
struct CliKey {
  std::string path;
  std::string recipient;
};

CliKey MakeCliKey(const std::string& dir) {
  auto keygen = reverser::testing::RunCommand({"age-keygen"});
  EXPECT_TRUE(keygen.ok() && keygen->exit_code == 0);
  CliKey key;
  key.path = dir + "/key.txt";
  EXPECT_TRUE(reverser::testing::WriteFile(key.path, keygen.ok() ? keygen->out : "").ok());
  auto recipient = reverser::testing::RunCommand({"age-keygen", "-y", key.path});
  EXPECT_TRUE(recipient.ok() && recipient->exit_code == 0);
  if (recipient.ok()) key.recipient = std::string(absl::StripAsciiWhitespace(recipient->out));
  return key;
}

// Writes `object` as the gitworker does, then reads the file back two ways: the data key from
// the age CLI with the file's values decrypted here, and the whole read path with the identity.
void ExpectRoundTripThroughAgeCli(const nlohmann::json& object) {
  reverser::testing::ScopedTempDir dir("sops-large");
  const CliKey key = MakeCliKey(dir.path());
  ASSERT_FALSE(key.recipient.empty());
  auto text = EncryptSecretYaml(object, {key.recipient});  // includes the writer's self-check
  ASSERT_TRUE(text.ok()) << text.status();
  ASSERT_TRUE(LooksLikeSopsYaml(*text));

  nlohmann::json expected = object;
  expected.erase("status");
  auto tree = ParseSopsYaml(*text);
  ASSERT_TRUE(tree.ok()) << tree.status();
  const std::string enc = (*tree)["sops"]["age"][0]["enc"].get<std::string>();
  auto data_key = reverser::testing::RunCommand({"age", "-d", "-i", key.path}, enc);
  ASSERT_TRUE(data_key.ok()) << data_key.status();
  ASSERT_EQ(data_key->exit_code, 0) << data_key->err;
  ASSERT_EQ(data_key->out.size(), 32u);
  auto with_key = DecryptTreeWithDataKey(*tree, data_key->out);
  ASSERT_TRUE(with_key.ok()) << with_key.status();
  EXPECT_TRUE(nlohmann::json::parse(with_key->plaintext.dump()) == expected);

  auto keygen_file = reverser::testing::ReadFile(key.path);
  ASSERT_TRUE(keygen_file.ok());
  auto identities = age::ParseIdentityFile(*keygen_file);
  ASSERT_TRUE(identities.ok()) << identities.status();
  auto decrypted = DecryptSecretYaml(*text, *identities);
  ASSERT_TRUE(decrypted.ok()) << decrypted.status();
  EXPECT_TRUE(*decrypted == expected);
}

nlohmann::json Secret() {
  return nlohmann::json::parse(R"({
    "apiVersion": "v1", "kind": "Secret",
    "metadata": {"name": "big", "namespace": "prod"},
    "type": "Opaque"
  })");
}

TEST(LargeValuesTest, SecretWithAMebibyteDataValueDecryptsWithTheAgeCli) {
  std::string bytes(kMiB * 3 / 4, '\0');  // 1 MiB once base64-encoded, as the API server sends it
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i * 131 + i / 7);
  nlohmann::json secret = Secret();
  secret["data"]["release"] = absl::Base64Escape(bytes);
  ASSERT_EQ(secret["data"]["release"].get<std::string>().size(), kMiB);
  secret["data"]["small"] = "eA==";
  ExpectRoundTripThroughAgeCli(secret);
}

// Annotations stay readable (covered by the MAC), so each is a plain YAML scalar of a megabyte
// that the resolver has to type: the shapes of numbers, floats and timestamps included.
TEST(LargeValuesTest, SecretWithMebibyteAnnotationValuesDecryptsWithTheAgeCli) {
  nlohmann::json secret = Secret();
  auto& annotations = secret["metadata"]["annotations"];
  annotations["example.com/text"] = std::string(kMiB, 'x');
  annotations["example.com/digits"] = std::string(kMiB, '7');
  annotations["example.com/dot-float"] = "." + std::string(kMiB - 1, '5');
  annotations["example.com/timestamp"] = "2024-01-02 03:04:05." + std::string(kMiB - 20, '9');
  annotations["example.com/enc-like"] =
      absl::StrCat("ENC[AES256_GCM,data:", std::string(kMiB - 60, 'A'), ",iv:A,tag:A,type:str]");
  secret["data"]["password"] = "aHVudGVyMg==";
  ExpectRoundTripThroughAgeCli(secret);
}

// A mebibyte plain scalar of each shape the resolver tests, through parse and emit: typed as
// short ones are (huge numbers overflow to strings, as in yaml.v3), and a string reads back.
TEST(LargeValuesTest, MebibytePlainScalarsParseAndEmit) {
  enum class Want { kString, kFloat, kRefusedTimestamp };
  const std::pair<std::string, Want> cases[] = {
      {std::string(kMiB, 'x'), Want::kString},
      {std::string(kMiB, '1'), Want::kString},  // beyond int64, uint64 and double
      {"-" + std::string(kMiB, '1') + ".5e3", Want::kString},
      {"0x" + std::string(kMiB, 'f'), Want::kString},
      {"." + std::string(kMiB, '5'), Want::kFloat},
      {"2024-01-02T03:04:05." + std::string(kMiB, '1') + "Z", Want::kRefusedTimestamp},
      {"2024-01-02 03:04:05." + std::string(kMiB, '1'), Want::kRefusedTimestamp},
  };
  for (const auto& [scalar, want] : cases) {
    SCOPED_TRACE(scalar.substr(0, 24));
    auto parsed = ParseSopsYaml(absl::StrCat("value: ", scalar, "\n"));
    switch (want) {
      case Want::kString:
        ASSERT_TRUE(parsed.ok()) << parsed.status();
        EXPECT_TRUE((*parsed)["value"] == scalar);
        break;
      case Want::kFloat:
        ASSERT_TRUE(parsed.ok()) << parsed.status();
        EXPECT_TRUE((*parsed)["value"].is_number_float());
        break;
      case Want::kRefusedTimestamp:  // sops <= 3.9 cannot walk timestamps
        EXPECT_EQ(parsed.status().code(), absl::StatusCode::kUnimplemented) << parsed.status();
        break;
    }
    Tree document = Tree::object();
    document["value"] = scalar;
    auto emitted = EmitSopsYaml(document);
    ASSERT_TRUE(emitted.ok()) << emitted.status();
    auto reparsed = ParseSopsYaml(*emitted);
    ASSERT_TRUE(reparsed.ok()) << reparsed.status();
    EXPECT_TRUE((*reparsed)["value"] == scalar);
  }
}

}  // namespace
}  // namespace reverser::sops
