#include "libs/sops/crypto.h"

#include "gtest/gtest.h"
#include "libs/sops/bech32.h"

namespace reverser::sops {
namespace {

using crypto::Base64Decode;
using crypto::Base64Encode;
using crypto::HexDecode;
using crypto::HexEncode;

TEST(Base64Test, EncodesPaddedAndRaw) {
  EXPECT_EQ(Base64Encode("hunter2"), "aHVudGVyMg==");
  EXPECT_EQ(Base64Encode("hunter2", false), "aHVudGVyMg");
  EXPECT_EQ(Base64Encode(""), "");
  EXPECT_EQ(*Base64Decode("aHVudGVyMg=="), "hunter2");
  EXPECT_EQ(*Base64Decode("aHVudGVyMg", false), "hunter2");
}

TEST(Base64Test, DecodingIsStrict) {
  EXPECT_FALSE(Base64Decode("aHVudGVyMg").ok());           // padding missing
  EXPECT_FALSE(Base64Decode("aHVudGVyMg==", false).ok());  // padding where none is allowed
  EXPECT_FALSE(Base64Decode("aHVudGVyMh==").ok());         // non-zero unused bits
  EXPECT_FALSE(Base64Decode("aHVu dGVy").ok());
  EXPECT_FALSE(Base64Decode("aHVudGVyM", false).ok());  // dangling character
  EXPECT_FALSE(Base64Decode("a===").ok());
}

TEST(HexTest, RoundTrips) {
  EXPECT_EQ(HexEncode("\x01\xab"), "01ab");
  EXPECT_EQ(HexEncode("\x01\xab", true), "01AB");
  EXPECT_EQ(*HexDecode("01AB"), "\x01\xab");
  EXPECT_FALSE(HexDecode("0g").ok());
  EXPECT_FALSE(HexDecode("012").ok());
}

TEST(HkdfTest, Rfc5869Case1) {
  auto okm = crypto::HkdfSha256(*HexDecode("0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b"),
                                *HexDecode("000102030405060708090a0b0c"),
                                *HexDecode("f0f1f2f3f4f5f6f7f8f9"), 42);
  ASSERT_TRUE(okm.ok()) << okm.status();
  EXPECT_EQ(HexEncode(*okm),
            "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865");
}

TEST(X25519Test, Rfc7748AliceBob) {
  const std::string alice =
      *HexDecode("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a");
  const std::string bob_public =
      *HexDecode("de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f");
  EXPECT_EQ(HexEncode(*crypto::X25519PublicKey(alice)),
            "8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a");
  EXPECT_EQ(HexEncode(*crypto::X25519(alice, bob_public)),
            "4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742");
  // A low-order point gives an all-zero secret, which must be refused.
  EXPECT_FALSE(crypto::X25519(alice, std::string(32, '\0')).ok());
  EXPECT_FALSE(crypto::X25519("short", bob_public).ok());
}

TEST(AeadTest, ChaChaRoundTripAndTamper) {
  const std::string key(32, 'k');
  const std::string nonce(12, '\0');
  auto sealed = crypto::ChaChaSeal(key, nonce, "aad", "hello");
  ASSERT_TRUE(sealed.ok());
  EXPECT_EQ(sealed->size(), 5u + 16u);
  EXPECT_EQ(*crypto::ChaChaOpen(key, nonce, "aad", *sealed), "hello");
  EXPECT_TRUE(absl::IsPermissionDenied(crypto::ChaChaOpen(key, nonce, "other", *sealed).status()));
  EXPECT_FALSE(crypto::ChaChaOpen(key, nonce, "", "short").ok());
}

// SOPS's AES-256-GCM with a 32-byte IV, against the golden vector's `data:password:` value.
TEST(AeadTest, AesGcmWith32ByteIvMatchesGoldenVector) {
  const std::string key =
      *HexDecode("000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f");
  const std::string iv(32, '\x01');
  auto sealed = crypto::AesGcmSeal(key, iv, "data:password:", "aHVudGVyMg==");
  ASSERT_TRUE(sealed.ok()) << sealed.status();
  EXPECT_EQ(Base64Encode(sealed->ciphertext), "2Oz/kr3tPxU4WNpN");
  EXPECT_EQ(Base64Encode(sealed->tag), "uGwQoC4JA4h7ZQGeLCxohw==");
  EXPECT_EQ(*crypto::AesGcmOpen(key, iv, "data:password:", sealed->ciphertext, sealed->tag),
            "aHVudGVyMg==");
  EXPECT_TRUE(absl::IsPermissionDenied(
      crypto::AesGcmOpen(key, iv, "data:username:", sealed->ciphertext, sealed->tag).status()));
}

TEST(DigestTest, Sha512UpperHex) {
  EXPECT_EQ(HexEncode(crypto::Sha256("sops")),
            "8a3fd2ad54ce66527b1034f3d147be0b0b975b3bf44f72c6fdadec8176f27d69");
  EXPECT_EQ(HexEncode(crypto::Sha512("")).substr(0, 16), "cf83e1357eefb8bd");
}

TEST(Bech32Test, RoundTripsAgeKeysAndRejectsDamage) {
  const std::string recipient = "age1l44xcng8dqj32nlv6d930qvvrny05hglzcv9qpc7kxjc6902ma4qufys29";
  auto decoded = bech32::Decode(recipient);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->hrp, "age");
  EXPECT_EQ(decoded->data.size(), 32u);
  EXPECT_EQ(*bech32::Encode("age", decoded->data), recipient);
  // Upper-case HRP gives upper-case output (identities).
  auto upper = bech32::Encode("AGE-SECRET-KEY-", decoded->data);
  ASSERT_TRUE(upper.ok());
  EXPECT_EQ(upper->substr(0, 16), "AGE-SECRET-KEY-1");
  EXPECT_EQ(upper->size(), 74u);

  std::string flipped = recipient;
  flipped[10] = flipped[10] == 'q' ? 'p' : 'q';
  EXPECT_FALSE(bech32::Decode(flipped).ok());
  std::string mixed = recipient;
  mixed[5] = 'L';
  EXPECT_FALSE(bech32::Decode(mixed).ok());
  EXPECT_FALSE(bech32::Decode("age1").ok());
  EXPECT_FALSE(bech32::Decode("").ok());
  EXPECT_FALSE(bech32::Decode("noseparator").ok());
}

}  // namespace
}  // namespace reverser::sops
