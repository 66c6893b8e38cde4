#include "libs/manifest/yaml_reader.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "gtest/gtest.h"
#include "libs/manifest/yaml_writer.h"

namespace reverser::manifest {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

json MustParse(absl::string_view text) {
  auto parsed = ParseYaml(text);
  EXPECT_TRUE(parsed.ok()) << parsed.status() << "\n" << text;
  return parsed.ok() ? *parsed : json();
}

std::string ErrorOf(absl::string_view text) {
  auto parsed = ParseYaml(text);
  EXPECT_FALSE(parsed.ok()) << text;
  return parsed.ok() ? "" : std::string(parsed.status().message());
}

TEST(YamlReaderTest, RoundTripsEveryRealObjectExactly) {
  int count = 0;
  for (const fs::path& dir :
       {fs::path("libs/sanitize/testdata"), fs::path("libs/sanitize/testdata/expected")}) {
    for (const auto& entry : fs::directory_iterator(dir)) {
      if (entry.path().extension() != ".json") continue;
      SCOPED_TRACE(entry.path().string());
      std::ifstream in(entry.path());
      std::stringstream text;
      text << in.rdbuf();
      const json original = json::parse(text.str());
      EXPECT_EQ(MustParse(*MarshalYaml(original)), original);
      if (dir.filename() == "expected") {
        EXPECT_EQ(MustParse(*RenderManifest(original)), original);
      }
      ++count;
    }
  }
  EXPECT_GE(count, 38);
}

TEST(YamlReaderTest, RoundTripsTrickyStrings) {
  json data = json::object();
  int i = 0;
  for (const std::string& s : std::vector<std::string>{
           "",
           " ",
           "true",
           "yes",
           "No",
           "on",
           "null",
           "~",
           "0",
           "0123",
           "08",
           "0x1F",
           "1_000",
           "1.5",
           ".5",
           "1e3",
           ".inf",
           "1:20",
           "2020-01-01",
           "- x",
           "a: b",
           "a #b",
           "#x",
           "*x",
           "&x",
           "!x",
           "%x",
           "@x",
           "'q'",
           "\"dq\"",
           "|",
           ">",
           "[x]",
           "{x}",
           "x,y",
           " leading",
           "trailing ",
           "tab\there",
           "bell\x07",
           "del\x7f",
           "nel\xC2\x85x",
           "\xE2\x80\xA8sep",
           "héllo ✓ 😀",
           "line1\nline2",
           "line1\nline2\n",
           "x\n\n\n",
           "\nlead",
           "  indented\nline\n",
           "trailing space \nx",
           "<<",
           std::string(300, 'y'),
           "long words that keep going and going well past the eighty column folding limit of the "
           "emitter without any line break"}) {
    data["k" + std::to_string(i++)] = s;
    data[s.empty() ? std::string("empty-key") : s] = s;  // as a key too
  }
  const json object = {{"apiVersion", "v1"}, {"kind", "ConfigMap"}, {"data", data}};
  EXPECT_EQ(MustParse(*MarshalYaml(object)), object);
}

TEST(YamlReaderTest, RoundTripsNumbersBooleansAndNulls) {
  const json object = json::parse(R"({"ints": [0, -1, 9223372036854775807, -9223372036854775808],
    "big": 18446744073709551615, "floats": [0.5, -2.25, 1e-7, 1.5e300], "b": [true, false],
    "n": null, "e": {}, "l": []})");
  EXPECT_EQ(MustParse(*MarshalYaml(object)), object);
}

// Including YAML 1.1's surprises: the plain key `n` is the boolean false, so `n: x` reads as
// {"false": "x"} — exactly what sigs.k8s.io/yaml does, and why the writer quotes such keys.
TEST(YamlReaderTest, PlainScalarsResolveAsGoYamlDoes) {
  const json parsed = MustParse(
      "a: yes\nb: Off\nc: 0777\nd: 0x1F\ne: 1_000\nf: 08\ng: 1.5\nh: ~\ni:\nj: 2020-01-01\n"
      "k: \"yes\"\nl: '0777'\nm: |\n  text\nn: !!str 42\no: !!float 3\np: plain text\n"
      "yes: 1\n1: one\n1.5: x\n\"no\": 2\nnull-ish: Null\n");
  EXPECT_EQ(parsed, json::parse(R"({"a": true, "b": false, "c": 511, "d": 31, "e": 1000, "f": 8.0,
    "g": 1.5, "h": null, "i": null, "j": "2020-01-01", "k": "yes", "l": "0777", "m": "text\n",
    "false": "42", "o": 3.0, "p": "plain text", "true": 1, "1": "one", "1.5": "x", "no": 2,
    "null-ish": null})"));
}

