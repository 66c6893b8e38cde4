#include "libs/sops/age_key_secret.h"

#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/civil_time.h"
#include "gtest/gtest.h"
#include "libs/sops/age.h"
#include "libs/sops/crypto.h"
#include "tests/fixtures/process.h"

namespace reverser::sops {
namespace {

// An identity file written by the `age-keygen` CLI, and the recipient it printed for it.
struct KeygenKey {
  std::string file;       // "# created: …\n# public key: age1…\nAGE-SECRET-KEY-1…\n"
  std::string recipient;  // from the "# public key:" line
};

KeygenKey AgeKeygen() {
  KeygenKey key;
  auto keygen = reverser::testing::RunCommand({"age-keygen"});
  EXPECT_TRUE(keygen.ok() && keygen->exit_code == 0);
  if (!keygen.ok()) return key;
  key.file = keygen->out;
  for (absl::string_view line : absl::StrSplit(key.file, '\n')) {
    if (absl::ConsumePrefix(&line, "# public key: ")) key.recipient = std::string(line);
  }
  EXPECT_TRUE(absl::StartsWith(key.recipient, "age1")) << key.file;
  return key;
}

nlohmann::json SecretWith(const std::vector<std::pair<std::string, std::string>>& entries) {
  nlohmann::json secret = NewAgeKeySecret("team-a", "sops-age-key");
  for (const auto& [key, value] : entries) secret["data"][key] = absl::Base64Escape(value);
  return secret;
}

absl::Time Utc(int year, int month, int day, int hour = 12) {
  return absl::FromCivil(absl::CivilSecond(year, month, day, hour, 0, 0), absl::UTCTimeZone());
}

TEST(AgeKeySecretTest, DerivesTheRecipientAgeKeygenPrinted) {
  const KeygenKey key = AgeKeygen();
  auto recipients = RecipientsFromAgeKeySecret(SecretWith({{"20240305.agekey", key.file}}));
  ASSERT_TRUE(recipients.ok()) << recipients.status();
  EXPECT_EQ(*recipients, std::vector<std::string>{key.recipient});
}

TEST(AgeKeySecretTest, EveryAgeKeyEntryCountsOtherEntriesDoNot) {
  const KeygenKey a = AgeKeygen();
  const KeygenKey b = AgeKeygen();
  auto recipients = RecipientsFromAgeKeySecret(SecretWith({{"old.agekey", a.file},
                                                           {"new.agekey", b.file},
                                                           {"copy.agekey", a.file},
                                                           {"SOPS_AGE_KEY", "not an identity"},
                                                           {"agekey", "not an entry either"}}));
  ASSERT_TRUE(recipients.ok()) << recipients.status();
  std::vector<std::string> expected = {a.recipient, b.recipient};
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(*recipients, expected);
  EXPECT_TRUE(RecipientsFromAgeKeySecret(NewAgeKeySecret("team-a", "empty"))->empty());
  EXPECT_FALSE(HasAgeKeyEntry(SecretWith({{"SOPS_AGE_KEY", a.file}})));
  EXPECT_TRUE(HasAgeKeyEntry(SecretWith({{"x.agekey", a.file}})));
}

TEST(AgeKeySecretTest, ABadEntryIsNamedButNeverEchoed) {
  const KeygenKey a = AgeKeygen();
  const std::string two = a.file + AgeKeygen().file;
  auto status = RecipientsFromAgeKeySecret(SecretWith({{"two.agekey", two}})).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(status.message(), "data[two.agekey]")) << status;
  EXPECT_FALSE(absl::StrContains(status.message(), "AGE-SECRET-KEY-1")) << status;

  nlohmann::json not_base64 = NewAgeKeySecret("team-a", "k");
  not_base64["data"]["x.agekey"] = "!!!";
  EXPECT_FALSE(RecipientsFromAgeKeySecret(not_base64).ok());
  EXPECT_FALSE(RecipientsFromAgeKeySecret(SecretWith({{"pub.agekey", a.recipient}})).ok());
}

TEST(AgeKeySecretTest, EntryNameIsTheUtcDateWithAnUnpaddedDay) {
  EXPECT_EQ(AgeKeyEntryName(Utc(2024, 3, 5)), "2024035.agekey");
  EXPECT_EQ(AgeKeyEntryName(Utc(2024, 11, 23)), "20241123.agekey");
  EXPECT_EQ(AgeKeyEntryName(Utc(2025, 1, 9)), "2025019.agekey");
  EXPECT_EQ(AgeKeyEntryName(Utc(2024, 12, 31, 23) + absl::Minutes(59)), "20241231.agekey");
  // The day is the UTC day, whatever the local zone.
  EXPECT_EQ(AgeKeyEntryName(Utc(2025, 1, 1, 0)), "2025011.agekey");
}

TEST(AgeKeySecretTest, GeneratedKeyCarriesTheRecipientAndTheBackupWarning) {
  auto identity = age::X25519Identity::Generate(crypto::SystemRandom());
  ASSERT_TRUE(identity.ok());
  nlohmann::json secret = NewAgeKeySecret("team-a", "sops-age-key");
  secret["metadata"]["annotations"] = {{"owner", "me"}};
  secret["data"] = {{"unrelated", absl::Base64Escape("kept")}};
  AddGeneratedAgeKey(secret, "2024035.agekey", *identity);

  EXPECT_EQ(secret["type"], "Opaque");
  EXPECT_EQ(secret["metadata"]["annotations"],
            nlohmann::json({{"owner", "me"},
                            {"configbutler.ai/age-recipient", identity->Recipient().String()},
                            {"configbutler.ai/backup-warning", "REMOVE_AFTER_BACKUP"}}));
  EXPECT_EQ(secret["data"]["unrelated"], absl::Base64Escape("kept"));
  std::string stored;
  ASSERT_TRUE(absl::Base64Unescape(secret["data"]["2024035.agekey"].get<std::string>(), &stored));
  EXPECT_EQ(stored, identity->String());
  EXPECT_TRUE(BackupWarningPresent(secret));
  EXPECT_EQ(*RecipientsFromAgeKeySecret(secret),
            std::vector<std::string>{identity->Recipient().String()});

  // The generated entry is one the age CLI reads as an identity for that recipient.
  auto derived = reverser::testing::RunCommand({"age-keygen", "-y"}, stored + "\n");
  ASSERT_TRUE(derived.ok() && derived->exit_code == 0);
  EXPECT_EQ(absl::StripAsciiWhitespace(derived->out), identity->Recipient().String());

  secret["metadata"]["annotations"].erase("configbutler.ai/backup-warning");
  EXPECT_FALSE(BackupWarningPresent(secret));
  WipeSecretValues(secret);
  EXPECT_EQ(secret["data"]["2024035.agekey"].get<std::string>().find_first_not_of('\0'),
            std::string::npos);
}

}  // namespace
}  // namespace reverser::sops
