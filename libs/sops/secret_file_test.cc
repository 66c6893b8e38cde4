#include "libs/sops/secret_file.h"

#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "libs/core/clock.h"
#include "libs/sops/age.h"
#include "libs/sops/sops.h"
#include "libs/sops/sops_yaml.h"
#include "libs/sops/test_random.h"
#include "nlohmann/json.hpp"
#include "tests/fixtures/process.h"
#include "tests/fixtures/runfiles.h"
#include "tests/fixtures/temp_dir.h"

namespace reverser::sops {
namespace {

std::string SopsTestdata() {
  auto dir = reverser::testing::TestdataDir();
  EXPECT_TRUE(dir.ok()) << dir.status();
  return dir.ok() ? *dir + "/sops" : "";
}

nlohmann::json SanitizedSecret() {
  return nlohmann::json::parse(R"({
    "apiVersion": "v1", "kind": "Secret",
    "metadata": {"name": "db", "namespace": "prod", "labels": {"app": "db"},
                 "annotations": {"example.com/revision": "017"}},
    "type": "Opaque", "immutable": false,
    "data": {"password": "aHVudGVyMg==", "username": "YWRtaW4=", "123": "MTIz"},
    "stringData": {"token": "s3cr3t-t0ken"},
    "status": {"ignored": true}
  })");
}

class SecretFileTest : public ::testing::Test {
 protected:
  SecretFileTest() : clock_(absl::FromUnixSeconds(1'767'322'245)) {  // 2026-01-02T02:50:45Z
    identity_ = *age::X25519Identity::Generate(keys_);
    other_ = *age::X25519Identity::Generate(keys_);
    options_.clock = &clock_;
    options_.random = &random_;
  }
  testing::ScriptedRandom keys_;
  testing::ScriptedRandom random_;
  core::FakeClock clock_;
  age::X25519Identity identity_ = *age::X25519Identity::FromSecretKey(std::string(32, 1));
  age::X25519Identity other_ = identity_;
  SecretFileOptions options_;
};

TEST_F(SecretFileTest, WritesOrderedSopsFileThatDecryptsToTheObject) {
  auto text = EncryptSecretYaml(
      SanitizedSecret(), {identity_.Recipient().String(), other_.Recipient().String()}, options_);
  ASSERT_TRUE(text.ok()) << text.status();

  // Top-level order: apiVersion, kind, metadata, payload (sorted), sops last; no status.
  std::vector<std::string> top;
  for (absl::string_view line : absl::StrSplit(*text, '\n')) {
    if (!line.empty() && line[0] != ' ') top.emplace_back(line.substr(0, line.find(':')));
  }
  EXPECT_EQ(top, (std::vector<std::string>{"apiVersion", "kind", "metadata", "data", "immutable",
                                           "stringData", "type", "sops"}));
  EXPECT_TRUE(absl::StartsWith(*text,
                               "apiVersion: v1\nkind: Secret\nmetadata:\n    annotations:\n"
                               "        example.com/revision: \"017\"\n    labels:\n"
                               "        app: db\n    name: db\n    namespace: prod\n"
                               "data:\n    \"123\": ENC[AES256_GCM,data:"));
  EXPECT_TRUE(absl::StrContains(*text, "\n    lastmodified: \"2026-01-02T02:50:45Z\"\n"));
  for (const char* clear : {"aHVudGVyMg==", "YWRtaW4=", "MTIz", "s3cr3t-t0ken", "ignored"}) {
    EXPECT_FALSE(absl::StrContains(*text, clear)) << clear;
  }

  for (const auto& id : {identity_, other_}) {
    auto decrypted = DecryptYaml(*text, {id});
    ASSERT_TRUE(decrypted.ok()) << decrypted.status();
    nlohmann::json expected = SanitizedSecret();
    expected.erase("status");
    EXPECT_EQ(nlohmann::json::parse(decrypted->plaintext.dump()), expected);
  }
}

TEST_F(SecretFileTest, InjectedRandomnessAndClockGiveIdenticalBytes) {
  testing::ScriptedRandom again;
  SecretFileOptions options = options_;
  auto first = EncryptSecretYaml(SanitizedSecret(), {identity_.Recipient().String()}, options);
  options.random = &again;
  auto second = EncryptSecretYaml(SanitizedSecret(), {identity_.Recipient().String()}, options);
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_EQ(*first, *second);
  // And real randomness does not.
  options.random = &crypto::SystemRandom();
  auto third = EncryptSecretYaml(SanitizedSecret(), {identity_.Recipient().String()}, options);
  ASSERT_TRUE(third.ok());
  EXPECT_NE(*first, *third);
}

// Same `sops:` block shape as a real sops 3.10.2 file (Flux global/secret.yaml): the keys, their
// order, a quoted lastmodified, a plain one-line mac, 5 base64 lines per enc.
TEST_F(SecretFileTest, MetadataBlockHasTheShapeOfRealSops310Output) {
  auto ours = EncryptSecretYaml(SanitizedSecret(), {identity_.Recipient().String()}, options_);
  ASSERT_TRUE(ours.ok());
  auto real_text = reverser::testing::ReadFile(SopsTestdata() +
                                               "/fluxcd-kustomize-controller/global/secret.yaml");
  ASSERT_TRUE(real_text.ok());
  auto real = ParseSopsYaml(*real_text);
  auto mine = ParseSopsYaml(*ours);
  ASSERT_TRUE(real.ok() && mine.ok());
  std::vector<std::string> real_keys;
  std::vector<std::string> my_keys;
  for (const auto& item : (*real)["sops"].items()) real_keys.push_back(item.key());
  for (const auto& item : (*mine)["sops"].items()) my_keys.push_back(item.key());
  EXPECT_EQ(my_keys, real_keys);
  EXPECT_EQ((*mine)["sops"]["encrypted_regex"], (*real)["sops"]["encrypted_regex"]);
  for (const Tree* tree : {&*real, &*mine}) {
    const std::string enc = (*tree)["sops"]["age"][0]["enc"].get<std::string>();
    EXPECT_EQ(std::count(enc.begin(), enc.end(), '\n'), 7);
    EXPECT_EQ(enc.size(), (*real)["sops"]["age"][0]["enc"].get<std::string>().size());
  }
  EXPECT_TRUE(absl::StrContains(*ours, "\n    mac: ENC[AES256_GCM,"));
  EXPECT_TRUE(absl::StrContains(*real_text, "\n  mac: ENC[AES256_GCM,"));  // Flux uses indent 2
}

TEST_F(SecretFileTest, FailsClosedWithoutValidRecipients) {
  auto none = EncryptSecretYaml(SanitizedSecret(), {}, options_);
  EXPECT_EQ(none.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(none.status().message(), "Secret prod/db")) << none.status();
  EXPECT_EQ(EncryptSecretYaml(SanitizedSecret(), {"", "  "}, options_).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(EncryptSecretYaml(SanitizedSecret(), {"age1nope"}, options_).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(EncryptSecretYaml(SanitizedSecret(), {"age1pq1xyz"}, options_).status().code(),
            absl::StatusCode::kUnimplemented);
  const std::string secret = identity_.String();
  auto leaked = EncryptSecretYaml(SanitizedSecret(), {secret}, options_);
  ASSERT_FALSE(leaked.ok());
  EXPECT_FALSE(absl::StrContains(leaked.status().message(), secret.substr(16, 20)));
}

TEST_F(SecretFileTest, RefusesObjectsItCannotWriteFaithfully) {
  const std::vector<std::string> r = {identity_.Recipient().String()};
  EXPECT_FALSE(EncryptSecretYaml(nlohmann::json::array(), r, options_).ok());
  EXPECT_FALSE(EncryptSecretYaml(nlohmann::json{{"kind", "Secret"}}, r, options_).ok());
  nlohmann::json with_sops = SanitizedSecret();
  with_sops["sops"] = "x";
  EXPECT_FALSE(EncryptSecretYaml(with_sops, r, options_).ok());
  nlohmann::json bad_utf8 = SanitizedSecret();
  bad_utf8["data"]["x"] = std::string("\xff\xfe");
  EXPECT_EQ(EncryptSecretYaml(bad_utf8, r, options_).status().code(),
            absl::StatusCode::kInvalidArgument);
  nlohmann::json bad_meta = SanitizedSecret();
  bad_meta["metadata"] = "oops";
  EXPECT_FALSE(EncryptSecretYaml(bad_meta, r, options_).ok());
}

TEST_F(SecretFileTest, ReadsBackWhatItWroteWhenAKeyIsAvailable) {
  auto text = EncryptSecretYaml(SanitizedSecret(), {identity_.Recipient().String()}, options_);
  ASSERT_TRUE(text.ok());
  EXPECT_TRUE(LooksLikeSopsYaml(*text));
  EXPECT_FALSE(LooksLikeSopsYaml("apiVersion: v1\nkind: Secret\n"));
  EXPECT_FALSE(LooksLikeSopsYaml("note: \"mac: ENC[\"\n"));
  auto object = DecryptSecretYaml(*text, {other_, identity_});
  ASSERT_TRUE(object.ok()) << object.status();
  nlohmann::json expected = SanitizedSecret();
  expected.erase("status");
  EXPECT_EQ(*object, expected);
  EXPECT_EQ(DecryptSecretYaml(*text, {other_}).status().code(), absl::StatusCode::kNotFound);
  // Real sops output reads the same way.
  auto real = reverser::testing::ReadFile(SopsTestdata() +
                                          "/fluxcd-kustomize-controller/global/secret.yaml");
  ASSERT_TRUE(real.ok());
  EXPECT_TRUE(LooksLikeSopsYaml(*real));
  auto key = reverser::testing::ReadFile(SopsTestdata() +
                                         "/fluxcd-kustomize-controller/keys/age-global.txt");
  ASSERT_TRUE(key.ok());
  auto real_object = DecryptSecretYaml(*real, *age::ParseIdentityFile(*key));
  ASSERT_TRUE(real_object.ok()) << real_object.status();
  EXPECT_EQ((*real_object)["stringData"]["key"], "global-value");
}

// Found by //fuzz:sops_file_fuzzer's seed made this way: whoever holds a recipient's public key can
// write a file that verifies and whose value is any bytes. Reading it is refused, not a crash.
TEST_F(SecretFileTest, RefusesAValueThatDecryptsToBytesThatAreNotUtf8) {
  Tree plaintext = Tree::parse(R"({"apiVersion": "v1", "kind": "Secret",
                                   "metadata": {"name": "s", "namespace": "prod"}})");
  plaintext["data"]["k"] = std::string("\xff\xfe");
  EncryptOptions encrypt;
  encrypt.random = &random_;
  auto text = EncryptYaml(plaintext, {identity_.Recipient()}, encrypt);
  ASSERT_TRUE(text.ok()) << text.status();
  auto object = DecryptSecretYaml(*text, {identity_});
  EXPECT_EQ(object.status().code(), absl::StatusCode::kInvalidArgument) << object.status();
  EXPECT_FALSE(absl::StrContains(object.status().message(), "\xff"));
}

TEST(BootstrapSopsConfigTest, RendersTheReferenceTemplate) {
  const std::string a = "age1l44xcng8dqj32nlv6d930qvvrny05hglzcv9qpc7kxjc6902ma4qufys29";
  const std::string b = "age1henwn645drkd3fa34t27t2w2x0nsgw3w4h62gmg5x5xflyjpy38s5cncph";
  auto config = BootstrapSopsConfig({a, " " + b + " ", a, ""});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(*config,
            "# .sops.yaml\n"
            "creation_rules:\n"
            "  # Encrypt only Kubernetes Secret payloads written as *.sops.yaml files.\n"
            "  - path_regex: '.*\\.sops\\.ya?ml$'\n"
            "    encrypted_regex: '^(data|stringData)$'\n"
            "    key_groups:\n"
            "      - age:\n"
            "          - \"" +
                b +
                "\"\n"
                "          - \"" +
                a + "\"\n");
  EXPECT_EQ(BootstrapSopsConfig({}).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_FALSE(BootstrapSopsConfig({"not-a-key"}).ok());
}

TEST(RecipientFromAgeKeyTest, DerivesThePublicKey) {
  auto text =
      reverser::testing::ReadFile(SopsTestdata() + "/fluxcd-kustomize-controller/keys/age.txt");
  ASSERT_TRUE(text.ok());
  auto recipient = RecipientFromAgeKey(*text);
  ASSERT_TRUE(recipient.ok()) << recipient.status();
  EXPECT_EQ(*recipient, "age1l44xcng8dqj32nlv6d930qvvrny05hglzcv9qpc7kxjc6902ma4qufys29");
  EXPECT_FALSE(RecipientFromAgeKey("# only a comment\n").ok());
  EXPECT_FALSE(RecipientFromAgeKey(*text + *text).ok());
  EXPECT_FALSE(
      RecipientFromAgeKey("age1l44xcng8dqj32nlv6d930qvvrny05hglzcv9qpc7kxjc6902ma4qufys29").ok());
}

TEST(SecretFingerprintTest, ChangesExactlyWhenTheFileWouldMeanSomethingElse) {
  const std::string key(32, 'k');
  const std::string a = "age1l44xcng8dqj32nlv6d930qvvrny05hglzcv9qpc7kxjc6902ma4qufys29";
  const std::string b = "age1henwn645drkd3fa34t27t2w2x0nsgw3w4h62gmg5x5xflyjpy38s5cncph";
  auto base = SecretFingerprint(SanitizedSecret(), {a, b}, key);
  ASSERT_TRUE(base.ok()) << base.status();
  EXPECT_EQ(base->size(), 64u);
  EXPECT_EQ(*SecretFingerprint(SanitizedSecret(), {b, a, a}, key), *base);
  nlohmann::json changed = SanitizedSecret();
  changed["data"]["password"] = "b3RoZXI=";
  EXPECT_NE(*SecretFingerprint(changed, {a, b}, key), *base);
  EXPECT_NE(*SecretFingerprint(SanitizedSecret(), {a}, key), *base);
  EXPECT_NE(*SecretFingerprint(SanitizedSecret(), {a, b}, std::string(32, 'j')), *base);
  EXPECT_FALSE(SecretFingerprint(SanitizedSecret(), {a}, "short").ok());
}

// End to end through Debian's age: the data key in each `enc` of the file is what the SOPS
// reader needs to verify the MAC.
TEST(SecretFileCliTest, AgeCliUnwrapsTheDataKeyThatVerifiesTheFile) {
  auto which = reverser::testing::RunCommand({"/bin/sh", "-c", "command -v age-keygen"});
  if (!which.ok() || which->exit_code != 0) GTEST_SKIP() << "age CLI not installed";
  reverser::testing::ScopedTempDir dir("secret-file-cli");
  auto keygen = reverser::testing::RunCommand({"age-keygen"});
  ASSERT_TRUE(keygen.ok() && keygen->exit_code == 0);
  const std::string key_path = dir.path() + "/key.txt";
  ASSERT_TRUE(reverser::testing::WriteFile(key_path, keygen->out).ok());
  auto recipient = reverser::testing::RunCommand({"age-keygen", "-y", key_path});
  ASSERT_TRUE(recipient.ok() && recipient->exit_code == 0);
  auto text = EncryptSecretYaml(SanitizedSecret(), {recipient->out});  // trailing \n is trimmed
  ASSERT_TRUE(text.ok()) << text.status();
  auto tree = ParseSopsYaml(*text);
  ASSERT_TRUE(tree.ok());
  auto data_key = reverser::testing::RunCommand(
      {"age", "-d", "-i", key_path}, (*tree)["sops"]["age"][0]["enc"].get<std::string>());
  ASSERT_TRUE(data_key.ok());
  ASSERT_EQ(data_key->exit_code, 0) << data_key->err;
  ASSERT_EQ(data_key->out.size(), 32u);
  auto decrypted = DecryptTreeWithDataKey(*tree, data_key->out);
  ASSERT_TRUE(decrypted.ok()) << decrypted.status();
  EXPECT_EQ((*&decrypted->plaintext)["stringData"]["token"], "s3cr3t-t0ken");
}

}  // namespace
}  // namespace reverser::sops

namespace reverser::sops {
namespace {

// Optional: an independent reader (npm `sops-age` 4.0.2: typage + noble AES-GCM, no MAC check)
// decrypts what we write. Opt in with
//   bazel test //libs/sops:secret_file_test --test_env=REVERSER_SOPS_AGE_JS=<dir>
// where <dir>/node_modules/sops-age exists (`npm install sops-age@4.0.2` in <dir>).
TEST(IndependentReaderTest, NpmSopsAgeDecryptsOurFile) {
  const char* js_dir = std::getenv("REVERSER_SOPS_AGE_JS");
  if (js_dir == nullptr || *js_dir == '\0') GTEST_SKIP() << "REVERSER_SOPS_AGE_JS not set";
  reverser::testing::ScopedTempDir dir("sops-age-js");
  testing::ScriptedRandom keys;
  auto identity = *age::X25519Identity::Generate(keys);
  nlohmann::json secret = SanitizedSecret();
  secret["data"].erase("123");  // sops-age drops digit-only path keys from the AAD (its bug)
  auto text = EncryptSecretYaml(secret, {identity.Recipient().String()});
  ASSERT_TRUE(text.ok()) << text.status();
  const std::string file = dir.path() + "/secret.sops.yaml";
  ASSERT_TRUE(reverser::testing::WriteFile(file, *text).ok());
  const std::string script = absl::StrCat(
      "import { decryptSops } from '", js_dir, "/node_modules/sops-age/dist/index.js';\n",
      "const out = await decryptSops({ path: process.argv[2], secretKey: process.argv[3], ",
      "fileType: 'yaml' });\nconsole.log(JSON.stringify(out));\n");
  ASSERT_TRUE(reverser::testing::WriteFile(dir.path() + "/check.mjs", script).ok());
  auto result =
      reverser::testing::RunCommand({"node", dir.path() + "/check.mjs", file, identity.String()});
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(result->exit_code, 0) << result->err;
  secret.erase("status");
  EXPECT_EQ(nlohmann::json::parse(result->out), secret);
}

}  // namespace
}  // namespace reverser::sops