TEST(YamlReaderTest, ToleratesBomCrlfAndComments) {
  EXPECT_EQ(MustParse("\xEF\xBB\xBF# head\r\napiVersion: v1 # trailing\r\nkind: X\r\n"),
            json::parse(R"({"apiVersion": "v1", "kind": "X"})"));
  EXPECT_EQ(MustParse("s: |\r\n  a\r\n  b\r\n"), json::parse(R"({"s": "a\nb\n"})"));
}

TEST(YamlReaderTest, AnchorsAndMultipleDocuments) {
  EXPECT_EQ(MustParse("a: &x [1, 2]\nb: *x\n"), json::parse(R"({"a": [1, 2], "b": [1, 2]})"));
  auto docs = ParseYamlDocuments("---\na: 1\n---\n---\nb: 2\n...\n");
  ASSERT_TRUE(docs.ok()) << docs.status();
  ASSERT_EQ(docs->size(), 3u);
  EXPECT_EQ((*docs)[0], json::parse(R"({"a": 1})"));
  EXPECT_TRUE((*docs)[1].is_null());
  EXPECT_EQ((*docs)[2], json::parse(R"({"b": 2})"));
  EXPECT_EQ(ErrorOf("a: 1\n---\nb: 2\n"), "expected one YAML document, found 2");
  EXPECT_EQ(ErrorOf(""), "expected one YAML document, found 0");
}

TEST(YamlReaderTest, RefusesWhatHasNoFaithfulJsonMeaning) {
  EXPECT_EQ(ErrorOf("a: 1\nb: 2\na: 3\n"), "YAML line 3, column 1: duplicate key \"a\"");
  EXPECT_EQ(ErrorOf("base: &b {x: 1}\nd:\n  <<: *b\n"),
            "YAML line 3, column 3: merge keys (<<) are not supported");
  EXPECT_EQ(ErrorOf("a: .inf\n"),
            "YAML line 1, column 4: \".inf\" (infinity/NaN) has no JSON equivalent");
  EXPECT_EQ(ErrorOf("a: !custom x\n"), "YAML line 1, column 4: unsupported tag !custom");
  EXPECT_EQ(ErrorOf("? [a, b]\n: 1\n"), "YAML line 1, column 3: map keys must be scalars");
  EXPECT_EQ(ErrorOf("~: 1\n"), "YAML line 1, column 1: null map keys are not supported");
  EXPECT_EQ(ErrorOf("a: !!int x\n"),
            "YAML line 1, column 4: cannot decode \"x\" as tag:yaml.org,2002:int");
  const std::string syntax = ErrorOf("a: [1, 2\nb: 3\n");
  EXPECT_NE(syntax.find("YAML line"), std::string::npos) << syntax;
  const std::string bad_indent = ErrorOf("a:\n  b: 1\n c: 2\n");
  EXPECT_NE(bad_indent.find("YAML line"), std::string::npos) << bad_indent;
}

// One level of ten-fold expansion per line: `levels` lines make 10^levels copies of `x`.
std::string AliasBomb(char last) {
  std::string bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n";
  for (char c = 'b'; c <= last; ++c) {
    const std::string prev = std::string("*") + static_cast<char>(c - 1);
    bomb += std::string(1, c) + ": &" + c + " [" + prev;
    for (int i = 1; i < 10; ++i) bomb += ", " + prev;
    bomb += "]\n";
  }
  return bomb;
}

