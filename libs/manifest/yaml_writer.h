#pragma once

// Renders objects as YAML the way gitops-reverser v0.36.0 writes new files
// (`sanitize.MarshalToOrderedYAML`, sigs.k8s.io/yaml over go-yaml v2): two-space indentation,
// sequences not indented under their key, lines folded at 80 columns, strings quoted only when
// a plain scalar would change meaning ("true", "0123", "", "2020-01-01", "a: b", ...),
// multi-line strings as `|` block literals, empty maps/lists as `{}` / `[]`.

#include <string>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace reverser::manifest {

// sigs.k8s.io/yaml.Marshal of a JSON value: every map in go-yaml's key order.
absl::StatusOr<std::string> MarshalYaml(const nlohmann::json& value);

enum class MetadataOrder {
  // annotations, labels, name, namespace — what v0.36.0 emits (its metadata is a Go map, which
  // go-yaml sorts): new files are byte-identical to the reference's, so a mirror taken over
  // from it is not rewritten.
  kSorted,
  // name, namespace, labels, annotations — the order the reference's documentation claims
  // (docs/behaviour.md, Known traps).
  kIdentityFirst,
};

struct RenderOptions {
  MetadataOrder metadata_order = MetadataOrder::kSorted;
};

// The ordered document for a sanitized object, as the reference's ordered marshal writes it:
// `apiVersion`, `kind`, `metadata` (only non-empty name/namespace/labels/annotations;
// `metadata: {}` when none), then every other top-level key except `status`, sorted. Nested
// maps are in go-yaml's key order. InvalidArgument if `object` is not a map with string
// `apiVersion` and `kind`, or metadata fields have the wrong type.
absl::StatusOr<std::string> RenderManifest(const nlohmann::json& object,
                                           const RenderOptions& options = {});

}  // namespace reverser::manifest
