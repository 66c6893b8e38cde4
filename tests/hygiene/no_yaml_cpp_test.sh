#!/usr/bin/env bash
# Fails if yaml-cpp is used outside the allowlist. yaml-cpp 0.7 allocates without bound on some
# malformed input (20 bytes grew to 7 GB in a minute), so YAML from the cluster, Git or the
# network is read with libs/manifest/yaml_reader.h (libyaml, with node, alias and depth limits):
# ParseYaml for the meaning sigs.k8s.io/yaml gives it, ParseYamlNodes for the nodes as written.
set -euo pipefail

# The repository root, behind the runfiles symlink of this script.
self="$(readlink -f "${BASH_SOURCE[0]}")"
root="$(cd "$(dirname "$self")/../.." && pwd)"

# Files allowed to use it (paths from the root, one per line): tests reading the repository's
# own files only.
allowlist=(
  deploy/crds/BUILD.bazel
  deploy/crds/crds_test.cc
)

# In sources and BUILD files (the docs may name it).
pattern='#[[:space:]]*include[[:space:]]*[<"]yaml-cpp/|YAML::(Load|Node|Parser)|third_party:yaml_cpp"'

cd "$root"
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  # Tracked and untracked files, minus what .gitignore excludes (bazel-* outputs).
  hits="$(git grep --untracked -nIE "$pattern" -- '*.cc' '*.h' '*.bazel' '*.bzl' || true)"
else
  hits="$(grep -rnIE --exclude-dir='bazel-*' --exclude-dir=.git --include='*.cc' --include='*.h' \
    --include='*.bazel' --include='*.bzl' "$pattern" . || true)"
fi

for allowed in "${allowlist[@]+"${allowlist[@]}"}"; do
  hits="$(printf '%s\n' "$hits" | grep -v "^\(\./\)\?$allowed:" || true)"
done

if [ -n "$hits" ]; then
  echo "yaml-cpp is not allowed (unbounded allocation on malformed input); use"
  echo "libs/manifest/yaml_reader.h (ParseYaml or ParseYamlNodes):"
  printf '%s\n' "$hits"
  exit 1
fi
echo "no yaml-cpp use outside the allowlist"
