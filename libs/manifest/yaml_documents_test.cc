#include "libs/manifest/yaml_documents.h"

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "libs/manifest/yaml_reader.h"
#include "libs/manifest/yaml_writer.h"

namespace reverser::manifest {
namespace {

using nlohmann::json;

std::vector<std::string> Contents(const YamlDocuments& docs) {
  std::vector<std::string> out;
  for (size_t i = 0; i < docs.size(); ++i) out.emplace_back(docs.content(i));
  return out;
}

// Every split gives the text back unchanged.
YamlDocuments SplitBack(absl::string_view text) {
  YamlDocuments docs = YamlDocuments::Split(text);
  EXPECT_EQ(docs.Text(), text);
  return docs;
}

TEST(YamlDocumentsTest, StreamsWithoutDocuments) {
  for (absl::string_view text :
       {"", "\n\n", "# only a comment\n", "# a\n\n  # b", "\xEF\xBB\xBF"}) {
    SCOPED_TRACE(text);
    YamlDocuments docs = SplitBack(text);
    EXPECT_EQ(docs.size(), 0u);
    EXPECT_EQ(docs.CountNonEmpty(), 0u);
  }
}

TEST(YamlDocumentsTest, SingleDocumentWithAndWithoutMarkers) {
  YamlDocuments plain = SplitBack("a: 1\nb: 2\n");
  EXPECT_EQ(Contents(plain), std::vector<std::string>{"a: 1\nb: 2\n"});
  YamlDocuments marked = SplitBack("---\na: 1\n");
  EXPECT_EQ(Contents(marked), std::vector<std::string>{"a: 1\n"});
  YamlDocuments no_newline = SplitBack("a: 1");
  EXPECT_EQ(Contents(no_newline), std::vector<std::string>{"a: 1"});
  // `----` and `---x` are content, not markers.
  YamlDocuments dashes = SplitBack("a: |\n  x\n----\n");
  EXPECT_EQ(dashes.size(), 1u);
}

TEST(YamlDocumentsTest, SeparatorsWithTrailingCommentsAreHeads) {
  const std::string text = "--- # first\na: 1\n---\t# second\nb: 2\n";
  YamlDocuments docs = SplitBack(text);
  EXPECT_EQ(Contents(docs), (std::vector<std::string>{"a: 1\n", "b: 2\n"}));
  docs.Replace(1, "b: 3\n");
  EXPECT_EQ(docs.Text(), "--- # first\na: 1\n---\t# second\nb: 3\n");
  docs.Remove(0);
  EXPECT_EQ(docs.Text(), "---\t# second\nb: 3\n");
}

TEST(YamlDocumentsTest, ContentOnTheMarkerLine) {
  YamlDocuments docs = SplitBack("--- {a: 1}\n--- |\n  text\n");
  EXPECT_EQ(Contents(docs), (std::vector<std::string>{"--- {a: 1}\n", "--- |\n  text\n"}));
  EXPECT_TRUE(docs.Replace(0, "a: 2\n"));
  EXPECT_EQ(docs.Text(), "---\na: 2\n--- |\n  text\n");
  // Re-split, the document reads back as exactly what was written.
  YamlDocuments again = SplitBack(docs.Text());
  EXPECT_EQ(again.content(0), "a: 2\n");
  EXPECT_FALSE(docs.Replace(0, "a: 2\n"));
}

TEST(YamlDocumentsTest, EndMarkersStayWithTheirDocument) {
  const std::string text = "a: 1\n...\n# after the end\n---\nb: 2\n... # done\n";
  YamlDocuments docs = SplitBack(text);
  EXPECT_EQ(Contents(docs), (std::vector<std::string>{"a: 1\n", "b: 2\n"}));
  docs.Replace(0, "a: 9\n");
  EXPECT_EQ(docs.Text(), "a: 9\n...\n# after the end\n---\nb: 2\n... # done\n");
  docs.Remove(1);
  EXPECT_EQ(docs.Text(), "a: 9\n...\n# after the end\n");
  // An extra `...` before any document is the preamble's.
  EXPECT_EQ(SplitBack("...\n").size(), 0u);
}

TEST(YamlDocumentsTest, CommentsBetweenDocumentsAreKeptByReplace) {
  const std::string text =
      "# file header\n"
      "\n"
      "a: 1\n"
      "# about the next one\n"
      "---\n"
      "# b's own comment\n"
      "b: 2\n"
      "  # indented: may be a block scalar's line, so content\n"
      "\n"
      "# trailing\n";
  YamlDocuments docs = SplitBack(text);
  EXPECT_EQ(Contents(docs),
            (std::vector<std::string>{
                "a: 1\n", "b: 2\n  # indented: may be a block scalar's line, so content\n\n"}));
  docs.Replace(0, "a: 2\n");
  docs.Replace(1, "b: 3\n");
  EXPECT_EQ(docs.Text(),
            "# file header\n\na: 2\n# about the next one\n---\n# b's own comment\nb: 3\n"
            "# trailing\n");
}

TEST(YamlDocumentsTest, LeadingCommentBlockSurvivesRemovingTheFirstDocument) {
  YamlDocuments implicit = SplitBack("# header\na: 1\n---\nb: 2\n");
  implicit.Remove(0);
  EXPECT_EQ(implicit.Text(), "# header\n---\nb: 2\n");
  YamlDocuments explicit_start = SplitBack("# header\n---\na: 1\n---\nb: 2\n");
  explicit_start.Remove(0);
  EXPECT_EQ(explicit_start.Text(), "# header\n---\nb: 2\n");
  explicit_start.Replace(1, "b: 3\n");
  EXPECT_EQ(explicit_start.Text(), "# header\n---\nb: 3\n");
}

TEST(YamlDocumentsTest, EmptyDocumentsAndDocumentsThatAreOnlyAComment) {
  YamlDocuments docs = SplitBack("---\n---\n# only a comment\n---\na: 1\n---\n");
  ASSERT_EQ(docs.size(), 4u);
  EXPECT_TRUE(docs.empty(0));
  EXPECT_TRUE(docs.empty(1));
  EXPECT_FALSE(docs.empty(2));
  EXPECT_TRUE(docs.empty(3));
  EXPECT_EQ(docs.CountNonEmpty(), 1u);
  docs.Remove(2);
  EXPECT_EQ(docs.CountNonEmpty(), 0u);
  EXPECT_EQ(docs.Text(), "---\n---\n# only a comment\n---\n");
}

TEST(YamlDocumentsTest, CrlfFilesKeepTheirLineEndings) {
  const std::string text = "# h\r\na: 1\r\n---\r\nb: 2\r\n";
  YamlDocuments docs = SplitBack(text);
  EXPECT_EQ(docs.newline(), "\r\n");
  EXPECT_EQ(Contents(docs), (std::vector<std::string>{"a: 1\r\n", "b: 2\r\n"}));
  EXPECT_FALSE(docs.Replace(1, "b: 2\n")) << "the same document in the file's line endings";
  EXPECT_TRUE(docs.Replace(1, "b: 3\nc: 4\n"));
  docs.Append("d: 5\n");
  EXPECT_EQ(docs.Text(), "# h\r\na: 1\r\n---\r\nb: 3\r\nc: 4\r\n---\r\nd: 5\r\n");
  // A lone CR is a line break too.
  YamlDocuments cr = SplitBack("a: 1\r---\rb: 2\r");
  EXPECT_EQ(cr.newline(), "\r");
  EXPECT_EQ(cr.size(), 2u);
}

TEST(YamlDocumentsTest, ByteOrderMarkStaysFirst) {
  YamlDocuments docs = SplitBack(
      "\xEF\xBB\xBF"
      "a: 1\n---\nb: 2\n");
  EXPECT_TRUE(docs.has_bom());
  EXPECT_EQ(Contents(docs), (std::vector<std::string>{"a: 1\n", "b: 2\n"}));
  docs.Remove(0);
  EXPECT_EQ(docs.Text(), "\xEF\xBB\xBF---\nb: 2\n");
  YamlDocuments only_bom = SplitBack("\xEF\xBB\xBF");
  only_bom.Append("a: 1\n");
  EXPECT_EQ(only_bom.Text(),
            "\xEF\xBB\xBF"
            "a: 1\n");
}

TEST(YamlDocumentsTest, AppendAddsASeparatorAndTheMissingLineBreak) {
  YamlDocuments empty = SplitBack("");
  empty.Append("a: 1\n");
  EXPECT_EQ(empty.Text(), "a: 1\n");
  YamlDocuments comment_only = SplitBack("# header");
  comment_only.Append("a: 1\n");
  EXPECT_EQ(comment_only.Text(), "# header\n---\na: 1\n");
  YamlDocuments unterminated = SplitBack("a: 1");
  EXPECT_EQ(unterminated.Append("b: 2\n"), 1u);
  EXPECT_EQ(unterminated.Text(), "a: 1\n---\nb: 2\n");
  // Appended, then removed again: the file is what it was.
  YamlDocuments file = SplitBack("a: 1\n");
  file.Remove(file.Append("b: 2\n"));
  EXPECT_EQ(file.Text(), "a: 1\n");
}

// A null document on the file's last line, its marker unterminated (found by
// yaml_documents_fuzzer): the content written into it starts a line of its own, so it is not
// swallowed by the marker's comment.
TEST(YamlDocumentsTest, ReplacingANullDocumentOnTheLastLineBreaksTheLine) {
  YamlDocuments file = SplitBack("a: 1\n---  # later");
  ASSERT_EQ(file.size(), 2u);
  ASSERT_TRUE(file.empty(1));
  EXPECT_TRUE(file.Replace(1, "b: 2\n"));
  EXPECT_EQ(file.Text(), "a: 1\n---  # later\nb: 2\n");
  YamlDocuments crlf = SplitBack("a: 1\r\n---");
  EXPECT_TRUE(crlf.Replace(1, "b: 2\n"));
  EXPECT_EQ(crlf.Text(), "a: 1\r\n---\r\nb: 2\r\n");
}

// What this library's writer renders reads back as exactly its bytes, whatever stands around
// it, so repeated updates never grow a file.
TEST(YamlDocumentsTest, RenderedDocumentsReadBackExactly) {
  json object = {{"apiVersion", "v1"},
                 {"kind", "ConfigMap"},
                 {"metadata", {{"name", "x"}, {"namespace", "default"}}},
                 {"data",
                  {{"script", "echo hi\n# not a comment\n"},
                   {"kept", "tail\n\n\n"},
                   {"long", std::string(50, 'w') + " # " + std::string(50, 'v') + "\n#x " +
                                std::string(90, 'y')},
                   {"zz", "# hash first"}}}};
  auto rendered = RenderManifest(object);
  ASSERT_TRUE(rendered.ok()) << rendered.status();
  for (const std::string& around :
       {std::string("a: 1\n---\n"), std::string("# header\n"), std::string("")}) {
    for (const std::string& after : {std::string(""), std::string("# trailing\n\n# more\n"),
                                     std::string("...\n"), std::string("---\nb: 2\n")}) {
      std::string text = absl::StrCat(around, "---\nold: 1\n", after);
      YamlDocuments docs = SplitBack(text);
      const size_t last = around == "a: 1\n---\n" ? 1 : 0;
      for (int round = 0; round < 3; ++round) {
        docs.Replace(last, *rendered);
        docs = SplitBack(docs.Text());
        EXPECT_EQ(docs.content(last), *rendered) << docs.Text();
      }
      auto parsed = ParseYamlDocuments(docs.Text());
      ASSERT_TRUE(parsed.ok()) << parsed.status() << docs.Text();
      EXPECT_EQ((*parsed)[last], object);
    }
  }
}

// The cut agrees with libyaml on every stream of collections libyaml reads: as many documents,
// each content reading as the same value on its own. Random streams of tricky lines, fixed seed.
TEST(YamlDocumentsTest, AgreesWithTheParserOnRandomStreams) {
  const std::vector<std::string> lines = {
      "---",       "--- # c", "---\t",      "--- {a: 1}", "--- |",  "...",      "... # e",
      "# comment", "",        "  # indent", "a: 1",       "b:",     "  - x",    "  - y",
      "s: |",      "  lit",   "  # in lit", "",           "k: \"q", "# q\"",    "%YAML 1.1",
      "c: [1,",    "  2]",    "----",       "x: ---",     "  ---",  "z: '...'", "\xEF\xBB\xBF"};
  std::mt19937 rng(20240611);
  int agreed = 0;
  for (int round = 0; round < 20000; ++round) {
    std::vector<std::string> picked;
    const int count = 1 + static_cast<int>(rng() % 9);
    for (int i = 0; i < count; ++i) picked.push_back(lines[rng() % lines.size()]);
    const std::string newline = rng() % 4 == 0 ? "\r\n" : "\n";
    std::string text = absl::StrJoin(picked, newline);
    if (rng() % 2) text += newline;
    YamlDocuments docs = SplitBack(text);
    auto parsed = ParseYamlDocuments(text);
    if (!parsed.ok()) continue;
    // A top-level plain scalar may go on at column 0 (even over a `%` line); the cut is made
    // for documents that are collections, as every object is.
    if (std::any_of(parsed->begin(), parsed->end(),
                    [](const json& doc) { return doc.is_primitive() && !doc.is_null(); })) {
      continue;
    }
    ASSERT_EQ(docs.size(), parsed->size()) << text;
    for (size_t i = 0; i < docs.size(); ++i) {
      if (docs.empty(i)) {
        EXPECT_TRUE((*parsed)[i].is_null()) << text;
        continue;
      }
      auto alone = ParseYaml(docs.content(i));
      if (!alone.ok()) {
        // The known misreading (yaml_documents.h): a quoted scalar went on into the tail.
        alone = ParseYaml(absl::StrCat(docs.content(i), docs.tail(i)));
      }
      ASSERT_TRUE(alone.ok()) << alone.status() << "\n" << text;
      EXPECT_EQ(*alone, (*parsed)[i]) << text;
    }
    ++agreed;
  }
  EXPECT_GT(agreed, 2000);
}

}  // namespace
}  // namespace reverser::manifest
