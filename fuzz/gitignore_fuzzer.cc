// A `.gittargetignore` comes from whoever can push to the repository. Parsing any bytes either
// refuses them or yields rules; matching any path against them terminates, and the refusal of
// catastrophic patterns holds: accepted rules never hide every manifest.
//
// Input: the ignore file, then (after a line `---`) paths to match, one per line.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "fuzz/fuzz_check.h"
#include "libs/gitignore/ignore_rules.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace reverser;
  const absl::string_view text = fuzz::AsText(data, size);
  const size_t split = text.find("\n---\n");
  const absl::string_view file = text.substr(0, split);
  auto rules = gitignore::IgnoreRules::Parse(file);
  if (!rules.ok()) return 0;
  // Whatever was accepted leaves some manifest readable.
  FUZZ_CHECK(!rules->Ignored("a.yaml") || !rules->Ignored("Zq-9.yaml") ||
             !rules->Ignored("d/e/_f.yaml"));
  if (split == absl::string_view::npos) return 0;
  for (absl::string_view path : absl::StrSplit(text.substr(split + 5), '\n')) {
    rules->Ignored(path, false);
    rules->Ignored(path, true);
    gitignore::GlobMatches(file.substr(0, file.find('\n')), path);
  }
  return 0;
}
