#include "libs/sops/age.h"

#include <dirent.h>
#include <zlib.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "libs/sops/crypto.h"
#include "libs/sops/test_random.h"
#include "nlohmann/json.hpp"
#include "tests/fixtures/process.h"
#include "tests/fixtures/runfiles.h"
#include "tests/fixtures/temp_dir.h"

namespace reverser::sops::age {
namespace {

using crypto::HexDecode;
using crypto::HexEncode;

std::string SopsTestdata() {
  auto dir = reverser::testing::TestdataDir();
  EXPECT_TRUE(dir.ok()) << dir.status();
  return dir.ok() ? *dir + "/sops" : "";
}

std::string ReadOrDie(const std::string& path) {
  auto text = reverser::testing::ReadFile(path);
  EXPECT_TRUE(text.ok()) << path << ": " << text.status();
  return text.ok() ? *text : "";
}

X25519Identity IdentityFromFile(const std::string& path) {
  auto identities = ParseIdentityFile(ReadOrDie(path));
  EXPECT_TRUE(identities.ok()) << identities.status();
  return identities.ok() ? identities->front() : *X25519Identity::FromSecretKey(std::string(32, 1));
}

TEST(KeysTest, IdentityFileGivesRecipientLikeAgeKeygen) {
  const std::string text = ReadOrDie(SopsTestdata() + "/fluxcd-kustomize-controller/keys/age.txt");
  auto identities = ParseIdentityFile(text);
  ASSERT_TRUE(identities.ok()) << identities.status();
  ASSERT_EQ(identities->size(), 1u);
  EXPECT_EQ(identities->front().Recipient().String(),
            "age1l44xcng8dqj32nlv6d930qvvrny05hglzcv9qpc7kxjc6902ma4qufys29");
  // The identity re-encodes to the exact line of the file.
  EXPECT_TRUE(absl::StrContains(text, identities->front().String()));
}

TEST(KeysTest, RecipientParsingIsStrictAndNeverEchoesSecrets) {
  const std::string good = "age1l44xcng8dqj32nlv6d930qvvrny05hglzcv9qpc7kxjc6902ma4qufys29";
  auto recipient = X25519Recipient::Parse(good);
  ASSERT_TRUE(recipient.ok()) << recipient.status();
  EXPECT_EQ(recipient->String(), good);

  EXPECT_FALSE(X25519Recipient::Parse("").ok());
  EXPECT_FALSE(X25519Recipient::Parse(good.substr(0, 61)).ok());
  EXPECT_FALSE(X25519Recipient::Parse(good + " ").ok());
  EXPECT_EQ(X25519Recipient::Parse("age1pq1abcdef").status().code(),
            absl::StatusCode::kUnimplemented);
  EXPECT_EQ(X25519Recipient::Parse("ssh-ed25519 AAAAC3Nza").status().code(),
            absl::StatusCode::kUnimplemented);

  const std::string secret =
      "AGE-SECRET-KEY-1RH87A5Z54ZGUR9S0AS3R6WHFSEFNPLYMAKF5Z2CEU7R06VRJ0A3Q7242AM";
  auto as_recipient = X25519Recipient::Parse(secret);
  ASSERT_FALSE(as_recipient.ok());
  EXPECT_FALSE(absl::StrContains(as_recipient.status().message(), "RH87A5Z"));
  auto damaged = X25519Identity::Parse(secret.substr(0, 73) + "Q");
  ASSERT_FALSE(damaged.ok());
  EXPECT_FALSE(absl::StrContains(damaged.status().message(), "RH87A5Z"));
  EXPECT_FALSE(X25519Identity::Parse(absl::AsciiStrToLower(secret)).ok());
}

TEST(KeysTest, PostQuantumIdentityFileIsRefusedClearly) {
  auto identities =
      ParseIdentityFile(ReadOrDie(SopsTestdata() + "/fluxcd-kustomize-controller/keys/age-pq.txt"));
  ASSERT_FALSE(identities.ok());
  EXPECT_EQ(identities.status().code(), absl::StatusCode::kUnimplemented) << identities.status();
}

// Every intermediate of the reference script's golden vector, with its injected randomness.
TEST(AgeGoldenTest, ReproducesReferenceVectorByteForByte) {
  auto vector = nlohmann::json::parse(
      ReadOrDie(SopsTestdata() + "/generated-by-reference-script/golden/vector.json"));
  const auto& age = vector["age"];
  auto recipient = X25519Recipient::Parse(vector["recipient"].get<std::string>());
  ASSERT_TRUE(recipient.ok());
  testing::ScriptedRandom random({*HexDecode(age["file_key_hex"].get<std::string>()),
                                  *HexDecode(age["ephemeral_secret_hex"].get<std::string>()),
                                  *HexDecode(age["payload_nonce_hex"].get<std::string>())});
  const std::string data_key = *HexDecode(vector["sops"]["data_key_hex"].get<std::string>());
  auto binary = Encrypt(data_key, {*recipient}, random);
  ASSERT_TRUE(binary.ok()) << binary.status();
  EXPECT_EQ(HexEncode(*binary), age["binary_hex"].get<std::string>());
  EXPECT_EQ(binary->size(), 232u);
  EXPECT_EQ(Armor(*binary), age["armored"].get<std::string>());

  auto header = ParseHeader(*binary);
  ASSERT_TRUE(header.ok()) << header.status();
  EXPECT_EQ(binary->substr(0, header->mac_input_end), age["hmac_input_text"].get<std::string>());
  ASSERT_EQ(header->stanzas.size(), 1u);
  EXPECT_EQ(HexEncode(header->stanzas[0].body), age["stanza_body_hex"].get<std::string>());

  auto identity = X25519Identity::Parse(vector["identity"].get<std::string>());
  ASSERT_TRUE(identity.ok());
  EXPECT_EQ(*DecryptArmored(age["armored"].get<std::string>(), {*identity}), data_key);
}

TEST(AgeTest, SopsKeysourceVectorDecrypts) {
  const std::string dir = SopsTestdata() + "/getsops-sops/age-keysource-test-vector";
  auto plain = DecryptArmored(ReadOrDie(dir + "/encrypted-key.age.txt"),
                              {IdentityFromFile(dir + "/identity.txt")});
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(*plain, ReadOrDie(dir + "/plaintext.txt"));
}

TEST(AgeTest, RoundTripsSizesAndRecipients) {
  testing::ScriptedRandom random;
  auto a = *X25519Identity::Generate(random);
  auto b = *X25519Identity::Generate(random);
  auto stranger = *X25519Identity::Generate(random);
  for (size_t size : {0u, 1u, 32u, 65535u, 65536u, 65537u, 131072u, 131079u}) {
    std::string plaintext(size, '\0');
    for (size_t i = 0; i < size; ++i) plaintext[i] = static_cast<char>(i * 7);
    auto file = Encrypt(plaintext, {a.Recipient(), b.Recipient()});
    ASSERT_TRUE(file.ok()) << file.status();
    EXPECT_EQ(*Decrypt(*file, {b}), plaintext) << size;
    EXPECT_EQ(*DecryptArmored(Armor(*file), {stranger, a}), plaintext) << size;
    EXPECT_EQ(Decrypt(*file, {stranger}).status().code(), absl::StatusCode::kNotFound);
  }
  EXPECT_FALSE(Encrypt("x", {}).ok());
}

TEST(AgeTest, TamperingIsDetected) {
  testing::ScriptedRandom random;
  auto id = *X25519Identity::Generate(random);
  std::string file = *Encrypt("secret payload", {id.Recipient()});
  auto header = *ParseHeader(file);
  std::string bad_payload = file;
  bad_payload.back() ^= 1;
  EXPECT_EQ(Decrypt(bad_payload, {id}).status().code(), absl::StatusCode::kDataLoss);
  std::string bad_mac = file;
  bad_mac[header.mac_input_end + 2] ^= 1;  // first MAC character
  EXPECT_FALSE(Decrypt(bad_mac, {id}).ok());
  EXPECT_FALSE(Decrypt(file.substr(0, 20), {id}).ok());
  EXPECT_FALSE(Decrypt("", {id}).ok());
  EXPECT_FALSE(Dearmor("not armor").ok());
}

// ---- C2SP/CCTV age test vectors ----

struct Vector {
  std::map<std::string, std::vector<std::string>> fields;
  std::string body;
};

Vector ParseVector(const std::string& text) {
  Vector v;
  const size_t split = text.find("\n\n");
  for (absl::string_view line : absl::StrSplit(text.substr(0, split), '\n')) {
    std::pair<std::string, std::string> kv = absl::StrSplit(line, absl::MaxSplits(": ", 1));
    v.fields[kv.first].push_back(kv.second);
  }
  v.body = text.substr(split + 2);
  return v;
}

std::string Inflate(const std::string& in) {
  z_stream zs{};
  EXPECT_EQ(inflateInit(&zs), Z_OK);
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  zs.avail_in = static_cast<uInt>(in.size());
  std::string out;
  char buf[65536];
  int rc;
  do {
    zs.next_out = reinterpret_cast<Bytef*>(buf);
    zs.avail_out = sizeof(buf);
    rc = inflate(&zs, Z_NO_FLUSH);
    out.append(buf, sizeof(buf) - zs.avail_out);
  } while (rc == Z_OK);
  EXPECT_EQ(rc, Z_STREAM_END);
  inflateEnd(&zs);
  return out;
}

std::string Classify(const absl::Status& status, bool armor_stage) {
  if (status.ok()) return "success";
  if (armor_stage) return "armor failure";
  switch (status.code()) {
    case absl::StatusCode::kNotFound:
      return "no match";
    case absl::StatusCode::kUnauthenticated:
      return "HMAC failure";
    case absl::StatusCode::kDataLoss:
      return "payload failure";
    case absl::StatusCode::kInvalidArgument:
      return "header failure";
    default:
      return "unexpected: " + status.ToString();
  }
}

TEST(AgeTestkitTest, AllX25519VectorsGiveTheExpectedResult) {
  const std::string dir = SopsTestdata() + "/age-testkit";
  DIR* d = opendir(dir.c_str());
  ASSERT_NE(d, nullptr);
  std::vector<std::string> names;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] != '.') names.push_back(e->d_name);
  }
  closedir(d);
  std::sort(names.begin(), names.end());
  ASSERT_EQ(names.size(), 97u);
  int passed = 0;
  for (const std::string& name : names) {
    Vector v = ParseVector(ReadOrDie(dir + "/" + name));
    std::string file = v.body;
    if (v.fields.count("compressed")) file = Inflate(file);
    std::vector<X25519Identity> identities;
    for (const std::string& text : v.fields["identity"]) {
      auto id = X25519Identity::Parse(text);
      ASSERT_TRUE(id.ok()) << name << ": " << id.status();
      identities.push_back(*id);
    }
    std::string result;
    absl::StatusOr<std::string> plain;
    if (v.fields.count("armored")) {
      auto binary = Dearmor(file);
      if (!binary.ok()) {
        result = Classify(binary.status(), true);
      } else {
        plain = Decrypt(*binary, identities);
        result = Classify(plain.status(), false);
      }
    } else {
      plain = Decrypt(file, identities);
      result = Classify(plain.status(), false);
    }
    const std::string expect = v.fields["expect"].front();
    EXPECT_EQ(result, expect) << name << (plain.ok() ? "" : ": " + plain.status().ToString());
    if (expect == "success" && plain.ok()) {
      EXPECT_EQ(HexEncode(crypto::Sha256(*plain)), v.fields["payload"].front()) << name;
    }
    if (result == expect) ++passed;
  }
  EXPECT_EQ(passed, 97);
}

