#include "libs/gotemplate/template.h"

#include "gtest/gtest.h"

namespace reverser::gotemplate {
namespace {

std::string MustRender(absl::string_view text, const Value& data) {
  auto out = Render("t", text, data);
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? *out : "<error>";
}

std::string ErrorOf(absl::string_view text, const Value& data = Value(Value::Map{})) {
  auto out = Render("t", text, data);
  EXPECT_FALSE(out.ok()) << text << " rendered " << *out;
  return out.ok() ? "" : std::string(out.status().message());
}

// The reference's three default commit templates (`internal/git/types.go`).
constexpr char kEventTemplate[] = "[{{.Operation}}] {{.APIVersion}}/{{.Resource}}/{{.Name}}";
constexpr char kGroupTemplate[] = "{{.Author}} on {{.GitTarget}}: {{.Count}} resource(s)";
constexpr char kReconcileTemplate[] =
    "reconciled {{.Count}} {{if .Resource}}{{.Resource}}{{else}}resources{{end}}"
    "{{if .Revision}} (last resourceVersion: {{.Revision}}){{end}}";

TEST(TemplateTest, ReferenceEventTemplate) {
  const Value data(Value::Map{{"Operation", "CREATE"}, {"Group", "apps"}, {"Version", "v1"},
                              {"Resource", "deployments"}, {"Namespace", "default"},
                              {"Name", "web"}, {"APIVersion", "apps/v1"},
                              {"Username", "alice"}, {"GitTarget", "prod"}});
  EXPECT_EQ(MustRender(kEventTemplate, data), "[CREATE] apps/v1/deployments/web");
}

TEST(TemplateTest, ReferenceGroupTemplate) {
  const Value data(Value::Map{
      {"Author", "alice"}, {"GitTarget", "prod"}, {"Count", 3},
      {"Operations", Value::Map{{"CREATE", 1}, {"UPDATE", 2}}}, {"Resources", Value::List{}}});
  EXPECT_EQ(MustRender(kGroupTemplate, data), "alice on prod: 3 resource(s)");
}

TEST(TemplateTest, ReferenceReconcileTemplate) {
  Value::Map data{{"Count", 42}, {"GitTarget", "prod"}, {"Group", "apiextensions.k8s.io"},
                  {"Version", "v1"}, {"Resource", "customresourcedefinitions"},
                  {"APIVersion", "apiextensions.k8s.io/v1"}, {"Revision", "121494"}};
  EXPECT_EQ(MustRender(kReconcileTemplate, Value(data)),
            "reconciled 42 customresourcedefinitions (last resourceVersion: 121494)");
  data["Resource"] = "";
  data["Revision"] = "";
  data["Count"] = 0;
  EXPECT_EQ(MustRender(kReconcileTemplate, Value(data)), "reconciled 0 resources");
}

TEST(TemplateTest, MissingKeyIsAnErrorWithPosition) {
  EXPECT_EQ(ErrorOf("[{{.Operation}}] {{.Nope}}", Value(Value::Map{{"Operation", "x"}})),
            "template: t:1:19: executing \"t\" at <.Nope>: map has no entry for key \"Nope\"");
  EXPECT_EQ(ErrorOf("{{.A.B}}", Value(Value::Map{{"A", "s"}})),
            "template: t:1:4: executing \"t\" at <.A.B>: can't evaluate field B in type string");
}

TEST(TemplateTest, ParseErrorsCarryLineAndColumn) {
  // Go's wording and format: parse errors name the line only.
  EXPECT_EQ(ErrorOf("ok\n  {{.A"), "template: t:2: unclosed action");
  EXPECT_EQ(ErrorOf("{{frobnicate .A}}"), "template: t:1: function \"frobnicate\" not defined");
  EXPECT_EQ(ErrorOf("{{if .A}}x"), "template: t:1: unexpected EOF");
  EXPECT_EQ(ErrorOf("x{{end}}"), "template: t:1: unexpected {{end}}");
  EXPECT_EQ(ErrorOf("{{$x}}"), "template: t:1: undefined variable \"$x\"");
  EXPECT_EQ(ErrorOf("a\n{{\"abc}}"), "template: t:2: unterminated quoted string");
  EXPECT_EQ(ErrorOf("{{}}"), "template: t:1: missing value for command");
  EXPECT_EQ(ErrorOf("{{template \"x\"}}"), "template: t:1: {{template}} is not supported");
  EXPECT_EQ(ErrorOf("{{| .A}}"), "template: t:1: unexpected \"|\" in command");
  EXPECT_EQ(ErrorOf("{{/* open"), "template: t:1: unclosed comment");
  EXPECT_EQ(ErrorOf("{{ ( .A }}"), "template: t:1: unclosed left paren");
  EXPECT_EQ(ErrorOf("{{ # }}"), "template: t:1: unexpected \"#\" in command");
  // Like Go, a pipe that ends the action is ignored.
  EXPECT_EQ(MustRender("{{.A | }}", Value(Value::Map{{"A", "x"}})), "x");
}

TEST(TemplateTest, IfElseIfElse) {
  constexpr char kText[] = "{{if .A}}a{{else if .B}}b{{else}}none{{end}}";
  EXPECT_EQ(MustRender(kText, Value(Value::Map{{"A", true}, {"B", true}})), "a");
  EXPECT_EQ(MustRender(kText, Value(Value::Map{{"A", 0}, {"B", "x"}})), "b");
  EXPECT_EQ(MustRender(kText, Value(Value::Map{{"A", ""}, {"B", Value::List{}}})), "none");
}

TEST(TemplateTest, WithRebindsDot) {
  EXPECT_EQ(MustRender("{{with .M}}{{.K}}{{else}}empty{{end}}",
                       Value(Value::Map{{"M", Value::Map{{"K", "v"}}}})),
            "v");
  EXPECT_EQ(MustRender("{{with .M}}{{.K}}{{else}}empty{{end}}",
                       Value(Value::Map{{"M", Value::Map{}}})),
            "empty");
}

TEST(TemplateTest, RangeOverListsAndMapsInSortedKeyOrder) {
  const Value data(Value::Map{
      {"Ops", Value::Map{{"UPDATE", 2}, {"CREATE", 1}, {"DELETE", 0}}},
      {"Names", Value::List{"a", "b"}},
      {"Empty", Value::List{}}});
  EXPECT_EQ(MustRender("{{range $op, $n := .Ops}}{{$op}}={{$n}};{{end}}", data),
            "CREATE=1;DELETE=0;UPDATE=2;");
  EXPECT_EQ(MustRender("{{range .Names}}<{{.}}>{{end}}", data), "<a><b>");
  EXPECT_EQ(MustRender("{{range $i, $e := .Names}}{{$i}}:{{$e}} {{end}}", data), "0:a 1:b ");
  EXPECT_EQ(MustRender("{{range .Empty}}x{{else}}nothing{{end}}", data), "nothing");
  // $ still reaches the root inside a range.
  EXPECT_EQ(MustRender("{{range .Names}}{{len $.Names}}{{end}}", data), "22");
  EXPECT_EQ(ErrorOf("{{range .N}}x{{end}}", Value(Value::Map{{"N", 3}})),
            "template: t:1:8: executing \"t\" at <.N>: range can't iterate over 3");
}

TEST(TemplateTest, RangeOverResourceList) {
  const Value data(Value::Map{
      {"Resources",
       Value::List{Value::Map{{"Group", ""}, {"Version", "v1"}, {"Resource", "configmaps"},
                              {"Namespace", "ns"}, {"Name", "a"}},
                   Value::Map{{"Group", "apps"}, {"Version", "v1"}, {"Resource", "deployments"},
                              {"Namespace", "ns"}, {"Name", "b"}}}}});
  EXPECT_EQ(MustRender("{{range .Resources}}\n- {{if .Group}}{{.Group}}/{{end}}{{.Resource}}/"
                       "{{.Name}}{{end}}",
                       data),
            "\n- configmaps/a\n- apps/deployments/b");
}

TEST(TemplateTest, TrimMarkers) {
  const Value data(Value::Map{{"A", "x"}});
  EXPECT_EQ(MustRender("a  \n {{- .A -}} \n\t b", data), "axb");
  EXPECT_EQ(MustRender("a {{- .A}} b", data), "ax b");
  EXPECT_EQ(MustRender("a {{.A -}} b", data), "a xb");
  // Without a space, `{{-3}}` is the number -3, not a trim marker.
  EXPECT_EQ(MustRender("a {{-3}}", data), "a -3");
  EXPECT_EQ(MustRender("a {{- /* note */ -}} b", data), "ab");
  EXPECT_EQ(MustRender("a{{/* note */}}b", data), "ab");
}

TEST(TemplateTest, FunctionsAndPipelines) {
  const Value data(Value::Map{{"S", "hello"}, {"L", Value::List{1, 2, 3}}, {"N", 7},
                              {"M", Value::Map{{"k", "v"}}}});
  EXPECT_EQ(MustRender("{{len .S}} {{len .L}} {{len .M}}", data), "5 3 1");
  EXPECT_EQ(MustRender("{{printf \"%s has %d items (%v)\" .S (len .L) .L}}", data),
            "hello has 3 items ([1 2 3])");
  EXPECT_EQ(MustRender("{{.L | len | printf \"%03d\"}}", data), "003");
  EXPECT_EQ(MustRender("{{index .M \"k\"}}{{index .L 1}}", data), "v2");
  EXPECT_EQ(MustRender("{{if and .S (not .N)}}y{{else}}n{{end}}", data), "n");
  EXPECT_EQ(MustRender("{{if or (eq .N 1 7) false}}y{{end}}", data), "y");
  EXPECT_EQ(MustRender("{{if ne .S \"hello\"}}y{{else}}same{{end}}", data), "same");
  EXPECT_EQ(MustRender("{{$x := .S}}{{$x}}-{{$x = \"z\"}}{{$x}}", data), "hello-z");
  EXPECT_EQ(MustRender("{{print 1 2 \"a\" 3}}", data), "1 2a3");
  EXPECT_EQ(MustRender("{{.M}} {{.L}} {{true}} {{`raw\\n`}} {{\"q\\tq\"}}", data),
            "map[k:v] [1 2 3] true raw\\n q\tq");
  EXPECT_EQ(ErrorOf("{{len .N}}", data),
            "template: t:1:2: executing \"t\" at <len .N>: error calling len: len of type int");
  EXPECT_EQ(ErrorOf("{{len .N 1}}", data),
            "template: t:1:2: executing \"t\" at <len>: wrong number of args for len: want 1 got 2");
  EXPECT_EQ(ErrorOf("{{.S .N}}", data),
            "template: t:1:2: executing \"t\" at <.S>: S is not a method but has arguments");
  EXPECT_EQ(ErrorOf("{{eq .S 1}}", data),
            "template: t:1:2: executing \"t\" at <eq .S 1>: error calling eq: incompatible types "
            "for comparison");
}

TEST(TemplateTest, DeepNestingIsRefusedNotOverflowed) {
  std::string parens = "{{" + std::string(100000, '(') + "1" + std::string(100000, ')') + "}}";
  EXPECT_EQ(ErrorOf(parens), "template: t:1: template nested too deeply");
  std::string ifs;
  for (int i = 0; i < 5000; ++i) ifs += "{{if .A}}";
  EXPECT_EQ(ErrorOf(ifs, Value(Value::Map{{"A", true}})), "template: t:1: template nested too deeply");
  // 50 levels are fine.
  EXPECT_EQ(MustRender("{{" + std::string(50, '(') + "1" + std::string(50, ')') + "}}", Value()), "1");
}

Value ManyResources(int n) {
  Value::List resources;
  for (int i = 0; i < n; ++i) {
    resources.push_back(Value(Value::Map{{"Name", "r" + std::to_string(i)}}));
  }
  return Value(Value::Map{{"Resources", std::move(resources)}});
}

// A nested range over a big list would take 10^12 iterations; it stops at the cap with a clear
// error instead of hanging.
TEST(TemplateTest, RangeIterationsAreCappedAcrossTheExecution) {
  const Value data = ManyResources(10000);
  const std::string nested =
      "{{range .Resources}}{{range $.Resources}}{{range $.Resources}}x{{end}}{{end}}{{end}}";
  auto out = Render("group", nested, data);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(out.status().message(),
            "template: group:1:41: executing \"group\" at <range $.Resources>: range iterations "
            "exceed the limit of 100000");
  // The cap is per execution, not per range: two sequential ranges share it.
  Limits limits;
  limits.max_iterations = 15000;
  EXPECT_TRUE(Render("t", "{{range .Resources}}{{end}}", data, limits).ok());
  out = Render("t", "{{range .Resources}}{{end}}{{range .Resources}}{{end}}", data, limits);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("range iterations exceed the limit of 15000"),
            std::string::npos);
  // One range over every resource of a big window is well within the defaults.
  EXPECT_TRUE(Render("t", "{{range .Resources}}{{.Name}} {{end}}", data).ok());
}

TEST(TemplateTest, OutputAndBuiltStringsAreCapped) {
  Limits limits;
  limits.max_output_bytes = 4096;
  auto out =
      Render("t", "{{range .Resources}}{{printf \"%100d\" 1}}{{end}}", ManyResources(100), limits);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(out.status().message().find("output exceeds the limit of 4096 bytes"),
            std::string::npos)
      << out.status();
  // A string doubled in a loop counts although it is never written: 2^30 bytes are not built.
  out = Render("t", "{{$x := \"ab\"}}{{range .Resources}}{{$x = printf \"%s%s\" $x $x}}{{end}}",
               ManyResources(30));
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("output exceeds the limit of 1048576 bytes"),
            std::string::npos)
      << out.status();
  // A format of wide verbs stops as soon as it is too long.
  std::string wide, args;
  for (int i = 0; i < 20; ++i) wide += "%65536d", args += " 1";
  out = Render("t", "{{printf .F" + args + "}}", Value(Value::Map{{"F", wide}}));
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("output exceeds"), std::string::npos);
  limits.max_output_bytes = 5;
  EXPECT_EQ(*Render("t", "a{{\"bcd\"}}e", Value(), limits), "abcde");
  EXPECT_FALSE(Render("t", "a{{\"bcd\"}}ef", Value(), limits).ok());
}

