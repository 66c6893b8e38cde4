// The YAML reader (libs/manifest) reads every `*.yaml` under a GitTarget's path: anyone who can
// push to the repository chooses these bytes. Every input parses or is refused with a Status;
// whatever parses is written back by the manifest writer, and the written text reads back to
// the same value (what the gitworker writes, it must read again).

#include <cstdint>
#include <string>
#include <vector>

#include "fuzz/fuzz_check.h"
#include "libs/manifest/yaml_reader.h"
#include "libs/manifest/yaml_writer.h"
#include "nlohmann/json.hpp"

namespace reverser::fuzz {
namespace {

void CheckRoundTrip(const nlohmann::json& document) {
  auto yaml = manifest::MarshalYaml(document);
  if (!yaml.ok()) return;  // e.g. a string that is not UTF-8 cannot be written
  auto again = manifest::ParseYaml(*yaml);
  FUZZ_CHECK(again.ok());
  FUZZ_CHECK(*again == document);
  if (document.is_object()) {
    // A manifest (apiVersion and kind strings) renders the way new files are written.
    if (auto file = manifest::RenderManifest(document); file.ok()) {
      FUZZ_CHECK(manifest::ParseYaml(*file).ok());
    }
  }
}

}  // namespace
}  // namespace reverser::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace reverser;
  const absl::string_view text = fuzz::AsText(data, size);
  auto documents = manifest::ParseYamlDocuments(text);
  if (documents.ok()) {
    for (const nlohmann::json& document : *documents) fuzz::CheckRoundTrip(document);
  }
  // The one-document reader agrees with the stream reader.
  if (auto single = manifest::ParseYaml(text); single.ok()) {
    FUZZ_CHECK(documents.ok() && documents->size() == 1);
    FUZZ_CHECK(documents->front() == *single);
  }
  return 0;
}
