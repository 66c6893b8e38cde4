#include "libs/kube/secret_data.h"

#include <gtest/gtest.h>

namespace reverser::kube {
namespace {

TEST(SecretData, RoundTripsBytesAndRefusesNonBase64) {
  const std::map<std::string, std::string> data = {{"signing.key", std::string("a\0b\n", 4)},
                                                   {"empty", ""}};
  nlohmann::json secret = {{"kind", "Secret"}, {"data", EncodeSecretData(data)}};
  EXPECT_EQ(secret["data"]["signing.key"], "YQBiCg==");
  auto decoded = DecodeSecretData(secret);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(*decoded, data);

  auto none = DecodeSecretData({{"kind", "Secret"}});
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
  auto bad = DecodeSecretData({{"data", {{"k", "%%%"}}}});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("data.k"), std::string::npos);
  EXPECT_FALSE(DecodeSecretData({{"data", {{"k", 1}}}}).ok());
  EXPECT_FALSE(DecodeSecretData({{"data", "x"}}).ok());
}

}  // namespace
}  // namespace reverser::kube