TEST(TemplateTest, StepsAreCapped) {
  Limits limits;
  limits.max_steps = 50'000;
  // 1,000 iterations of a body with 100 actions: 100,000 steps.
  std::string body;
  for (int i = 0; i < 100; ++i) body += "{{$x := 1}}";
  auto out = Render("t", "{{range .Resources}}" + body + "{{end}}", ManyResources(1000), limits);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(out.status().message().find("evaluation steps exceed the limit of 50000"),
            std::string::npos)
      << out.status();
  EXPECT_TRUE(
      Render("t", "{{range .Resources}}" + body + "{{end}}", ManyResources(400), limits).ok());
  // Comparing long strings costs steps by their size: 1,000 comparisons of 128 KiB.
  limits.max_steps = 10'000;
  const Value big(Value::Map{{"S", std::string(64 << 10, 's')}, {"Resources", Value::List(1000)}});
  out = Render("t", "{{range .Resources}}{{if eq $.S $.S}}{{end}}{{end}}", big, limits);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("evaluation steps exceed"), std::string::npos);
  EXPECT_TRUE(Render("t", "{{range .Resources}}{{if eq 1 1}}{{end}}{{end}}", big, limits).ok());
}

TEST(TemplateTest, NestingLimitIsAnOption) {
  Limits limits;
  limits.max_nesting = 3;
  EXPECT_TRUE(Template::Parse("t", "{{if 1}}{{if 1}}{{(((1)))}}{{end}}{{end}}").ok());
  auto parsed = Template::Parse("t", "{{if 1}}{{if 1}}{{(((1)))}}{{end}}{{end}}", limits);
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().message(), "template: t:1: template nested too deeply");
  EXPECT_TRUE(Template::Parse("t", "{{if 1}}{{if 1}}{{(1)}}{{end}}{{end}}", limits).ok());
}

TEST(TemplateTest, ParsedTemplateIsReusable) {
  auto tmpl = Template::Parse("event", kEventTemplate);
  ASSERT_TRUE(tmpl.ok()) << tmpl.status();
  EXPECT_EQ(tmpl->name(), "event");
  for (const char* op : {"CREATE", "DELETE"}) {
    auto out = tmpl->Execute(Value(Value::Map{{"Operation", op}, {"APIVersion", "v1"},
                                              {"Resource", "configmaps"}, {"Name", "a"}}));
    ASSERT_TRUE(out.ok());
    EXPECT_EQ(*out, std::string("[") + op + "] v1/configmaps/a");
  }
  // No value prints Go's "<no value>"; a field of a non-map at the root is an error.
  EXPECT_EQ(MustRender("{{.}}", Value()), "<no value>");
  EXPECT_FALSE(Render("t", "{{.A}}", Value("str")).ok());
}

}  // namespace
}  // namespace reverser::gotemplate
