#include "libs/gitignore/ignore_rules.h"

#include <string>

#include "gtest/gtest.h"

namespace reverser::gitignore {
namespace {

IgnoreRules Rules(absl::string_view text) {
  auto rules = IgnoreRules::Parse(text);
  EXPECT_TRUE(rules.ok()) << rules.status();
  return rules.ok() ? *std::move(rules) : IgnoreRules();
}

bool Refused(absl::string_view text, absl::string_view why) {
  auto rules = IgnoreRules::Parse(text);
  return !rules.ok() && absl::IsInvalidArgument(rules.status()) &&
         rules.status().message().find(why) != absl::string_view::npos;
}

TEST(GlobMatchesTest, StarsQuestionMarksAndClassesStayWithinOneName) {
  EXPECT_TRUE(GlobMatches("*.yaml", "a.yaml"));
  EXPECT_FALSE(GlobMatches("*.yaml", "d/a.yaml"));
  EXPECT_TRUE(GlobMatches("a?c", "abc"));
  EXPECT_FALSE(GlobMatches("a?c", "a/c"));
  EXPECT_TRUE(GlobMatches("[a-c]x", "bx"));
  EXPECT_FALSE(GlobMatches("[!a-c]x", "bx"));
  EXPECT_TRUE(GlobMatches("[^a-c]x", "dx"));
  EXPECT_TRUE(GlobMatches("[]]", "]"));
  EXPECT_TRUE(GlobMatches("\\*", "*"));
  EXPECT_FALSE(GlobMatches("\\*", "a"));
  EXPECT_FALSE(GlobMatches("[a", "a"));  // unterminated: never matches
}

TEST(GlobMatchesTest, DoubleStarSegmentsCrossDirectories) {
  EXPECT_TRUE(GlobMatches("**/x", "x"));
  EXPECT_TRUE(GlobMatches("**/x", "a/b/x"));
  EXPECT_TRUE(GlobMatches("a/**/b", "a/b"));
  EXPECT_TRUE(GlobMatches("a/**/b", "a/x/y/b"));
  EXPECT_FALSE(GlobMatches("a/**/b", "a/xb"));
  EXPECT_TRUE(GlobMatches("a/**", "a/x/y"));
  EXPECT_FALSE(GlobMatches("a/**", "b/x"));
  // Not a whole segment: two plain stars.
  EXPECT_TRUE(GlobMatches("a**b", "axxb"));
  EXPECT_FALSE(GlobMatches("a**b", "a/b"));
}

TEST(GlobMatchesTest, AdversarialPatternsStayLinear) {
  // Backtracking matchers take exponential time here; this one walks each character once.
  const std::string glob = std::string(200, '*') + "a*a*a*a*a*a*a*a*a*a*b";
  EXPECT_FALSE(GlobMatches(glob, std::string(4000, 'a')));
  EXPECT_TRUE(GlobMatches(glob, std::string(4000, 'a') + "b"));
}

TEST(IgnoreRulesTest, FollowsGitignoreSemantics) {
  // Each case agrees with `git check-ignore` on the same file and paths.
  IgnoreRules rules = Rules(
      "# scratch files\n"
      "*.tmp\n"
      "\n"
      "/notes.md\n"
      "generated/\n"
      "docs/**/draft-*\n"
      "!keep.tmp\n"
      "\\#literal\n"
      "trailing-space\\ \n"
      "spaces-dropped   \n");
  EXPECT_TRUE(rules.Ignored("x.tmp"));
  EXPECT_TRUE(rules.Ignored("deep/down/x.tmp"));
  EXPECT_FALSE(rules.Ignored("keep.tmp"));
  EXPECT_FALSE(rules.Ignored("a/keep.tmp"));
  EXPECT_TRUE(rules.Ignored("notes.md"));
  EXPECT_FALSE(rules.Ignored("sub/notes.md"));  // anchored to the file's directory
  EXPECT_TRUE(rules.Ignored("generated", /*is_dir=*/true));
  EXPECT_FALSE(rules.Ignored("generated"));  // a file of that name: directories only
  EXPECT_TRUE(rules.Ignored("generated/app.yaml"));
  EXPECT_TRUE(rules.Ignored("a/generated/app.yaml"));
  EXPECT_TRUE(rules.Ignored("docs/draft-1"));
  EXPECT_TRUE(rules.Ignored("docs/x/y/draft-2"));
  EXPECT_FALSE(rules.Ignored("other/docs/draft-1"));
  EXPECT_TRUE(rules.Ignored("#literal"));
  EXPECT_TRUE(rules.Ignored("trailing-space "));
  EXPECT_TRUE(rules.Ignored("spaces-dropped"));
  EXPECT_FALSE(rules.Ignored("apps/deployments/web.yaml"));
}

TEST(IgnoreRulesTest, TheLastMatchWinsButAnIgnoredDirectoryCannotBeReopened) {
  IgnoreRules rules = Rules("vendor/\n!vendor/keep.yaml\n*.bak\n!important.bak\n");
  EXPECT_TRUE(rules.Ignored("vendor/keep.yaml"));  // as git: the directory is excluded
  EXPECT_TRUE(rules.Ignored("x.bak"));
  EXPECT_FALSE(rules.Ignored("important.bak"));
  IgnoreRules reopened = Rules("vendor/*\n!vendor/keep.yaml\n");
  EXPECT_FALSE(reopened.Ignored("vendor/keep.yaml"));  // the directory itself is not excluded
  EXPECT_TRUE(reopened.Ignored("vendor/other.yaml"));
}

TEST(IgnoreRulesTest, CatastrophicPatternsAreRefusedWithTheirLine) {
  for (const char* pattern : {"*", "**", "/", "/*", "/**", "**/*", "*.yaml", "*.yml", "**/*.yaml",
                              "*.y?ml", "*/", "**/"}) {
    EXPECT_TRUE(Refused(absl::StrCat("# fine\n", pattern, "\n"), "line 2")) << pattern;
    EXPECT_TRUE(Refused(pattern, "would hide every")) << pattern;
  }
  // Narrow ones are fine, and so is a negation of anything.
  for (const char* pattern :
       {"*.tmp", "secrets/*.yaml", "!*.yaml", "generated/", "a*.yaml", "/*.yaml"}) {
    EXPECT_TRUE(IgnoreRules::Parse(pattern).ok()) << pattern;
  }
}

TEST(IgnoreRulesTest, MalformedOrOversizedFilesAreRefusedNotCrashedOn) {
  EXPECT_TRUE(Refused("ok\n[abc\n", "line 2: an unterminated [ class"));
  EXPECT_TRUE(Refused(std::string("a\0b", 3), "NUL"));
  IgnoreLimits small;
  small.max_patterns = 2;
  EXPECT_FALSE(IgnoreRules::Parse("a\nb\nc\n", small).ok());
  small.max_bytes = 4;
  EXPECT_TRUE(absl::IsInvalidArgument(IgnoreRules::Parse("abcdef", small).status()));
  small = {};
  small.max_pattern_length = 3;
  EXPECT_FALSE(IgnoreRules::Parse("abcd", small).ok());
  // CRLF files and comment-only files.
  IgnoreRules crlf = Rules("*.tmp\r\n# only a comment\r\n");
  EXPECT_EQ(crlf.size(), 1u);
  EXPECT_TRUE(crlf.Ignored("a.tmp"));
  EXPECT_EQ(Rules("# all commented\n#*\n").size(), 0u);
}

}  // namespace
}  // namespace reverser::gitignore
