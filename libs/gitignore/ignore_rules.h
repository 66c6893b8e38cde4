#pragma once

// A GitTarget's `.gittargetignore`: gitignore syntax naming files under the target's path that
// reverser must never read or write (docs/behaviour.md, ".gittargetignore"). The file comes from
// the repository, so from anyone who can push: parsing is bounded, matching is linear in
// pattern × path length (no backtracking blow-up), and nothing here can crash on its content.
//
// Semantics are git's (gitignore(5)): blank lines and `#` comments are skipped; trailing spaces
// are dropped unless escaped; `!` re-includes; `\` escapes a leading `#` or `!` (and any
// character); a trailing `/` matches directories only; a pattern with a `/` before its end is
// anchored to the file's directory, one without matches a name at any depth; `*` and `?` never
// cross `/`; `[...]` is a class (`!` or `^` negates, ranges allowed); `**` as a whole segment
// crosses directories (`**/x`, `x/**`, `a/**/b`). The last matching pattern decides, and a
// path inside an ignored directory stays ignored (git cannot re-include it either).
//
// Patterns that would hide the whole tree, or every manifest, are refused: `*`, `**`, `/`, `/*`,
// `/**`, `**/*`, `*.yaml`, `*.yml` and their `**/` forms.

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace reverser::gitignore {

namespace internal {
// One element of a compiled pattern.
struct Token {
  enum class Kind {
    kLiteral,  // one character
    kAny,      // `?`: one character but `/`
    kStar,     // `*`: any run without `/`
    kClass,    // `[...]`: one character but `/`
    kDirs,     // `**/`: zero or more whole directories
    kAll,      // a trailing `/**` (or `**` alone): anything, `/` included
  };
  Kind kind = Kind::kLiteral;
  char c = 0;
  std::vector<std::pair<char, char>> ranges;  // kClass
  bool negated = false;                       // kClass
};

}  // namespace internal

struct IgnoreLimits {
  size_t max_bytes = 64 * 1024;
  size_t max_patterns = 1000;
  size_t max_pattern_length = 1024;
};

class IgnoreRules {
 public:
  // An empty rule set ignores nothing.
  IgnoreRules() = default;

  // InvalidArgument naming the first offending line (1-based): over a limit, a catastrophic
  // pattern, an unterminated `[` class, or a NUL byte.
  static absl::StatusOr<IgnoreRules> Parse(absl::string_view text, IgnoreLimits limits = {});

  // `path` is relative to the ignore file's directory, `/`-separated, without a leading `/`;
  // `is_dir` says whether it names a directory. A path is ignored when it, or any directory
  // above it, is.
  bool Ignored(absl::string_view path, bool is_dir = false) const;

  size_t size() const { return patterns_.size(); }

 private:
  struct Pattern {
    std::string glob;  // as written, without `!`, a trailing `/` and a leading `/`
    std::vector<internal::Token> tokens;
    bool negated = false;
    bool dir_only = false;
    bool anchored = false;  // matched against the whole path, else against each name
    int line = 0;
  };
  // The decision for exactly this path (not its parents): +1 ignored, -1 re-included, 0 none.
  int Decide(absl::string_view path, absl::string_view name, bool is_dir) const;

  std::vector<Pattern> patterns_;
};

// Glob matching as gitignore does it, exposed for tests: `*`/`?`/classes never match `/`; a
// `**` segment matches any number of directories. `O(|glob| * |text|)`.
bool GlobMatches(absl::string_view glob, absl::string_view text);

}  // namespace reverser::gitignore
