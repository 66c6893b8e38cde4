// Differential test: kubectl's YAML printer is sigs.k8s.io/yaml over go-yaml v2 — the same code
// path gitops-reverser writes files with — so for any object, MarshalYaml must reproduce
// `kubectl label --local -o yaml` byte for byte (the no-op label removal changes nothing except
// adding `labels: {}` when there were none, which the inputs are given up front).

#include <cstdio>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "libs/manifest/yaml_writer.h"
#include "nlohmann/json.hpp"

namespace reverser::manifest {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

bool HaveKubectl() { return std::system("command -v kubectl >/dev/null 2>&1") == 0; }

std::string KubectlYaml(const json& object) {
  const char* tmpdir = std::getenv("TEST_TMPDIR");
  const fs::path file = fs::path(tmpdir != nullptr ? tmpdir : "/tmp") / "oracle-input.json";
  // ASCII-only JSON: kubectl reads files through a YAML reader, which refuses raw control
  // characters (DEL and C1 included) even inside JSON strings.
  std::string text = object.dump(-1, ' ', /*ensure_ascii=*/true);
  for (size_t at; (at = text.find('\x7f')) != std::string::npos;) text.replace(at, 1, "\\u007f");
  std::ofstream(file) << text;
  const std::string command = "kubectl label --local --show-managed-fields -o yaml -f " + file.string() +
                              " reverser-oracle-noop- 2>&1";
  std::string out;
  if (FILE* pipe = popen(command.c_str(), "r")) {
    char buffer[4096];
    size_t n;
    while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) out.append(buffer, n);
    pclose(pipe);
  }
  return out;
}

// The captured objects carry placeholders (`<ts>`) where kubectl's typed metadata needs a time.
void ReplaceTimePlaceholders(json* value) {
  if (value->is_string() && *value == "<ts>") *value = "2026-06-25T00:00:00Z";
  if (value->is_structured()) {
    for (auto& item : *value) ReplaceTimePlaceholders(&item);
  }
}

json WithLabelsMap(json object) {
  ReplaceTimePlaceholders(&object);
  json& metadata = object["metadata"];
  if (!metadata.contains("labels")) metadata["labels"] = json::object();
  if (!metadata.contains("name")) metadata["name"] = "oracle";
  return object;
}

void ExpectSameAsKubectl(const json& input, const std::string& what) {
  const json object = WithLabelsMap(input);
  auto ours = MarshalYaml(object);
  ASSERT_TRUE(ours.ok()) << ours.status();
  EXPECT_EQ(*ours, KubectlYaml(object)) << what;
}

TEST(KubectlOracleTest, RealObjectsRenderIdentically) {
  if (!HaveKubectl()) GTEST_SKIP() << "kubectl not on PATH";
  int compared = 0;
  for (const fs::path& dir : {fs::path("libs/sanitize/testdata"),
                             fs::path("libs/sanitize/testdata/expected")}) {
    for (const auto& entry : fs::directory_iterator(dir)) {
      if (entry.path().extension() != ".json") continue;
      std::ifstream in(entry.path());
      std::stringstream text;
      text << in.rdbuf();
      ExpectSameAsKubectl(json::parse(text.str()), entry.path().string());
      ++compared;
    }
  }
  EXPECT_GE(compared, 38);
}

