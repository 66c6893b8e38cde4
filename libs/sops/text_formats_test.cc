// The scanners in text_formats.h (and goyaml::IsYamlStyleFloat, which sops_yaml uses) against
// the regular expressions they replace: a table of edge cases with the expected answer, and a
// differential check on short random strings, where a backtracking oracle is safe.

#include "libs/sops/text_formats.h"

#include <map>
#include <memory>
#include <optional>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "libs/manifest/go_yaml.h"
#include "re2/re2.h"

namespace reverser::sops {
namespace {

// The patterns as the code used them (ECMAScript syntax).
constexpr char kEncPattern[] = R"(^ENC\[AES256_GCM,data:(.+),iv:(.+),tag:(.+),type:(.+)\])";
constexpr char kRfc3339Pattern[] =
    R"(^(\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2})(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$)";
constexpr char kDatePattern[] = R"(^(\d{4})-(\d{1,2})-(\d{1,2})$)";
constexpr char kDateTimePattern[] =
    R"(^(\d{4})-(\d{1,2})-(\d{1,2})(?:[Tt](\d{1,2}):(\d{1,2}):(\d{1,2})(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2})|[ ](\d{1,2}):(\d{1,2}):(\d{1,2})(?:\.\d+)?)$)";
constexpr char kFloatPattern[] = R"(^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$)";
constexpr char kDotFloatPattern[] = R"(^\.[0-9]+([eE][-+]?[0-9]+)?$)";

// Captures of a match; nullopt when there is none.
using Groups = std::optional<std::vector<std::string>>;

Groups StdRegex(const char* pattern, const std::string& text, bool search) {
  static auto* compiled = new std::map<std::string, std::regex>;
  auto it = compiled->find(pattern);
  if (it == compiled->end()) it = compiled->emplace(pattern, std::regex(pattern)).first;
  const std::regex& re = it->second;
  std::smatch m;
  if (!(search ? std::regex_search(text, m, re) : std::regex_match(text, m, re))) {
    return std::nullopt;
  }
  std::vector<std::string> groups;
  for (size_t i = 1; i < m.size(); ++i) groups.push_back(m[i].str());
  return groups;
}

// The same pattern in RE2 over bytes (Latin-1), with ECMAScript's `.` (no \n, no \r) spelled
// out. Leftmost-first submatches, as a backtracking matcher reports them.
Groups Re2(std::string pattern, const std::string& text, bool search) {
  static auto* compiled = new std::map<std::string, std::unique_ptr<RE2>>;
  std::unique_ptr<RE2>& slot = (*compiled)[pattern];
  if (slot == nullptr) {
    for (size_t at; (at = pattern.find("(.+)")) != std::string::npos;) {
      pattern.replace(at, 4, "([^\\n\\r]+)");
    }
    RE2::Options options;
    options.set_encoding(RE2::Options::EncodingLatin1);
    options.set_log_errors(false);
    slot = std::make_unique<RE2>(pattern, options);
    EXPECT_TRUE(slot->ok()) << slot->error();
  }
  const RE2& re = *slot;
  const int n = re.NumberOfCapturingGroups();
  std::vector<re2::StringPiece> submatch(n + 1);
  if (!re.Match(text, 0, text.size(), search ? RE2::UNANCHORED : RE2::ANCHOR_BOTH, submatch.data(),
                n + 1)) {
    return std::nullopt;
  }
  std::vector<std::string> groups;
  for (int i = 1; i <= n; ++i) groups.emplace_back(submatch[i].data(), submatch[i].size());
  return groups;
}

// Both oracles, after checking they agree.
Groups Oracle(const char* pattern, const std::string& text, bool search) {
  Groups std_groups = StdRegex(pattern, text, search);
  Groups re2_groups = Re2(pattern, text, search);
  EXPECT_EQ(std_groups, re2_groups) << "oracles disagree on " << pattern << " for `" << text << "`";
  return std_groups;
}

Groups Enc(const std::string& text) {
  auto parts = MatchEncValue(text);
  if (!parts) return std::nullopt;
  return std::vector<std::string>{std::string(parts->data), std::string(parts->iv),
                                  std::string(parts->tag), std::string(parts->type)};
}

Groups Rfc3339(const std::string& text) {
  auto parts = MatchRfc3339(text);
  if (!parts) return std::nullopt;
  return std::vector<std::string>{std::string(parts->date_time), std::string(parts->fraction),
                                  std::string(parts->zone)};
}

// Year, month and day of whichever timestamp pattern matches (the old code tried kDate, then
// kDateTime, and read groups 1-3).
Groups TimestampOracle(const std::string& text) {
  Groups groups = Oracle(kDatePattern, text, false);
  if (!groups) groups = Oracle(kDateTimePattern, text, false);
  if (groups) groups->resize(3);
  return groups;
}

Groups Timestamp(const std::string& text) {
  auto shape = MatchTimestampShape(text);
  if (!shape) return std::nullopt;
  return std::vector<std::string>{std::string(shape->year), std::string(shape->month),
                                  std::string(shape->day)};
}

bool FloatOracle(const std::string& text) { return Oracle(kFloatPattern, text, false).has_value(); }
bool DotFloatOracle(const std::string& text) {
  return Oracle(kDotFloatPattern, text, false).has_value();
}
// sops_yaml's replacement for kDotFloat: IsYamlStyleFloat on a string starting with '.'.
bool DotFloat(const std::string& text) {
  return !text.empty() && text[0] == '.' && manifest::goyaml::IsYamlStyleFloat(text);
}

std::vector<std::string> V(std::initializer_list<const char*> parts) {
  return std::vector<std::string>(parts.begin(), parts.end());
}

TEST(MatchEncValueTest, EdgeCases) {
  struct Case {
    std::string text;
    Groups want;
  };
  const std::string nul_inside = std::string("ENC[AES256_GCM,data:a\0b,iv:c,tag:d,type:str]", 45);
  const Case cases[] = {
      {"ENC[AES256_GCM,data:AAA=,iv:BBB=,tag:CCC=,type:str]", V({"AAA=", "BBB=", "CCC=", "str"})},
      {"ENC[AES256_GCM,data:a,iv:b,tag:c,type:d]", V({"a", "b", "c", "d"})},
      {"ENC[AES256_GCM,data:a,iv:b,tag:c,type:d]trailing", V({"a", "b", "c", "d"})},
      {"ENC[AES256_GCM,data:a,iv:b,tag:c,type:d]x]", V({"a", "b", "c", "d]x"})},
      {"ENC[AES256_GCM,data:a,iv:b,tag:c,type:d]\n]", V({"a", "b", "c", "d"})},
      {"ENC[AES256_GCM,data:a,iv:b,tag:c,type:d\n]", std::nullopt},
      {"ENC[AES256_GCM,data:a\r,iv:b,tag:c,type:d]", std::nullopt},
      // Greedy parts: later separators win, as long as every later part keeps a character.
      {"ENC[AES256_GCM,data:a,iv:b,iv:c,tag:d,type:e]", V({"a,iv:b", "c", "d", "e"})},
      {"ENC[AES256_GCM,data:a,iv:b,tag:c,tag:d,type:e]", V({"a", "b,tag:c", "d", "e"})},
      {"ENC[AES256_GCM,data:a,iv:b,tag:c,type:d,type:e]", V({"a", "b", "c,type:d", "e"})},
      {"ENC[AES256_GCM,data:a,iv:b,tag:c,type:,type:]", V({"a", "b", "c", ",type:"})},
      {"ENC[AES256_GCM,data:a,iv:b,tag:c,type:]]", V({"a", "b", "c", "]"})},
      {"ENC[AES256_GCM,data:a,iv:b,tag:,tag:,type:d]", V({"a", "b", ",tag:", "d"})},
      {"ENC[AES256_GCM,data:a,iv:,iv:,tag:c,type:d]", V({"a", ",iv:", "c", "d"})},
      {"ENC[AES256_GCM,data:,iv:,iv:b,tag:c,type:d]", V({",iv:", "b", "c", "d"})},
      // Empty parts do not match.
      {"ENC[AES256_GCM,data:,iv:b,tag:c,type:d]", std::nullopt},
      {"ENC[AES256_GCM,data:a,iv:,tag:c,type:d]", std::nullopt},
      {"ENC[AES256_GCM,data:a,iv:b,tag:,type:d]", std::nullopt},
      {"ENC[AES256_GCM,data:a,iv:b,tag:c,type:]", std::nullopt},
      {"ENC[AES256_GCM,data:a,iv:b,tag:c,type:d", std::nullopt},
      {"ENC[AES256_GCM,data:a,tag:c,iv:b,type:d]", std::nullopt},
      {" ENC[AES256_GCM,data:a,iv:b,tag:c,type:d]", std::nullopt},
      {"enc[AES256_GCM,data:a,iv:b,tag:c,type:d]", std::nullopt},
      {"ENC[AES256_GCM,data:", std::nullopt},
      {"", std::nullopt},
      {nul_inside, std::vector<std::string>{std::string("a\0b", 3), "c", "d", "str"}},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(Oracle(kEncPattern, c.text, true), c.want) << c.text;
    EXPECT_EQ(Enc(c.text), c.want) << c.text;
  }
}

TEST(MatchRfc3339Test, EdgeCases) {
  struct Case {
    const char* text;
    Groups want;
  };
  const Case cases[] = {
      {"2026-01-02T02:50:45Z", V({"2026-01-02T02:50:45", "", "Z"})},
      {"2026-01-02t02:50:45z", V({"2026-01-02t02:50:45", "", "z"})},
      {"2026-01-02T02:50:45.123456789+01:00", V({"2026-01-02T02:50:45", ".123456789", "+01:00"})},
      {"2026-01-02T02:50:45-00:00", V({"2026-01-02T02:50:45", "", "-00:00"})},
      {"9999-99-99T99:99:99Z", V({"9999-99-99T99:99:99", "", "Z"})},
      {"2026-01-02 02:50:45Z", std::nullopt},
      {"2026-01-02T02:50:45", std::nullopt},
      {"2026-01-02T02:50:45.Z", std::nullopt},
      {"2026-01-02T02:50:45.1", std::nullopt},
      {"2026-01-02T02:50:45Z ", std::nullopt},
      {"2026-01-02T02:50:45+0100", std::nullopt},
      {"2026-01-02T02:50:45+01:0", std::nullopt},
      {"2026-1-02T02:50:45Z", std::nullopt},
      {"20260-01-02T02:50:45Z", std::nullopt},
      {"2026-01-02T02:50:4Z", std::nullopt},
      {"2026-01-02T02:50:45ZZ", std::nullopt},
      {"2026-01-02T02:50:45Z\n", std::nullopt},
      {"", std::nullopt},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(Oracle(kRfc3339Pattern, c.text, false), c.want) << c.text;
    EXPECT_EQ(Rfc3339(c.text), c.want) << c.text;
  }
}

TEST(MatchTimestampShapeTest, EdgeCases) {
  struct Case {
    const char* text;
    Groups want;
  };
  const Case cases[] = {
      {"2024-01-01", V({"2024", "01", "01"})},
      {"2024-1-1", V({"2024", "1", "1"})},
      {"2024-99-99", V({"2024", "99", "99"})},
      {"2024-11-12T13:33:42Z", V({"2024", "11", "12"})},
      {"2024-11-12t1:2:3.5-07:00", V({"2024", "11", "12"})},
      {"2024-11-12 13:33:42", V({"2024", "11", "12"})},
      {"2024-11-12 13:33:42.25", V({"2024", "11", "12"})},
      {"2024-11-12 13:33:42Z", std::nullopt},
      {"2024-11-12T13:33:42", std::nullopt},
      {"2024-11-12T13:33:42z", std::nullopt},
      {"2024-11-12T13:33:42.Z", std::nullopt},
      {"2024-11-12T133:33:42Z", std::nullopt},
      {"2024-11-12  13:33:42", std::nullopt},
      {"2024-11-12T", std::nullopt},
      {"2024-11-", std::nullopt},
      {"2024-111-12", std::nullopt},
      {"2024-11-123", std::nullopt},
      {"202-11-12", std::nullopt},
      {"12024-11-12", std::nullopt},
      {"2024-11-12\n", std::nullopt},
      {"", std::nullopt},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(TimestampOracle(c.text), c.want) << c.text;
    EXPECT_EQ(Timestamp(c.text), c.want) << c.text;
  }
}

TEST(YamlStyleFloatTest, EdgeCases) {
  for (const char* yes : {"1", "+1", "-1", "1.", "1.5", ".5", "-.5", "1e5", "1E+5", "1.e-5", ".5e5",
                          "007", "0.0e0"}) {
    EXPECT_TRUE(FloatOracle(yes)) << yes;
    EXPECT_TRUE(manifest::goyaml::IsYamlStyleFloat(yes)) << yes;
  }
  for (const char* no : {"", "+", "-", ".", "..5", "1.2.", "e5", "1e", "1e+", ".e5", "1,5", " 1",
                         "1 ", "1e5.5", "0x1F", "1_000", "--1", ".inf", "1\n"}) {
    EXPECT_FALSE(FloatOracle(no)) << no;
    EXPECT_FALSE(manifest::goyaml::IsYamlStyleFloat(no)) << no;
  }
  for (const char* yes : {".5", ".0e0", ".123E-45"}) {
    EXPECT_TRUE(DotFloatOracle(yes)) << yes;
    EXPECT_TRUE(DotFloat(yes)) << yes;
  }
  for (const char* no : {".", ".e5", "+.5", "0.5", ".5.", ".5e", ".nan"}) {
    EXPECT_FALSE(DotFloatOracle(no)) << no;
    EXPECT_FALSE(DotFloat(no)) << no;
  }
}

// Random strings of tokens that the patterns care about, so that matches are common.
std::string RandomText(std::mt19937& rng, const std::vector<std::string>& tokens, int max_tokens) {
  std::string out;
  for (int n = static_cast<int>(rng() % (max_tokens + 1)); n > 0; --n) {
    out += tokens[rng() % tokens.size()];
  }
  return out;
}

TEST(TextFormatsDifferentialTest, ShortRandomStringsMatchTheOldRegexes) {
  std::mt19937 rng(20260102);
  const std::vector<std::string> enc_tokens = {"ENC[AES256_GCM,data:",
                                               ",iv:",
                                               ",tag:",
                                               ",type:",
                                               "]",
                                               "[",
                                               "a",
                                               "=",
                                               ",",
                                               ":",
                                               "iv",
                                               "\n",
                                               "\r",
                                               std::string(1, '\0'),
                                               "\xff",
                                               "str"};
  const std::vector<std::string> time_tokens = {"0", "1", "12", "2024", "-", ":",  "T", "t",    "Z",
                                                "z", " ", ".",  "+",    "e", "\n", "x", "00:00"};
  const std::vector<std::string> float_tokens = {"0", "1", "9", ".", "e", "E", "+", "-", "_", "x"};
  for (int i = 0; i < 20000; ++i) {
    std::string enc = RandomText(rng, enc_tokens, 10);
    if (rng() % 2) enc = "ENC[AES256_GCM,data:" + enc;
    EXPECT_EQ(Enc(enc), Oracle(kEncPattern, enc, true)) << enc;

    std::string time = RandomText(rng, time_tokens, 12);
    if (rng() % 2) time = "2024-01-02" + time;
    EXPECT_EQ(Timestamp(time), TimestampOracle(time)) << time;
    if (rng() % 2) time = "2024-01-02T03:04:05" + RandomText(rng, time_tokens, 4);
    EXPECT_EQ(Rfc3339(time), Oracle(kRfc3339Pattern, time, false)) << time;

    const std::string number = RandomText(rng, float_tokens, 8);
    EXPECT_EQ(manifest::goyaml::IsYamlStyleFloat(number), FloatOracle(number)) << number;
    const std::string dot = "." + number;
    EXPECT_EQ(DotFloat(dot), DotFloatOracle(dot)) << dot;
  }
}

// What crashed libstdc++'s std::regex: megabyte inputs, answered in linear time.
TEST(TextFormatsTest, MegabyteInputs) {
  const std::string mib(1 << 20, 'A');
  const std::string value =
      absl::StrCat("ENC[AES256_GCM,data:", mib, ",iv:", mib, ",tag:", mib, ",type:str]");
  auto enc = MatchEncValue(value);  // views into `value`
  ASSERT_TRUE(enc.has_value());
  EXPECT_EQ(enc->data.size(), mib.size());
  EXPECT_EQ(enc->type, "str");
  EXPECT_FALSE(MatchEncValue(absl::StrCat("ENC[AES256_GCM,data:", mib)).has_value());
  EXPECT_FALSE(MatchRfc3339(absl::StrCat("2026-01-02T02:50:45.", std::string(1 << 20, '1'), "x"))
                   .has_value());
  EXPECT_TRUE(
      MatchTimestampShape(absl::StrCat("2024-1-2 3:4:5.", std::string(1 << 20, '9'))).has_value());
  EXPECT_TRUE(manifest::goyaml::IsYamlStyleFloat(std::string(1 << 20, '7')));
}

}  // namespace
}  // namespace reverser::sops
