#!/usr/bin/env bash
# Fails if libstdc++'s <regex> is used anywhere in the repository. It backtracks and recurses
# once per character, so a long value from the cluster, Git or the network overflows the stack
# (a Secret of ~19 KB crashed the gitworker). Use RE2 (//third_party:re2) for patterns from
# configuration, or a small linear scanner for fixed formats (libs/sops/text_formats.h).
set -euo pipefail

# The repository root, behind the runfiles symlink of this script.
self="$(readlink -f "${BASH_SOURCE[0]}")"
root="$(cd "$(dirname "$self")/../.." && pwd)"
this_file="tests/hygiene/no_std_regex_test.sh"

# Files allowed to use it (paths from the root, one per line). Keep it empty.
allowlist=()

pattern='#[[:space:]]*include[[:space:]]*<regex>|std::(w?regex|w?[sc]regex_|regex_(match|search|replace)|w?[sc]match([^a-z_]|$))'

cd "$root"
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  # Tracked and untracked files, minus what .gitignore excludes (bazel-* outputs).
  hits="$(git grep --untracked -nIE "$pattern" -- . ":(exclude)$this_file" || true)"
else
  hits="$(grep -rnIE --exclude-dir='bazel-*' --exclude-dir=.git "$pattern" . |
    grep -v "^\./$this_file:" || true)"
fi

for allowed in "${allowlist[@]+"${allowlist[@]}"}"; do
  hits="$(printf '%s\n' "$hits" | grep -v "^\(\./\)\?$allowed:" || true)"
done

if [ -n "$hits" ]; then
  echo "libstdc++ <regex> is not allowed (stack overflow on long input); use RE2 or a scanner:"
  printf '%s\n' "$hits"
  exit 1
fi
echo "no <regex> use outside the allowlist"
