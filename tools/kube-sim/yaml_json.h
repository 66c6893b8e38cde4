#pragma once

// JSON and YAML → JSON for request bodies (application/json, application/yaml,
// apply-patch+yaml) and config files.

#include <string>

#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "tools/kube-sim/api_error.h"

namespace reverser::kubesim {

// The deepest JSON body kube-sim takes. kube-apiserver's decoder allows 10000 levels
// (encoding/json's maxNestingDepth), but kube-sim's handlers copy and walk objects recursively,
// about 15 frames a level in a fastbuild: 10000 levels overflow a worker thread's 8 MiB stack.
inline constexpr int kMaxJsonDepth = 2000;

// Whether the brackets of `text` nest at most `max_depth` deep (string contents skipped). A
// linear scan, meant to run before parsing; it does not validate the JSON.
bool JsonNestingWithin(absl::string_view text, int max_depth = kMaxJsonDepth);

// Json::parse without exceptions, refusing (a discarded value) nesting beyond kMaxJsonDepth.
Json ParseJson(const std::string& text);

// Why `text` is not acceptable JSON: the parser's message, or the depth limit.
std::string JsonParseError(const std::string& text);

// Parses a JSON or YAML document (JSON is tried first). Plain scalars become numbers/bools/null
// as YAML 1.2's core schema says; quoted scalars stay strings; of several documents the first
// counts. Malformed YAML, nesting beyond 1000 levels, unknown anchors and alias expansion far
// beyond the text's size are 400s.
ApiOr<Json> ParseYamlOrJson(const std::string& text);

}  // namespace reverser::kubesim
