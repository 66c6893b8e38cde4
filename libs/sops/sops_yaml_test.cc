#include "libs/sops/sops_yaml.h"

#include "gtest/gtest.h"

namespace reverser::sops {
namespace {

TEST(ResolvePlainTest, FollowsYamlV3Typing) {
  struct Case {
    const char* in;
    PlainKind kind;
  };
  const Case cases[] = {
      {"", PlainKind::kNull},
      {"~", PlainKind::kNull},
      {"null", PlainKind::kNull},
      {"true", PlainKind::kBool},
      {"False", PlainKind::kBool},
      {"yes", PlainKind::kString},
      {"on", PlainKind::kString},
      {"017", PlainKind::kInt},
      {"0x1F", PlainKind::kInt},
      {"1_000", PlainKind::kInt},
      {"-5", PlainKind::kInt},
      {"+5", PlainKind::kInt},
      {"09", PlainKind::kFloat},
      {"1e3", PlainKind::kFloat},
      {"3.10", PlainKind::kFloat},
      {".5", PlainKind::kFloat},
      {".inf", PlainKind::kFloat},
      {"-.Inf", PlainKind::kFloat},
      {".nan", PlainKind::kFloat},
      {"1e999", PlainKind::kString},
      {"3.11.0", PlainKind::kString},
      {"2024-01-01", PlainKind::kTimestamp},
      {"2024-11-12T13:33:42Z", PlainKind::kTimestamp},
      {"2024-13-01", PlainKind::kString},
      {"18446744073709551615", PlainKind::kUint},
      {"99999999999999999999", PlainKind::kFloat},
      {"<<", PlainKind::kMerge},
      {"aHVudGVyMg==", PlainKind::kString},
      {"ENC[AES256_GCM,data:x]", PlainKind::kString},
  };
  for (const Case& c : cases) EXPECT_EQ(ResolvePlain(c.in).kind, c.kind) << c.in;
  EXPECT_EQ(ResolvePlain("017").int_value, 15);
  EXPECT_EQ(ResolvePlain("0x1F").int_value, 31);
  EXPECT_EQ(ResolvePlain("-0b101").int_value, -5);
}

TEST(SopsYamlTest, ParsesTypedValuesInDocumentOrder) {
  auto tree = ParseSopsYaml(
      "b: 1\na: \"1\"\nc: [x, 2.5, true, null]\nd: |\n  line\ne: ''\nf: ~\n\"123\": v\n");
  ASSERT_TRUE(tree.ok()) << tree.status();
  EXPECT_EQ(tree->dump(),
            R"({"b":1,"a":"1","c":["x",2.5,true,null],"d":"line\n","e":"","f":null,"123":"v"})");
}

TEST(SopsYamlTest, RefusesWhatSopsRefuses) {
  EXPECT_FALSE(ParseSopsYaml("123: v\n").ok());         // non-string key
  EXPECT_FALSE(ParseSopsYaml("a: 1\na: 2\n").ok());     // duplicate
  EXPECT_FALSE(ParseSopsYaml("a: 2024-01-01\n").ok());  // timestamp leaf
  EXPECT_FALSE(ParseSopsYaml("a: 18446744073709551615\n").ok());
  EXPECT_FALSE(ParseSopsYaml("- a\n").ok());              // not a mapping
  EXPECT_FALSE(ParseSopsYaml("a: 1\n---\nb: 2\n").ok());  // several documents
  EXPECT_FALSE(ParseSopsYaml("a: [\n").ok());             // syntax
  EXPECT_FALSE(ParseSopsYaml("").ok());
  EXPECT_FALSE(ParseSopsYaml("a: !custom x\n").ok());
}

TEST(SopsYamlTest, EmitsQuotingAndLayoutThatReadsBack) {
  Tree doc = Tree::parse(R"({
    "plain": "abc", "num": "017", "yes": "yes", "empty": "", "date": "2024-01-01",
    "colon": "a: b", "hash": "a #b", "lead": " x", "dash": "-x", "quote": "say \"hi\"",
    "uni": "h\u00e9", "ctrl": "a\u0001b", "nl": "one\ntwo", "block": "one\n\ntwo\n",
    "n": 5, "f": 1.0, "g": 0.1, "b": false, "z": null, "dots": "...",
    "list": ["a", {"k": "v", "k2": [1, 2]}, [], {}], "map": {"inner": {"x": "y"}}, "em": {}
  })");
  auto text = EmitSopsYaml(doc);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(*text,
            "plain: abc\n"
            "num: \"017\"\n"
            "\"yes\": \"yes\"\n"
            "empty: \"\"\n"
            "date: \"2024-01-01\"\n"
            "colon: \"a: b\"\n"
            "hash: \"a #b\"\n"
            "lead: \" x\"\n"
            "dash: \"-x\"\n"
            "quote: say \"hi\"\n"  // quotes only matter at the start
            "uni: \"h\xC3\xA9\"\n"
            "ctrl: \"a\\x01b\"\n"
            "nl: \"one\\ntwo\"\n"
            "block: |\n    one\n\n    two\n"
            "\"n\": 5\n"  // YAML 1.1 readers (kubectl) take a plain n for false
            "f: 1.0\n"
            "g: 0.1\n"
            "b: false\n"
            "z: null\n"
            "dots: \"...\"\n"
            "list:\n"
            "    - a\n"
            "    - k: v\n"
            "      k2:\n"
            "        - 1\n"
            "        - 2\n"
            "    - []\n"
            "    - {}\n"
            "map:\n"
            "    inner:\n"
            "        x: \"y\"\n"
            "em: {}\n");
  auto back = ParseSopsYaml(*text);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, doc);
  // Characters YAML 1.1 readers treat as line breaks (or a BOM) are escaped.
  Tree breaks = Tree{{"s", "a\u2028b\u0085c\ufeffd\u2029"}};
  auto escaped = EmitSopsYaml(breaks);
  ASSERT_TRUE(escaped.ok());
  EXPECT_EQ(*escaped, "s: \"a\\u2028b\\u0085c\\uFEFFd\\u2029\"\n");
  EXPECT_EQ(*ParseSopsYaml(*escaped), breaks);
  EXPECT_FALSE(EmitSopsYaml(Tree::array()).ok());
  EXPECT_FALSE(EmitSopsYaml(Tree{{"bad", std::string("\xff")}}).ok());
}

}  // namespace
}  // namespace reverser::sops
