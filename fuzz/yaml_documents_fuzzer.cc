// The byte-level document cut (libs/manifest/yaml_documents.h) is how the gitworker edits files
// people wrote: one document replaced, removed or appended, every other byte kept. Anyone who can
// push to the repository chooses the file. For every input, the cut gives the bytes back as they
// were. Where the gitworker would edit the file (it parses, and the cut sees the documents the
// parser saw: IdentityIndex::ReadDocuments' check), every edit gives a stream that parses to
// exactly the documents expected: the siblings with the values they had, the edited one as
// written, nothing lost.
//
// Input: byte 0 picks the edits (bit 0 replace, bit 1 remove, bit 2 append), byte 1 the
// documents they apply to; the rest is the file.

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "fuzz/fuzz_check.h"
#include "libs/manifest/yaml_documents.h"
#include "libs/manifest/yaml_reader.h"
#include "nlohmann/json.hpp"

namespace reverser::fuzz {
namespace {

constexpr char kReplacement[] = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: edited\n";
constexpr char kAppended[] = "apiVersion: v1\nkind: Secret\nmetadata:\n  name: appended\n";

// Whether the gitworker would edit this file (IdentityIndex::ReadDocuments): it parses, the cut
// finds as many documents, each empty where the parser read null, none a top-level scalar.
bool Editable(const manifest::YamlDocuments& cut, const std::vector<nlohmann::json>& documents) {
  if (cut.size() != documents.size()) return false;
  for (size_t i = 0; i < documents.size(); ++i) {
    const nlohmann::json& document = documents[i];
    if (cut.empty(i) != document.is_null()) return false;
    if (document.is_primitive() && !document.is_null()) return false;
  }
  return true;
}

}  // namespace
}  // namespace reverser::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace reverser;
  if (size < 2) return 0;
  const uint8_t edits = data[0];
  const uint8_t pick = data[1];
  const absl::string_view text = fuzz::AsText(data + 2, size - 2);

  manifest::YamlDocuments cut = manifest::YamlDocuments::Split(text);
  FUZZ_CHECK(cut.Text() == text);
  if (text.find('\0') != absl::string_view::npos) return 0;
  auto documents = manifest::ParseYamlDocuments(text);
  if (!documents.ok() || !fuzz::Editable(cut, *documents)) return 0;

  std::vector<std::optional<nlohmann::json>> expected(documents->begin(), documents->end());
  if ((edits & 1) && cut.size() > 0) {
    const size_t i = pick % cut.size();
    cut.Replace(i, fuzz::kReplacement);
    expected[i] = *manifest::ParseYaml(fuzz::kReplacement);
  }
  if ((edits & 2) && cut.size() > 0) {
    const size_t j = (pick / 16) % cut.size();
    cut.Remove(j);
    expected[j] = std::nullopt;
  }
  if (edits & 4) {
    cut.Append(fuzz::kAppended);
    expected.push_back(*manifest::ParseYaml(fuzz::kAppended));
  }

  std::vector<nlohmann::json> want;
  for (const auto& document : expected) {
    if (document.has_value()) want.push_back(*document);
  }
  const std::string edited = cut.Text();
  auto again = manifest::ParseYamlDocuments(edited);
  if (!again.ok()) {
    std::fprintf(stderr, "edited stream does not parse: %s\n--- edited:\n%s\n",
                 std::string(again.status().message()).c_str(), edited.c_str());
  }
  FUZZ_CHECK(again.ok());
  // A stream emptied of its documents reads as none or as one null document.
  if (want.empty() && again->size() == 1 && again->front().is_null()) return 0;
  if (*again != want) {
    std::fprintf(stderr, "--- edited:\n%s\n--- read: %s\n--- expected: %s\n", edited.c_str(),
                 nlohmann::json(*again).dump().c_str(), nlohmann::json(want).dump().c_str());
  }
  FUZZ_CHECK(*again == want);
  return 0;
}