// Strings chosen to exercise every quoting and folding decision of the emitter. Left out on
// purpose, because Go gets them wrong: DEL (Go's json.Marshal keeps it raw and go-yaml refuses
// to read it back, so the marshal fails), NEL U+0085 (kept raw too, then folded into a space
// by go-yaml's double-quoted scalar rules) and U+2028/U+2029 (written raw inside single quotes,
// where a reader folds them). This writer escapes all of them instead.
TEST(KubectlOracleTest, TrickyScalarsRenderIdentically) {
  if (!HaveKubectl()) GTEST_SKIP() << "kubectl not on PATH";
  const std::vector<std::string> strings = {
      "", " ", "plain", "true", "True", "yes", "no", "on", "OFF", "y", "n", "null", "Null", "~",
      "0", "00", "0123", "08", "0x1F", "0o17", "0b101", "1_000", "-1", "+1", "1.5", ".5", "1e3",
      "1E-3", "-.inf", ".NaN", "1:20", "190:20:30.15", "2020-01-01", "2020-1-1", "2020-13-01",
      "2001-12-14t21:59:43.10-05:00", "2001-12-14 21:59:43.10", "12345678901234567890123",
      "-", "--", "---", "...", "- x", "? x", ": x", "a: b", "a:b", "a #b", "a#b", "#x", "*x",
      "&x", "!x", "%x", "@x", "`x", "'q'", "\"dq\"", "|", ">", "[x]", "{x}", "x,y", "x]",
      " leading", "trailing ", "tab\there", "bell\x07", "bom\xEF\xBB\xBFx",
      "héllo ✓ 😀", "line1\nline2", "line1\nline2\n", "line1\nline2\n\n",
      "\nleading newline", "  indented\nline\n", "trailing space \nx", "tab\tand\nnewline",
      "<<", "=", "a=b", "{{.Name}}", "https://example.com/a?b=c&d=e#f",
      std::string(200, 'x'),
      "word " + std::string(90, 'w') + " tail",
      "The quick brown fox jumps over the lazy dog and keeps running far beyond eighty columns "
      "of text so that it must fold somewhere sensible",
      "multi line with a very long first line that goes well beyond the eighty column limit "
      "of the emitter\nand a second line",
      "{\"apiVersion\":\"v1\",\"kind\":\"Service\",\"metadata\":{\"annotations\":{},\"name\":\"x\"}}\n",
  };
  json data = json::object();
  json list = json::array();
  for (size_t i = 0; i < strings.size(); ++i) {
    data["k" + std::to_string(i)] = strings[i];
    list.push_back(strings[i]);
  }
  json keys = json::object();
  for (const std::string& s : strings) {
    // Keys starting with a digit make go-yaml's key order non-transitive, and Go's output then
    // depends on its randomised map iteration; they are compared in the numbers test instead.
    // "<<" is quoted as a key on purpose (go-yaml writes a plain merge key it cannot re-read).
    if (s == "<<") continue;
    if (s.empty() || !std::isdigit(static_cast<unsigned char>(s[0]))) keys[s] = 1;
  }
  ExpectSameAsKubectl(
      json{{"apiVersion", "v1"}, {"kind", "ConfigMap"}, {"metadata", {{"name", "x"}}},
           {"data", data}, {"list", list}, {"keys", keys}},
      "tricky strings");
}

TEST(KubectlOracleTest, NumbersNestingAndKeyOrderRenderIdentically) {
  if (!HaveKubectl()) GTEST_SKIP() << "kubectl not on PATH";
  const json object = json::parse(R"({
    "apiVersion": "example.com/v1", "kind": "Thing", "metadata": {"name": "n"},
    "spec": {
      "ints": [0, -1, 42, 9223372036854775807, -9223372036854775808],
      "floats": [0.5, 1.0, -2.5, 1e6, 1000000.5, 123456789.0, 1e-5, 0.0001, 1e21, 1e20, 3.14159],
      "bools": [true, false], "nothing": null, "empty": {}, "none": [],
      "nested": [[1, [2, {}]], {"a": [{"b": {"c": []}}]}, [], {}],
      "keys": {"k10": 1, "k9": 2, "k09": 3, "_x": 4, "B": 5, "a": 6, "a1b": 7, "a01b": 8,
               "x.y": 9, "x-y": 10, "x/y": 11, "1": 12, "10": 13, "2": 14, "Z": 15, "ä": 16,
               "": 17, "a b": 18}
    }})");
  json with_long_key = object;
  // Keys over 128 characters cannot be simple keys; the emitter switches to `? key`.
  with_long_key["spec"]["long"][std::string(130, 'k')] = "v";
  ExpectSameAsKubectl(with_long_key, "numbers/nesting/keys");
}

}  // namespace
}  // namespace reverser::manifest
