#pragma once

// Parses YAML manifests into JSON with the meaning go-yaml v2 (sigs.k8s.io/yaml) gives them, so
// everything RenderManifest/MarshalYaml write reads back to the identical JSON, and hand-written
// files read the way gitops-reverser and kubectl read them:
//   plain scalars resolve as YAML 1.1 — null/~/empty → null; true/yes/on/y… → true;
//   false/no/off/n… → false; 42, 0x2A, 0o52, 052 (octal), 1_000 → integers; 1.5, .5, 1e3 →
//   floats; timestamps stay strings (as go-yaml returns them); everything else is a string;
//   quoted and block scalars are always strings;
//   plain map keys that resolve to numbers or booleans become their string form ("yes" → "true").
// Refused with InvalidArgument and a line:column: syntax errors, duplicate keys, merge keys
// (`<<`), null or collection keys, .inf/.nan (no JSON equivalent), custom tags.
// Refused with ResourceExhausted and a line:column: input beyond YamlReadLimits — counted over
// the whole text, not per document, so a stream of small alias-bomb documents cannot add up.
// Invalid UTF-8 inside strings becomes U+FFFD. Parsing uses libyaml (see yaml_reader.cc for why
// not yaml-cpp).

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace reverser::manifest {

// Bounds on what one text (a whole file, every document of it together) may expand to. The
// defaults fit hand-written manifests and Helm output of several MiB.
struct YamlReadLimits {
  // Nodes (scalars, sequences, mappings), an alias counting every node it expands to.
  size_t max_nodes = 1'000'000;
  // Nodes copied in by aliases: real manifests seldom use aliases at all.
  size_t max_alias_nodes = 100'000;
  // Nesting depth of any value, aliases expanded (0 is the document root).
  int max_depth = 512;
};

// Exactly one document (a leading `---` is fine); an empty stream is an error.
absl::StatusOr<nlohmann::json> ParseYaml(absl::string_view text, const YamlReadLimits& limits = {});

// Every document of a `---`-separated stream, in order (an empty document is null).
absl::StatusOr<std::vector<nlohmann::json>> ParseYamlDocuments(absl::string_view text,
                                                               const YamlReadLimits& limits = {});

}  // namespace reverser::manifest