// ---- Interoperability with Debian's age CLI ----

class AgeCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto which = reverser::testing::RunCommand({"/bin/sh", "-c", "command -v age"});
    if (!which.ok() || which->exit_code != 0) GTEST_SKIP() << "age CLI not installed";
  }
  reverser::testing::ScopedTempDir dir_{"age-cli"};
};

TEST_F(AgeCliTest, OurFilesDecryptWithAgeAndTheirsWithUs) {
  auto keygen = reverser::testing::RunCommand({"age-keygen"});
  ASSERT_TRUE(keygen.ok() && keygen->exit_code == 0);
  const std::string key_path = dir_.path() + "/key.txt";
  ASSERT_TRUE(reverser::testing::WriteFile(key_path, keygen->out).ok());
  auto identities = ParseIdentityFile(keygen->out);
  ASSERT_TRUE(identities.ok()) << identities.status();
  const X25519Identity& identity = identities->front();
  // age-keygen prints the recipient too; ours must agree.
  EXPECT_TRUE(absl::StrContains(keygen->out, "# public key: " + identity.Recipient().String()));
  auto second = *X25519Identity::Generate(crypto::SystemRandom());

  for (size_t size : {0u, 32u, 65536u, 131079u}) {
    std::string plaintext(size, '\0');
    for (size_t i = 0; i < size; ++i) plaintext[i] = static_cast<char>(i * 13 + 5);
    for (bool armored : {false, true}) {
      SCOPED_TRACE(::testing::Message() << size << (armored ? " armored" : " binary"));
      // Ours -> age -d.
      auto ours = Encrypt(plaintext, {second.Recipient(), identity.Recipient()});
      ASSERT_TRUE(ours.ok());
      const std::string ours_path = dir_.path() + "/ours.age";
      ASSERT_TRUE(reverser::testing::WriteFile(ours_path, armored ? Armor(*ours) : *ours).ok());
      auto decrypted = reverser::testing::RunCommand({"age", "-d", "-i", key_path, ours_path});
      ASSERT_TRUE(decrypted.ok());
      EXPECT_EQ(decrypted->exit_code, 0) << decrypted->err;
      EXPECT_TRUE(decrypted->out == plaintext);
      // age -e -> ours.
      std::vector<std::string> argv = {
          "age", "-e", "-r", second.Recipient().String(), "-r", identity.Recipient().String()};
      if (armored) argv.push_back("-a");
      auto theirs = reverser::testing::RunCommand(argv, plaintext);
      ASSERT_TRUE(theirs.ok());
      ASSERT_EQ(theirs->exit_code, 0) << theirs->err;
      auto plain =
          armored ? DecryptArmored(theirs->out, {identity}) : Decrypt(theirs->out, {identity});
      ASSERT_TRUE(plain.ok()) << plain.status();
      EXPECT_TRUE(*plain == plaintext);
    }
  }
}

}  // namespace
}  // namespace reverser::sops::age
