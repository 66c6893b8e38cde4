#pragma once

// The YAML side of SOPS: reading a file with the scalar typing of gopkg.in/yaml.v3 (which decides
// the bytes sops hashes into its MAC), and writing one the way `sops --encrypt` lays it out
// (yaml.v3, indent 4, sequences indented under their key, `|` blocks for multi-line strings).
//
// Trees are nlohmann::ordered_json: mapping order is document order, which is the MAC order.
// Leaves are strings, int64 integers, doubles, booleans and nulls.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "libs/manifest/yaml_reader.h"
#include "nlohmann/json.hpp"

namespace reverser::sops {

using Tree = nlohmann::ordered_json;

// The deepest nesting read or written (the top-level mapping is depth 0). The tree code here
// recurses once per level, so deeper input is refused before any recursion.
inline constexpr int kMaxNestingDepth = 512;

// Whether no value in `value` lies deeper than `max_depth`; iterative, so any depth is safe.
// Works on nlohmann::json and Tree alike.
template <typename JsonLike>
bool NestingDepthWithin(const JsonLike& value, int max_depth = kMaxNestingDepth) {
  std::vector<std::pair<const JsonLike*, int>> pending = {{&value, 0}};
  while (!pending.empty()) {
    const auto [node, depth] = pending.back();
    pending.pop_back();
    if (depth > max_depth) return false;
    if (node->is_object() || node->is_array()) {
      for (const auto& child : *node) pending.emplace_back(&child, depth + 1);
    }
  }
  return true;
}

// What yaml.v3 makes of an untagged plain scalar (resolve.go).
enum class PlainKind { kString, kNull, kBool, kInt, kUint, kFloat, kTimestamp, kMerge };
struct PlainScalar {
  PlainKind kind = PlainKind::kString;
  bool bool_value = false;
  int64_t int_value = 0;
  double float_value = 0;
};
PlainScalar ResolvePlain(absl::string_view plain);

// Parses one YAML document into a Tree with yaml.v3 typing, reading with libs/manifest's libyaml
// reader under `limits` (nodes and alias copies over the whole text; depth at most
// kMaxNestingDepth). Refused with InvalidArgument (or Unimplemented for valid YAML sops cannot
// hash): several documents, non-mapping top level, non-string or duplicate keys, timestamps and
// integers beyond int64 (sops <= 3.9 cannot walk them), merge keys, custom scalar tags; with
// ResourceExhausted beyond the limits (manifest::ExceededYamlLimit says which).
// Comments are dropped (sops never puts them in the MAC).
absl::StatusOr<Tree> ParseSopsYaml(absl::string_view text,
                                   const manifest::YamlReadLimits& limits = {});

// Emits a mapping as sops does: 4-space indentation, sequences indented under their key. A string
// is written plain only when both yaml.v3 (sops) and YAML 1.1 readers (kubectl, Flux) would read
// it back as the same string; otherwise double-quoted. Strings ending in exactly one newline are
// `|` blocks. InvalidArgument if the top level is not a mapping, a string is not UTF-8 or the
// nesting is deeper than kMaxNestingDepth.
absl::StatusOr<std::string> EmitSopsYaml(const Tree& document);

}  // namespace reverser::sops
