#pragma once

// A subset of CEL (the Common Expression Language) for CRD validation rules
// (x-kubernetes-validations), evaluated over JSON values as kube-apiserver binds them: `self` is
// the value at the rule's schema node, `oldSelf` the stored value there (transition rules).
//
// Supported: literals (int, uint, double, string with escapes and raw strings, bytes-free),
// `true`/`false`/`null`, list literals; field selection `a.b` and indexing `a[i]`, `m['k']`;
// `!`, unary `-`, `* / %`, `+ -` (numbers, string and list concatenation), comparisons
// `== != < <= > >=`, `in`, `&& ||` (CEL's commutative error absorption), `?:`; `has(a.b)`,
// `size(x)` / `x.size()`, `x.startsWith()`, `endsWith()`, `contains()`, `matches()` (RE2),
// and the macros `all`, `exists`, `exists_one` over lists (elements) and maps (keys).
// Anything else is a compile error naming the construct, so an unsupported rule is refused when
// the CRD is created rather than silently passing.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace reverser::kubesim::cel {

using Json = nlohmann::json;

struct Node;

// Unicode code points of UTF-8 text (CEL's size() of a string, OpenAPI's string length).
int64_t CodePointCount(absl::string_view text);

class Program {
 public:
  // Parses `source`. The error text follows cel-go's ("ERROR: <input>:1:5: Syntax error: ...").
  static absl::StatusOr<std::shared_ptr<const Program>> Compile(absl::string_view source);
  ~Program();

  // Whether the rule reads `oldSelf` (a transition rule: evaluated only on updates where the
  // stored object has a value at the rule's node).
  bool uses_old_self() const { return uses_old_self_; }

  // The rule's value with `self` (and `oldSelf`, null when absent) bound. Runtime errors carry
  // cel-go's texts: "no such key: x", "no such overload", "index out of bounds: 3", ...
  absl::StatusOr<Json> Evaluate(const Json& self, const Json* old_self) const;

 private:
  Program() = default;
  std::unique_ptr<Node> root_;
  bool uses_old_self_ = false;
};

}  // namespace reverser::kubesim::cel
