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
//
// ParseYamlNodes reads the same way under the same limits but resolves nothing: it returns the
// nodes as written (mapping order, scalar text, style and tag), for readers with another schema
// (SOPS files use yaml.v3's typing, kube-sim YAML 1.2's, kubeconfig takes scalars as text).

#include <optional>
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

// Which limit refused a text (a ResourceExhausted status from these readers), if any.
enum class YamlLimit { kNodes, kAliasNodes, kDepth };
std::optional<YamlLimit> ExceededYamlLimit(const absl::Status& status);

// Exactly one document (a leading `---` is fine); an empty stream is an error.
absl::StatusOr<nlohmann::json> ParseYaml(absl::string_view text, const YamlReadLimits& limits = {});

// Every document of a `---`-separated stream, in order (an empty document is null).
absl::StatusOr<std::vector<nlohmann::json>> ParseYamlDocuments(absl::string_view text,
                                                               const YamlReadLimits& limits = {});

// One node as written. Aliases are expanded (and counted against the limits like any copy);
// anchors, comments and document markers are dropped.
struct YamlNode {
  enum class Kind { kScalar, kSequence, kMapping };
  enum class Style { kPlain, kSingleQuoted, kDoubleQuoted, kLiteral, kFolded };
  struct Entry;

  Kind kind = Kind::kScalar;
  // Scalars only: how the text was written, and the text with escapes and folding applied.
  Style style = Style::kPlain;
  std::string value;
  // The resolved tag: empty when none is written, "!" for the non-specific tag, the full form
  // for shorthands (`!!str` is "tag:yaml.org,2002:str").
  std::string tag;
  std::vector<YamlNode> items;  // a sequence's items
  std::vector<Entry> entries;   // a mapping's entries, in document order (duplicates kept)
  int line = 0;                 // where the node starts, from 1
  int column = 0;

  bool is_scalar() const { return kind == Kind::kScalar; }
  bool is_sequence() const { return kind == Kind::kSequence; }
  bool is_mapping() const { return kind == Kind::kMapping; }
  // A plain scalar without a tag: the only kind a schema resolves (to null, numbers, ...).
  bool is_untagged_plain() const {
    return kind == Kind::kScalar && style == Style::kPlain && tag.empty();
  }
  // A mapping's value under the first scalar key whose text is `key`; nullptr if none.
  const YamlNode* Find(absl::string_view key) const;
};

struct YamlNode::Entry {
  YamlNode key;
  YamlNode value;
};

// Every document of the stream as written, in order (an empty document is an empty plain
// scalar). Refused with InvalidArgument for syntax errors and unknown anchors, ResourceExhausted
// beyond `limits`.
absl::StatusOr<std::vector<YamlNode>> ParseYamlNodes(absl::string_view text,
                                                     const YamlReadLimits& limits = {});

}  // namespace reverser::manifest
