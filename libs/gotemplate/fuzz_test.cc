// Robustness: random token soup must parse or fail with a positioned error, and parsed
// templates must execute or fail cleanly — never crash or hang. Deterministic seed.

#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "libs/gotemplate/template.h"

namespace reverser::gotemplate {
namespace {

TEST(TemplateFuzzTest, RandomTokenSoup) {
  const std::vector<std::string> tokens = {
      "{{", "}}", "{{- ", " -}}", "{{/*", "*/}}", ".", ".A", ".B.C", ".Missing", "$", "$x",
      "$i", "$e", ":=", "=", ",", "|", "(", ")", "if ", "else ", "else if ", "end", "range ",
      "with ", "len ", "printf ", "print ", "index ", "eq ", "ne ", "and ", "or ", "not ",
      "\"%s %d %v %q\" ", "\"s\"", "`raw`", "\"bad\\q\"", "\"unterminated", "1", "-2", "007",
      "99999999999999999999", "true", "false", "nil", " ", "\n", "text", "{", "}", "-", "#",
      "template ", "define ", "break"};
  const Value data(Value::Map{{"A", Value::Map{{"k", "v"}}},
                              {"B", Value::Map{{"C", Value::List{1, "two", true}}}},
                              {"S", "str"},
                              {"N", 3}});
  std::mt19937 rng(1129);
  int parsed = 0, executed = 0;
  for (int round = 0; round < 30000; ++round) {
    std::string text;
    const int n = 1 + rng() % 14;
    for (int i = 0; i < n; ++i) text += tokens[rng() % tokens.size()];
    auto tmpl = Template::Parse("fuzz", text);
    if (!tmpl.ok()) {
      EXPECT_TRUE(absl::StartsWith(tmpl.status().message(), "template: fuzz:"))
          << tmpl.status() << " for " << text;
      continue;
    }
    ++parsed;
    auto out = tmpl->Execute(data);
    if (out.ok()) ++executed;
  }
  EXPECT_GT(parsed, 1000);
  EXPECT_GT(executed, 500);
}

}  // namespace
}  // namespace reverser::gotemplate
