#include "libs/core/utf8.h"

#include "gtest/gtest.h"

namespace reverser::core {
namespace {

size_t Length(absl::string_view s, char32_t* rune = nullptr) {
  char32_t ignored = 0;
  return DecodeUtf8(s, 0, rune ? rune : &ignored);
}

TEST(Utf8Test, DecodesValidSequences) {
  char32_t rune = 0;
  EXPECT_EQ(Length("a", &rune), 1u);
  EXPECT_EQ(rune, U'a');
  EXPECT_EQ(Length("\xC3\xA9", &rune), 2u);  // é
  EXPECT_EQ(rune, U'\u00E9');
  EXPECT_EQ(Length("\xE2\x80\xA8", &rune), 3u);  // U+2028
  EXPECT_EQ(rune, U'\u2028');
  EXPECT_EQ(Length("\xF0\x9F\x98\x80", &rune), 4u);  // U+1F600
  EXPECT_EQ(rune, U'\U0001F600');
  EXPECT_EQ(DecodeUtf8("x\xC3\xA9", 1, &rune), 2u);
}

TEST(Utf8Test, RejectsWhatGoRejects) {
  EXPECT_EQ(Length("\xC0\x80"), 0u);          // overlong
  EXPECT_EQ(Length("\xE0\x80\x80"), 0u);      // overlong
  EXPECT_EQ(Length("\xED\xA0\x80"), 0u);      // surrogate U+D800
  EXPECT_EQ(Length("\xF4\x90\x80\x80"), 0u);  // past U+10FFFF
  EXPECT_EQ(Length("\xE2\x80"), 0u);          // truncated
  EXPECT_EQ(Length("\x80"), 0u);              // a continuation byte alone
  EXPECT_EQ(Length("\xC3\x28"), 0u);          // bad continuation
}

}  // namespace
}  // namespace reverser::core
