#include "libs/sops/sops.h"

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "libs/sops/age.h"
#include "libs/sops/crypto.h"
#include "libs/sops/sops_yaml.h"
#include "libs/sops/test_random.h"
#include "nlohmann/json.hpp"
#include "tests/fixtures/process.h"
#include "tests/fixtures/temp_dir.h"

namespace reverser::sops {
namespace {

using crypto::HexDecode;
using crypto::HexEncode;

std::string SopsTestdata() {
  auto dir = reverser::testing::SharedTestdataDir();
  EXPECT_TRUE(dir.ok()) << dir.status();
  return dir.ok() ? *dir + "/sops" : "";
}

std::string ReadOrDie(const std::string& path) {
  auto text = reverser::testing::ReadFile(path);
  EXPECT_TRUE(text.ok()) << path << ": " << text.status();
  return text.ok() ? *text : "";
}

nlohmann::json Expected() {
  return nlohmann::json::parse(ReadOrDie(SopsTestdata() + "/expected.json"));
}

// Order-insensitive comparison (expected.json holds sorted JSON).
nlohmann::json Unordered(const Tree& tree) { return nlohmann::json::parse(tree.dump()); }

std::vector<age::X25519Identity> Identities(const nlohmann::json& files) {
  std::vector<age::X25519Identity> out;
  for (const auto& file : files) {
    auto ids = age::ParseIdentityFile(ReadOrDie(SopsTestdata() + "/" + file.get<std::string>()));
    EXPECT_TRUE(ids.ok()) << ids.status();
    if (ids.ok()) out.insert(out.end(), ids->begin(), ids->end());
  }
  return out;
}

// Every real sops file (sops 3.7.1, 3.9.0, 3.10.2) and the reference script's outputs: the data
// key comes out of the age `enc`, every value decrypts, and the stored MAC verifies.
TEST(SopsRealFilesTest, DecryptsEveryAgeFixtureAndVerifiesItsMac) {
  const nlohmann::json expected = Expected();
  int checked = 0;
  for (const auto& [file, want] : expected.items()) {
    if (file[0] == '_' || !want.contains("identity_files")) continue;
    SCOPED_TRACE(file);
    auto tree = ParseSopsYaml(ReadOrDie(SopsTestdata() + "/" + file));
    ASSERT_TRUE(tree.ok()) << tree.status();
    auto decrypted = DecryptTree(*tree, Identities(want["identity_files"]));
    ASSERT_TRUE(decrypted.ok()) << decrypted.status();
    EXPECT_EQ(HexEncode(decrypted->data_key), want["data_key_hex"].get<std::string>());
    EXPECT_EQ(decrypted->mac, want["mac_plaintext"].get<std::string>());
    EXPECT_EQ(decrypted->lastmodified, want["lastmodified"].get<std::string>());
    EXPECT_EQ(Unordered(decrypted->plaintext), want["plaintext"]);
    ++checked;
  }
  EXPECT_EQ(checked, 8);
}

// sops' own example.yaml is PGP-wrapped; its data key is known, and it covers float, bool,
// comment and `_unencrypted` leaves.
TEST(SopsRealFilesTest, DecryptsSopsExampleWithKnownDataKey) {
  const nlohmann::json want = Expected()["getsops-sops/example.yaml"];
  auto tree = ParseSopsYaml(ReadOrDie(SopsTestdata() + "/getsops-sops/example.yaml"));
  ASSERT_TRUE(tree.ok()) << tree.status();
  auto decrypted =
      DecryptTreeWithDataKey(*tree, *HexDecode(want["data_key_hex"].get<std::string>()));
  ASSERT_TRUE(decrypted.ok()) << decrypted.status();
  EXPECT_EQ(decrypted->mac, want["mac_plaintext"].get<std::string>());
  EXPECT_EQ(Unordered(decrypted->plaintext), want["plaintext"]);
  // Without any age entry, identities cannot help.
  EXPECT_EQ(DecryptTree(*tree, {}).status().code(), absl::StatusCode::kNotFound);
}

TEST(SopsRealFilesTest, PostQuantumFileIsRefusedClearly) {
  auto tree = ParseSopsYaml(
      ReadOrDie(SopsTestdata() + "/fluxcd-kustomize-controller/algorithms/age-pq.yaml"));
  ASSERT_TRUE(tree.ok()) << tree.status();
  auto identities = Identities(nlohmann::json::array({"fluxcd-kustomize-controller/keys/age.txt"}));
  auto decrypted = DecryptTree(*tree, identities);
  ASSERT_FALSE(decrypted.ok());
  EXPECT_EQ(decrypted.status().code(), absl::StatusCode::kUnimplemented) << decrypted.status();
  EXPECT_TRUE(absl::StrContains(decrypted.status().message(), "unsupported age recipient type"));
}

TEST(SopsRealFilesTest, WrongIdentityIsNotFound) {
  auto tree =
      ParseSopsYaml(ReadOrDie(SopsTestdata() + "/fluxcd-kustomize-controller/algorithms/age.yaml"));
  ASSERT_TRUE(tree.ok());
  auto other =
      Identities(nlohmann::json::array({"fluxcd-kustomize-controller/keys/age-global.txt"}));
  EXPECT_EQ(DecryptTree(*tree, other).status().code(), absl::StatusCode::kNotFound);
}

// The golden vector: with every random input injected, the writer reproduces each ENC value,
// the MAC and the whole file of the reference script byte for byte.
TEST(SopsGoldenTest, ReproducesReferenceFileByteForByte) {
  const auto vector = nlohmann::json::parse(
      ReadOrDie(SopsTestdata() + "/generated-by-reference-script/golden/vector.json"));
  const auto& s = vector["sops"];
  const auto& a = vector["age"];
  auto plaintext = ParseSopsYaml(
      ReadOrDie(SopsTestdata() + "/generated-by-reference-script/golden/secret.yaml"));
  ASSERT_TRUE(plaintext.ok()) << plaintext.status();
  testing::ScriptedRandom random(
      {*HexDecode(s["data_key_hex"].get<std::string>()),
       *HexDecode(a["file_key_hex"].get<std::string>()),
       *HexDecode(a["ephemeral_secret_hex"].get<std::string>()),
       *HexDecode(a["payload_nonce_hex"].get<std::string>()),
       *HexDecode(s["values"]["data:password:"]["iv_hex"].get<std::string>()),
       *HexDecode(s["values"]["data:username:"]["iv_hex"].get<std::string>()),
       *HexDecode(s["mac_iv_hex"].get<std::string>())});
  EncryptOptions options;
  options.random = &random;
  ASSERT_TRUE(absl::ParseTime(absl::RFC3339_full, s["lastmodified"].get<std::string>(),
                              &options.now, nullptr));
  auto recipient = age::X25519Recipient::Parse(vector["recipient"].get<std::string>());
  ASSERT_TRUE(recipient.ok());
  auto encrypted = EncryptTree(*plaintext, {*recipient}, options);
  ASSERT_TRUE(encrypted.ok()) << encrypted.status();
  EXPECT_EQ((*encrypted)["data"]["password"], s["values"]["data:password:"]["enc"]);
  EXPECT_EQ((*encrypted)["data"]["username"], s["values"]["data:username:"]["enc"]);
  EXPECT_EQ((*encrypted)["sops"]["mac"], s["mac_enc"]);
  EXPECT_EQ((*encrypted)["sops"]["age"][0]["enc"], a["armored"]);
  EXPECT_EQ(random.calls(), 7);
  auto text = EmitSopsYaml(*encrypted);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(*text,
            ReadOrDie(SopsTestdata() + "/generated-by-reference-script/golden/secret.sops.yaml"));
}

// The emitted layout matches real sops 3.7 output for the same structure (helm-secrets file:
// indent 4, indented sequences, `enc: |` blocks at column 12).
TEST(SopsLayoutTest, ReEmittingARealFileKeepsItsLayoutApartFromEmptyLists) {
  const std::string original =
      ReadOrDie(SopsTestdata() + "/jkroepke-helm-secrets/values/sops/secrets.age.yaml");
  auto tree = ParseSopsYaml(original);
  ASSERT_TRUE(tree.ok()) << tree.status();
  auto text = EmitSopsYaml(*tree);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(*text, original);
}

Tree TrickySecret() {
  return Tree::parse(R"({
    "apiVersion": "v1", "kind": "Secret",
    "metadata": {"name": "db", "namespace": "prod",
                 "labels": {"app": "db", "data": "label-named-data"},
                 "annotations": {"example.com/revision": "017", "note": "yes",
                                 "multi": "line one\nline two\n", "when": "2024-01-01"}},
    "type": "Opaque", "immutable": false,
    "data": {"password": "aHVudGVyMg==", "123": "MTIz", "empty": "", "true": "eWVz"},
    "stringData": {"port": "5432", "enabled": "true", "octal": "017", "unicode": "h\u00e9llo \u2028",
                   "pem": "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
                   "n": 5, "f": 1.5, "b": true}
  })");
}

TEST(SopsRoundTripTest, EncryptedTextDecryptsToTheSameTree) {
  testing::ScriptedRandom keys;
  auto first = *age::X25519Identity::Generate(keys);
  auto second = *age::X25519Identity::Generate(keys);
  EncryptOptions options;
  options.now = absl::FromUnixSeconds(1'800'000'000);
  const Tree plaintext = TrickySecret();
  auto text = EncryptYaml(plaintext, {first.Recipient(), second.Recipient()}, options);
  ASSERT_TRUE(text.ok()) << text.status();

  // Nothing under data/stringData (or the label named data) is left in clear text.
  for (const char* clear :
       {"aHVudGVyMg==", "MTIz", "5432", "BEGIN CERTIFICATE", "label-named-data", "eWVz"}) {
    EXPECT_FALSE(absl::StrContains(*text, clear)) << clear;
  }
  EXPECT_TRUE(absl::StrContains(*text, "\n    empty: \"\"\n"));
  EXPECT_TRUE(absl::StrContains(*text, "\n    \"123\": ENC[AES256_GCM,"));
  EXPECT_TRUE(absl::StrContains(*text, "\n    \"true\": ENC[AES256_GCM,"));
  EXPECT_TRUE(absl::StrContains(*text, "example.com/revision: \"017\"\n"));
  EXPECT_TRUE(absl::StrContains(*text, "note: \"yes\"\n"));
  EXPECT_TRUE(absl::StrContains(*text, "when: \"2024-01-01\"\n"));
  EXPECT_TRUE(absl::StrContains(*text, "immutable: false\n"));
  EXPECT_TRUE(absl::StrContains(*text, "type:int]"));
  EXPECT_TRUE(absl::StrContains(*text, "type:float]"));
  EXPECT_TRUE(absl::StrContains(*text, "type:bool]"));
  EXPECT_TRUE(absl::StrContains(*text, "\n    lastmodified: \"2027-01-15T08:00:00Z\"\n"));
  EXPECT_TRUE(absl::StrContains(*text, "\n    mac: ENC[AES256_GCM,"));
  EXPECT_TRUE(absl::StrContains(*text, "\n    encrypted_regex: ^(data|stringData)$\n"));
  EXPECT_TRUE(absl::EndsWith(*text, "\n    version: 3.11.0\n"));

  for (const auto& identity : {first, second}) {
    auto decrypted = DecryptYaml(*text, {identity});
    ASSERT_TRUE(decrypted.ok()) << decrypted.status();
    EXPECT_EQ(decrypted->plaintext, plaintext);  // same values, same order
  }
}

TEST(SopsRoundTripTest, TamperingIsCaught) {
  testing::ScriptedRandom keys;
  auto identity = *age::X25519Identity::Generate(keys);
  EncryptOptions options;
  options.now = absl::FromUnixSeconds(1'800'000'000);
  auto text = EncryptYaml(TrickySecret(), {identity.Recipient()}, options);
  ASSERT_TRUE(text.ok());
  auto decrypt = [&](const std::string& edited) {
    return DecryptYaml(edited, {identity}).status();
  };
  ASSERT_TRUE(decrypt(*text).ok());

  // A clear-text value is covered by the MAC.
  auto renamed = decrypt(absl::StrReplaceAll(*text, {{"name: db\n", "name: dc\n"}}));
  EXPECT_EQ(renamed.code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE(absl::StrContains(renamed.message(), "MAC mismatch")) << renamed;
  EXPECT_EQ(decrypt(absl::StrReplaceAll(*text, {{"immutable: false", "immutable: true"}})).code(),
            absl::StatusCode::kDataLoss);
  // Unquoting "017" changes its typed bytes (017 -> 15).
  EXPECT_EQ(decrypt(absl::StrReplaceAll(*text, {{"revision: \"017\"", "revision: 017"}})).code(),
            absl::StatusCode::kDataLoss);
  // lastmodified is the MAC's AAD.
  EXPECT_FALSE(decrypt(absl::StrReplaceAll(*text, {{"08:00:00Z", "08:00:01Z"}})).ok());
  // Moving an ENC value to another key fails its path AAD.
  std::vector<std::string> lines = absl::StrSplit(*text, '\n');
  std::string password_enc;
  for (const std::string& line : lines) {
    if (absl::StartsWith(line, "    password: ")) password_enc = line.substr(14);
  }
  ASSERT_FALSE(password_enc.empty());
  std::string moved = *text;
  const size_t port = moved.find("    port: ");
  ASSERT_NE(port, std::string::npos);
  const size_t eol = moved.find('\n', port);
  moved.replace(port, eol - port, "    port: " + password_enc);
  EXPECT_EQ(decrypt(moved).code(), absl::StatusCode::kDataLoss);
}

TEST(SopsEncryptTest, RefusesWhatSopsCannotRepresent) {
  testing::ScriptedRandom keys;
  auto identity = *age::X25519Identity::Generate(keys);
  EncryptOptions options;
  EXPECT_EQ(EncryptTree(TrickySecret(), {}, options).status().code(),
            absl::StatusCode::kFailedPrecondition);
  Tree with_sops = TrickySecret();
  with_sops["sops"] = "x";
  EXPECT_FALSE(EncryptTree(with_sops, {identity.Recipient()}, options).ok());
  Tree big = TrickySecret();
  big["data"]["big"] = uint64_t{18446744073709551615u};
  EXPECT_FALSE(EncryptTree(big, {identity.Recipient()}, options).ok());
  EXPECT_FALSE(EncryptTree(Tree::array(), {identity.Recipient()}, options).ok());
  options.rule.value = "(unclosed";
  EXPECT_FALSE(EncryptTree(TrickySecret(), {identity.Recipient()}, options).ok());
}

// Debian's age recovers exactly the 32-byte data key from every `enc` the writer produced.
TEST(SopsAgeCliTest, EveryEncUnwrapsWithAgeCli) {
  auto which = reverser::testing::RunCommand({"/bin/sh", "-c", "command -v age"});
  if (!which.ok() || which->exit_code != 0) GTEST_SKIP() << "age CLI not installed";
  reverser::testing::ScopedTempDir dir("sops-age-cli");
  std::vector<age::X25519Identity> identities;
  std::vector<age::X25519Recipient> recipients;
  for (int i = 0; i < 2; ++i) {
    auto keygen = reverser::testing::RunCommand({"age-keygen"});
    ASSERT_TRUE(keygen.ok() && keygen->exit_code == 0);
    ASSERT_TRUE(
        reverser::testing::WriteFile(dir.path() + "/key" + std::to_string(i), keygen->out).ok());
    identities.push_back(age::ParseIdentityFile(keygen->out)->front());
    recipients.push_back(identities.back().Recipient());
  }
  auto text = EncryptYaml(TrickySecret(), recipients, EncryptOptions{});
  ASSERT_TRUE(text.ok());
  auto tree = ParseSopsYaml(*text);
  ASSERT_TRUE(tree.ok()) << tree.status();
  auto decrypted = DecryptTree(*tree, {identities[1]});
  ASSERT_TRUE(decrypted.ok()) << decrypted.status();
  const auto& entries = (*tree)["sops"]["age"];
  ASSERT_EQ(entries.size(), 2u);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(entries[i]["recipient"], recipients[i].String());
    const std::string enc = entries[i]["enc"].get<std::string>();
    EXPECT_EQ(std::count(enc.begin(), enc.end(), '\n'), 7);  // BEGIN + 5 lines + END
    auto out = reverser::testing::RunCommand(
        {"age", "-d", "-i", dir.path() + "/key" + std::to_string(i)}, enc);
    ASSERT_TRUE(out.ok());
    EXPECT_EQ(out->exit_code, 0) << out->err;
    EXPECT_TRUE(out->out == decrypted->data_key);
  }
}

// Rules are RE2 (Go regexp syntax, as sops has): what it takes selects as sops would, what it
// does not take (ECMAScript-only backreferences, lookaround) is InvalidArgument, never a crash.
TEST(SopsRuleTest, RegexRulesUseGoSyntaxAndRefuseWhatRe2CannotMatch) {
  testing::ScriptedRandom keys;
  auto identity = *age::X25519Identity::Generate(keys);
  EncryptOptions options;
  options.rule.value = "(?i)^STRINGDATA$";  // Go/RE2 flag syntax; ECMAScript has none
  auto text = EncryptYaml(TrickySecret(), {identity.Recipient()}, options);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_FALSE(absl::StrContains(*text, "5432"));         // stringData: encrypted
  EXPECT_TRUE(absl::StrContains(*text, "aHVudGVyMg=="));  // data: not selected
  auto decrypted = DecryptYaml(*text, {identity});
  ASSERT_TRUE(decrypted.ok()) << decrypted.status();
  EXPECT_EQ(decrypted->plaintext, TrickySecret());

  for (const char* unsupported :
       {"^(data)\\1$", "(?=data)", "(?<!x)data", "(unclosed", "a{1001}"}) {
    options.rule.value = unsupported;
    auto refused = EncryptTree(TrickySecret(), {identity.Recipient()}, options);
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument) << unsupported;
    EXPECT_TRUE(absl::StartsWith(refused.status().message(),
                                 absl::StrCat("unsupported encrypted_regex: ", unsupported)))
        << refused.status();
  }
  // A huge pattern is refused with a bounded message.
  options.rule.value = std::string(1 << 20, '(');
  auto huge = EncryptTree(TrickySecret(), {identity.Recipient()}, options);
  EXPECT_EQ(huge.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_LT(huge.status().message().size(), 600u);

  // The rule of a file from Git is read the same way: a bad one is an error on decryption.
  options.rule = EncryptionRule{EncryptionRule::Kind::kUnencryptedRegex, "^(metadata|type)$"};
  auto unencrypted = EncryptYaml(TrickySecret(), {identity.Recipient()}, options);
  ASSERT_TRUE(unencrypted.ok()) << unencrypted.status();
  ASSERT_TRUE(absl::StrContains(*unencrypted, "unencrypted_regex: ^(metadata|type)$\n"));
  ASSERT_TRUE(DecryptYaml(*unencrypted, {identity}).ok());
  auto bad =
      DecryptYaml(absl::StrReplaceAll(*unencrypted, {{"^(metadata|type)$", "(?=x)"}}), {identity});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(bad.status().message(), "unsupported unencrypted_regex: (?=x)"))
      << bad.status();
}

// Keys of a megabyte against patterns on which a backtracking matcher takes exponential time or
// a stack frame per character. (Tree level: YAML caps implicit keys at 1024 characters.)
TEST(SopsRuleTest, MegabyteKeysAreMatchedInLinearTime) {
  testing::ScriptedRandom keys;
  auto identity = *age::X25519Identity::Generate(keys);
  const std::string long_key(1 << 20, 'a');
  Tree plaintext = Tree::object();
  plaintext["data"] = Tree::object();
  plaintext["data"][long_key] = "v";
  plaintext["other"] = "clear";
  EncryptOptions options;
  for (const char* pattern : {"^(a|aa)*$", "^(a+)+b$"}) {
    options.rule.value = pattern;
    auto encrypted = EncryptTree(plaintext, {identity.Recipient()}, options);
    ASSERT_TRUE(encrypted.ok()) << encrypted.status();
    // Only the first pattern matches the long key; neither matches "data" or "other".
    const bool selected = std::string(pattern) == "^(a|aa)*$";
    EXPECT_EQ((*encrypted)["data"][long_key] != "v", selected) << pattern;
    EXPECT_EQ((*encrypted)["other"], "clear");
    auto decrypted = DecryptTree(*encrypted, {identity});
    ASSERT_TRUE(decrypted.ok()) << decrypted.status();
    EXPECT_EQ(decrypted->plaintext, plaintext);
  }
}

TEST(SopsValueTest, ParsesAndFormatsEncValues) {
  const std::string enc =
      "ENC[AES256_GCM,data:mHeXsmQ=,iv:vUMpILz3xchORqkzDFvgwENY7EqIHHGJdEF6C8xqbFE=,tag:"
      "IroV7hykADvD0IUaq6kikA==,type:str]";
  auto value = ParseEncryptedValue(enc);
  ASSERT_TRUE(value.ok());
  EXPECT_EQ(value->data.size(), 5u);
  EXPECT_EQ(value->iv.size(), 32u);
  EXPECT_EQ(value->type, "str");
  EXPECT_EQ(FormatEncryptedValue(*value), enc);
  EXPECT_FALSE(ParseEncryptedValue("ENC[AES256_GCM,data:,iv:AA==,tag:AA==,type:str]").ok());
  EXPECT_FALSE(ParseEncryptedValue("plain").ok());
}

}  // namespace
}  // namespace reverser::sops