TEST(YamlReaderTest, AliasBombsAndDeepNestingAreRefused) {
  auto bomb = ParseYaml(AliasBomb('h'));
  ASSERT_FALSE(bomb.ok());
  EXPECT_EQ(bomb.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(bomb.status().message().find("aliases expand to more than 100000 nodes"),
            std::string::npos)
      << bomb.status();
  YamlReadLimits no_alias_cap;
  no_alias_cap.max_alias_nodes = SIZE_MAX;
  bomb = ParseYaml(AliasBomb('h'), no_alias_cap);
  ASSERT_FALSE(bomb.ok());
  EXPECT_EQ(bomb.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(bomb.status().message().find("more than 1000000 nodes"), std::string::npos);
  for (int levels : {600, 100000}) {
    const std::string deep = std::string(levels, '[') + std::string(levels, ']');
    EXPECT_NE(ErrorOf(deep).find("nested too deeply"), std::string::npos) << levels;
  }
  std::string block;
  for (int i = 0; i < 3000; ++i) block += std::string(i, ' ') + "a:\n";
  EXPECT_NE(ErrorOf(block).find("nested too deeply"), std::string::npos);
}

// The caps hold for the whole text: many documents, each harmless alone, are refused together.
TEST(YamlReaderTest, LimitsCountTheWholeStreamNotEachDocument) {
  const std::string document = "---\n" + AliasBomb('d');  // 10,000 x's from 140 bytes
  YamlReadLimits limits;
  ASSERT_TRUE(ParseYamlDocuments(document, limits).ok());
  std::string stream;
  for (int i = 0; i < 12; ++i) stream += document;
  auto docs = ParseYamlDocuments(stream, limits);
  ASSERT_FALSE(docs.ok());
  EXPECT_EQ(docs.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(docs.status().message().find("aliases expand to more than 100000 nodes"),
            std::string::npos)
      << docs.status();

  limits.max_alias_nodes = SIZE_MAX;
  limits.max_nodes = 100'000;
  docs = ParseYamlDocuments(stream, limits);
  ASSERT_FALSE(docs.ok());
  EXPECT_NE(docs.status().message().find("more than 100000 nodes"), std::string::npos)
      << docs.status();

  // Plain text counts as well: 3 documents of 40,000 scalars each.
  std::string plain;
  for (int d = 0; d < 3; ++d) {
    plain += "---\n";
    for (int i = 0; i < 40000; ++i) plain += "- x\n";
  }
  limits.max_nodes = 100'000;
  EXPECT_FALSE(ParseYamlDocuments(plain, limits).ok());
  limits.max_nodes = 130'000;
  EXPECT_TRUE(ParseYamlDocuments(plain, limits).ok());
}

TEST(YamlReaderTest, AliasesCannotNestDeeperThanTheLimit) {
  const std::string deep = std::string(300, '[') + std::string(300, ']');
  // `b` puts a 300-deep value 300 levels down: 600 levels, though no line nests deeper than 301.
  std::string text =
      "a: &a " + deep + "\nb: " + std::string(299, '[') + "*a" + std::string(299, ']') + "\n";
  auto parsed = ParseYaml(text);
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(parsed.status().message().find("through an alias"), std::string::npos)
      << parsed.status();
  YamlReadLimits limits;
  limits.max_depth = 700;
  EXPECT_TRUE(ParseYaml(text, limits).ok());
}

TEST(YamlReaderTest, NodesKeepOrderTextStylesTagsAndPositions) {
  auto docs = ParseYamlNodes(
      "zeta: 017\nalpha: 'q'\nmid: \"d\\tq\"\nlit: |\n  a\n  b\nfold: >\n  a\n  b\n"
      "tagged: !!str 5\nbare: ! x\ncustom: !thing {k: v}\nseq: [1, ~]\nzeta: again\n");
  ASSERT_TRUE(docs.ok()) << docs.status();
  ASSERT_EQ(docs->size(), 1u);
  const YamlNode& root = docs->front();
  ASSERT_TRUE(root.is_mapping());
  std::vector<std::string> keys;
  for (const YamlNode::Entry& entry : root.entries) keys.push_back(entry.key.value);
  EXPECT_EQ(keys, (std::vector<std::string>{"zeta", "alpha", "mid", "lit", "fold", "tagged", "bare",
                                            "custom", "seq", "zeta"}));
  const YamlNode& zeta = root.entries[0].value;
  EXPECT_TRUE(zeta.is_untagged_plain());
  EXPECT_EQ(zeta.value, "017");  // not resolved
  EXPECT_EQ(zeta.line, 1);
  EXPECT_EQ(zeta.column, 7);
  EXPECT_EQ(root.Find("zeta"), &zeta);  // the first of duplicates
  EXPECT_EQ(root.Find("alpha")->style, YamlNode::Style::kSingleQuoted);
  EXPECT_EQ(root.Find("mid")->style, YamlNode::Style::kDoubleQuoted);
  EXPECT_EQ(root.Find("mid")->value, "d\tq");
  EXPECT_EQ(root.Find("lit")->style, YamlNode::Style::kLiteral);
  EXPECT_EQ(root.Find("lit")->value, "a\nb\n");
  EXPECT_EQ(root.Find("fold")->style, YamlNode::Style::kFolded);
  EXPECT_EQ(root.Find("fold")->value, "a b\n");
  EXPECT_EQ(root.Find("tagged")->tag, "tag:yaml.org,2002:str");
  EXPECT_FALSE(root.Find("tagged")->is_untagged_plain());
  EXPECT_EQ(root.Find("bare")->tag, "!");
  EXPECT_EQ(root.Find("custom")->tag, "!thing");
  EXPECT_EQ(root.Find("custom")->Find("k")->value, "v");
  const YamlNode& seq = *root.Find("seq");
  ASSERT_TRUE(seq.is_sequence());
  ASSERT_EQ(seq.items.size(), 2u);
  EXPECT_EQ(seq.items[1].value, "~");
  EXPECT_EQ(root.Find("missing"), nullptr);
}

TEST(YamlReaderTest, NodesExpandAliasesUnderTheSameLimits) {
  auto docs = ParseYamlNodes("a: &x [1, {b: 2}]\nc: *x\n");
  ASSERT_TRUE(docs.ok()) << docs.status();
  const YamlNode* c = docs->front().Find("c");
  ASSERT_NE(c, nullptr);
  ASSERT_TRUE(c->is_sequence());
  EXPECT_EQ(c->items[1].Find("b")->value, "2");

  auto bomb = ParseYamlNodes(AliasBomb('h'));
  ASSERT_FALSE(bomb.ok());
  EXPECT_EQ(ExceededYamlLimit(bomb.status()), YamlLimit::kAliasNodes) << bomb.status();
  YamlReadLimits limits;
  limits.max_alias_nodes = SIZE_MAX;
  limits.max_nodes = 50'000;
  bomb = ParseYamlNodes(AliasBomb('h'), limits);
  EXPECT_EQ(ExceededYamlLimit(bomb.status()), YamlLimit::kNodes) << bomb.status();
  auto deep = ParseYamlNodes(std::string(100000, '['));
  EXPECT_EQ(ExceededYamlLimit(deep.status()), YamlLimit::kDepth) << deep.status();
  EXPECT_EQ(ExceededYamlLimit(ParseYaml(std::string(600, '[')).status()), YamlLimit::kDepth);
  // An alias inside its own anchor names an anchor not defined yet.
  auto cycle = ParseYamlNodes("a: &x [1, *x]\n");
  EXPECT_EQ(cycle.status().code(), absl::StatusCode::kInvalidArgument) << cycle.status();
  EXPECT_EQ(ExceededYamlLimit(cycle.status()), std::nullopt);
  // The inputs that made yaml-cpp allocate without bound.
  for (const char* text : {",|a", ",piVersion: v1\nk: Secret\n{etadata:\n  name> ,est@-se"}) {
    EXPECT_FALSE(ParseYamlNodes(text).ok()) << text;
  }
  // Keys may be collections here; the schema decides.
  auto complex_key = ParseYamlNodes("? [a, b]\n: 1\n");
  ASSERT_TRUE(complex_key.ok()) << complex_key.status();
  EXPECT_TRUE(complex_key->front().entries[0].key.is_sequence());
  auto empty = ParseYamlNodes("");
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
}

}  // namespace
}  // namespace reverser::manifest
