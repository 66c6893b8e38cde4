// Compares reverser's CRDs structurally with gitops-reverser v0.36.0's (the facts in
// testdata/reference-v0.36.0-facts.json, provenance in testdata/SOURCES.md): names, scope,
// version, subresources, printer columns and, per schema path, every keyword but the
// descriptions. Both directions count: a path only one side has is a difference.

#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "libs/manifest/yaml_reader.h"
#include "nlohmann/json.hpp"

namespace reverser {
namespace {

using nlohmann::json;

constexpr char kReferenceFacts[] = "deploy/crds/testdata/reference-v0.36.0-facts.json";

// Deliberate differences from the reference, each "<Kind> <what>" with the reason. Drop-in
// compatibility means this stays empty; an entry no difference uses fails the test.
const std::map<std::string, std::string> kAllowedDifferences = {};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

json StripDescriptions(const json& value) {
  if (value.is_object()) {
    json out = json::object();
    for (const auto& [key, child] : value.items()) {
      if (key != "description") out[key] = StripDescriptions(child);
    }
    return out;
  }
  if (value.is_array()) {
    json out = json::array();
    for (const auto& child : value) out.push_back(StripDescriptions(child));
    return out;
  }
  return value;
}

// The facts of every node: its keywords except descriptions and the child-bearing ones, which
// become paths of their own (".field", "[]" for items, "{*}" for additionalProperties).
void CollectFacts(const json& node, const std::string& path, std::map<std::string, json>& out) {
  json facts = json::object();
  for (const auto& [key, value] : node.items()) {
    if (key == "description" || key == "properties" || key == "items" ||
        key == "additionalProperties") {
      continue;
    }
    facts[key] = StripDescriptions(value);
  }
  out[path] = facts;
  const std::string base = path == "/" ? "" : path;
  if (node.contains("properties") && node["properties"].is_object()) {
    for (const auto& [name, child] : node["properties"].items()) {
      CollectFacts(child, base + "." + name, out);
    }
  }
  if (node.contains("items") && node["items"].is_object()) {
    CollectFacts(node["items"], base + "[]", out);
  }
  if (node.contains("additionalProperties") && node["additionalProperties"].is_object()) {
    CollectFacts(node["additionalProperties"], base + "{*}", out);
  }
}

// The reference's shape for one CRD, from our YAML.
json DescribeCrd(const json& crd) {
  const json& spec = crd["spec"];
  const json& version = spec["versions"][0];
  std::map<std::string, json> facts;
  CollectFacts(version["schema"]["openAPIV3Schema"], "/", facts);
  json schema = json::object();
  for (const auto& [path, value] : facts) schema[path] = value;
  return {{"name", crd["metadata"]["name"]},
          {"group", spec["group"]},
          {"scope", spec["scope"]},
          {"names", spec["names"]},
          {"version", version["name"]},
          {"served", version["served"]},
          {"storage", version["storage"]},
          {"subresources", version.value("subresources", json::object())},
          {"printerColumns", version.value("additionalPrinterColumns", json::array())},
          {"schema", schema}};
}

// Readable differences, "<Kind> <what>: ..." one per line.
std::vector<std::pair<std::string, std::string>> Differences(const std::string& kind,
                                                             const json& ours,
                                                             const json& reference) {
  std::vector<std::pair<std::string, std::string>> out;
  auto add = [&](const std::string& what, const std::string& detail) {
    out.emplace_back(absl::StrCat(kind, " ", what), detail);
  };
  for (const char* field :
       {"name", "group", "scope", "names", "version", "served", "storage", "subresources"}) {
    if (ours.value(field, json()) != reference.value(field, json())) {
      add(field, absl::StrCat("ours ", ours.value(field, json()).dump(), ", reference ",
                              reference.value(field, json()).dump()));
    }
  }
  const json& our_columns = ours["printerColumns"];
  const json& ref_columns = reference["printerColumns"];
  for (size_t i = 0; i < std::max(our_columns.size(), ref_columns.size()); ++i) {
    json mine = i < our_columns.size() ? our_columns[i] : json();
    json theirs = i < ref_columns.size() ? ref_columns[i] : json();
    if (mine != theirs) {
      add(absl::StrCat("printer column ", i),
          absl::StrCat("ours ", mine.dump(), ", reference ", theirs.dump()));
    }
  }
  const json& our_schema = ours["schema"];
  const json& ref_schema = reference["schema"];
  std::set<std::string> paths;
  for (const auto& [path, unused] : our_schema.items()) paths.insert(path);
  for (const auto& [path, unused] : ref_schema.items()) paths.insert(path);
  for (const std::string& path : paths) {
    if (!ref_schema.contains(path)) {
      add(path, absl::StrCat("only in ours: ", our_schema[path].dump()));
    } else if (!our_schema.contains(path)) {
      add(path, absl::StrCat("missing in ours; reference ", ref_schema[path].dump()));
    } else if (our_schema[path] != ref_schema[path]) {
      add(path,
          absl::StrCat("ours ", our_schema[path].dump(), ", reference ", ref_schema[path].dump()));
    }
  }
  return out;
}

const std::vector<std::string> kPlurals = {"clusterwatchrules", "commitrequests", "gitproviders",
                                           "gittargets", "watchrules"};

TEST(CrdsReferenceTest, EveryCrdMatchesTheReferenceFacts) {
  json reference = json::parse(ReadFile(kReferenceFacts), nullptr, false);
  ASSERT_TRUE(reference.is_object()) << "cannot read " << kReferenceFacts;
  ASSERT_EQ(reference.size(), kPlurals.size());

  std::set<std::string> kinds_seen;
  std::vector<std::string> unexpected;
  std::set<std::string> allowed_used;
  for (const std::string& plural : kPlurals) {
    const std::string path = absl::StrCat("deploy/crds/configbutler.ai_", plural, ".yaml");
    auto crd = manifest::ParseYaml(ReadFile(path));
    ASSERT_TRUE(crd.ok()) << path << ": " << crd.status();
    const std::string kind = (*crd)["spec"]["names"].value("kind", "");
    kinds_seen.insert(kind);
    ASSERT_TRUE(reference.contains(kind)) << kind << " is not in the reference";
    for (const auto& [what, detail] : Differences(kind, DescribeCrd(*crd), reference[kind])) {
      if (kAllowedDifferences.count(what)) {
        allowed_used.insert(what);
        continue;
      }
      unexpected.push_back(absl::StrCat(what, ": ", detail));
    }
  }
  EXPECT_EQ(kinds_seen.size(), reference.size());
  EXPECT_TRUE(unexpected.empty()) << unexpected.size() << " difference(s) from the reference:\n"
                                  << absl::StrJoin(unexpected, "\n");
  for (const auto& [what, reason] : kAllowedDifferences) {
    EXPECT_TRUE(allowed_used.count(what)) << "allowed difference no longer occurs: " << what;
  }
}

// The comparison itself finds what it must: a changed, a missing and an extra keyword or path.
TEST(CrdsReferenceTest, DifferencesAreReportedBothWays) {
  json reference = json::parse(ReadFile(kReferenceFacts), nullptr, false);
  ASSERT_TRUE(reference.is_object());
  auto crd = manifest::ParseYaml(ReadFile("deploy/crds/configbutler.ai_watchrules.yaml"));
  ASSERT_TRUE(crd.ok()) << crd.status();
  json& schema = (*crd)["spec"]["versions"][0]["schema"]["openAPIV3Schema"];
  json& target_ref = schema["properties"]["spec"]["properties"]["targetRef"];
  target_ref["properties"]["group"].erase("enum");
  target_ref["properties"]["extra"] = {{"type", "string"}};
  target_ref["properties"].erase("kind");
  (*crd)["spec"]["versions"][0]["additionalPrinterColumns"][4]["priority"] = 0;
  // A description never counts.
  target_ref["description"] = "changed";

  std::map<std::string, std::string> found;
  for (const auto& [what, detail] :
       Differences("WatchRule", DescribeCrd(*crd), reference["WatchRule"])) {
    found[what] = detail;
  }
  EXPECT_EQ(found.size(), 4u) << absl::StrJoin(found, "\n", absl::PairFormatter(": "));
  EXPECT_EQ(found["WatchRule .spec.targetRef.group"],
            "ours {\"default\":\"configbutler.ai\",\"type\":\"string\"}, reference "
            "{\"default\":\"configbutler.ai\",\"enum\":[\"configbutler.ai\"],\"type\":\"string\"}");
  EXPECT_EQ(found["WatchRule .spec.targetRef.extra"], "only in ours: {\"type\":\"string\"}");
  EXPECT_TRUE(found["WatchRule .spec.targetRef.kind"].rfind("missing in ours", 0) == 0)
      << found["WatchRule .spec.targetRef.kind"];
  EXPECT_TRUE(found.count("WatchRule printer column 4"));
}

}  // namespace
}  // namespace reverser
