#include "libs/redisstore/body_cipher.h"

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "tests/fixtures/temp_dir.h"

namespace reverser::redisstore {
namespace {

std::unique_ptr<BodyCipher> Cipher(std::vector<std::pair<std::string, std::string>> keys) {
  auto cipher = BodyCipher::FromKeys(std::move(keys));
  EXPECT_TRUE(cipher.ok()) << cipher.status();
  return std::move(*cipher);
}

const std::string kKeyA(32, 'a');
const std::string kKeyB(32, 'b');

TEST(BodyCipherTest, SealedBodiesOpenAndHideThePlaintext) {
  auto cipher = Cipher({{"k1", kKeyA}});
  const std::string body = R"({"kind":"Secret","data":{"token":"bWFya2VyLXNlY3JldA=="}})";
  const std::string sealed = cipher->Seal(body);
  EXPECT_TRUE(absl::StartsWith(sealed, "rvenc1:k1:")) << sealed;
  EXPECT_TRUE(BodyCipher::IsSealed(sealed));
  EXPECT_FALSE(BodyCipher::IsSealed(body));
  EXPECT_FALSE(absl::StrContains(sealed, "bWFya2VyLXNlY3JldA")) << sealed;
  EXPECT_FALSE(absl::StrContains(sealed, "Secret"));
  EXPECT_EQ(*cipher->Open(sealed), body);
  EXPECT_EQ(*cipher->Open(cipher->Seal("")), "");
}

TEST(BodyCipherTest, TheSameBodySealsToTheSameBytesAndOthersDoNot) {
  auto cipher = Cipher({{"k1", kKeyA}});
  EXPECT_EQ(cipher->Seal("one"), cipher->Seal("one"));  // a retried append stays a duplicate
  EXPECT_NE(cipher->Seal("one"), cipher->Seal("two"));
  EXPECT_NE(cipher->Seal("one"), Cipher({{"k1", kKeyB}})->Seal("one"));
}

TEST(BodyCipherTest, AlteredBodiesAndUnknownKeysAreClearErrors) {
  auto cipher = Cipher({{"k1", kKeyA}});
  std::string sealed = cipher->Seal("payload");
  std::string raw;
  ASSERT_TRUE(absl::Base64Unescape(sealed.substr(10), &raw));
  raw[raw.size() / 2] ^= 1;
  const std::string altered = "rvenc1:k1:" + absl::Base64Escape(raw);
  EXPECT_EQ(cipher->Open(altered).status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(cipher->Open("rvenc1:k1:!!").status().code(), absl::StatusCode::kDataLoss);
  // The key id is authenticated: relabelling a body does not open it under another key.
  auto two = Cipher({{"k2", kKeyA}, {"k1", kKeyA}});
  EXPECT_EQ(two->Open("rvenc1:k2:" + sealed.substr(10)).status().code(),
            absl::StatusCode::kDataLoss);
  absl::Status unknown = Cipher({{"k9", kKeyA}})->Open(sealed).status();
  EXPECT_EQ(unknown.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(unknown.message(), "\"k1\"")) << unknown;
}

TEST(BodyCipherTest, RotationSealsWithTheFirstKeyAndOpensWithAny) {
  auto old_key = Cipher({{"2026-11", kKeyA}});
  auto rotated = Cipher({{"2026-12", kKeyB}, {"2026-11", kKeyA}});
  EXPECT_EQ(*rotated->Open(old_key->Seal("before")), "before");
  EXPECT_TRUE(absl::StartsWith(rotated->Seal("after"), "rvenc1:2026-12:"));
  EXPECT_EQ(rotated->sealing_key_id(), "2026-12");
}

TEST(BodyCipherTest, KeyFilesAreCheckedLineByLine) {
  testing::ScopedTempDir dir("keys");
  const std::string file = dir.path() + "/keys";
  ASSERT_TRUE(testing::WriteFile(file, "# rotated monthly\n\nk2:" + absl::Base64Escape(kKeyB) +
                                           "\nk1:" + absl::Base64Escape(kKeyA) + "\n")
                  .ok());
  auto cipher = BodyCipher::FromKeyFile(file);
  ASSERT_TRUE(cipher.ok()) << cipher.status();
  EXPECT_EQ((*cipher)->sealing_key_id(), "k2");
  for (const auto& [text, message] : std::vector<std::pair<std::string, std::string>>{
           {"k1:" + absl::Base64Escape("short"), "has 5 bytes, not 32"},
           {"k1", ":1: not `<key id>:<base64 of 32 bytes>`"},
           {"bad id:" + absl::Base64Escape(kKeyA), "is not [A-Za-z0-9._-]{1,64}"},
           {"k1:" + absl::Base64Escape(kKeyA) + "\nk1:" + absl::Base64Escape(kKeyB), "twice"},
           {"# nothing\n", "no body key given"}}) {
    ASSERT_TRUE(testing::WriteFile(file, text).ok());
    auto bad = BodyCipher::FromKeyFile(file);
    EXPECT_FALSE(bad.ok()) << text;
    EXPECT_TRUE(absl::StrContains(bad.status().message(), message)) << bad.status();
  }
  EXPECT_FALSE(BodyCipher::FromKeyFile(dir.path() + "/absent").ok());
}

}  // namespace
}  // namespace reverser::redisstore
