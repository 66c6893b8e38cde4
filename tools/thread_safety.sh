#!/usr/bin/env bash
# Clang's thread-safety analysis (-Wthread-safety) over every source whose locks are annotated
# (ABSL_GUARDED_BY and friends on absl::Mutex, docs/conventions.md): each translation unit is
# checked with `clang++-14 -fsyntax-only`, one result per file, one clang per core. Nothing is
# compiled to objects (each unit costs a few seconds of parsing, not a second build); it needs
# the generated protocol headers of a Bazel build (bazel-bin), which tools/test.sh has made by
# then.
#
# Usage: tools/thread_safety.sh [--junit FILE]
set -uo pipefail
cd "$(dirname "$0")/.."

junit=
while [ $# -gt 0 ]; do
  case $1 in
    --junit) junit=$2; shift 2 ;;
    *) echo "usage: $0 [--junit FILE]" >&2; exit 2 ;;
  esac
done

clang=$(command -v clang++-14 || true)
bin=$( [ -e bazel-bin ] && readlink -f bazel-bin || bazel info bazel-bin 2>/dev/null)
rows=()
if [ -z "$clang" ] || [ ! -d "$bin/proto" ]; then
  why="needs clang++-14 and a Bazel build's generated headers (bazel-bin/proto)"
  echo "thread-safety: FAIL ($why)"
  rows+=(setup FAIL "$why" "")
else
  # The annotated units: sources that carry an annotation or include a header that does.
  mapfile -t headers < <(git ls-files 'libs/*.h' 'services/*.h' 'tools/*.h' | xargs grep -l 'ABSL_GUARDED_BY' 2>/dev/null)
  mapfile -t units < <(
    { git ls-files 'libs/*.cc' 'services/*.cc' 'tools/*.cc' | xargs grep -l 'ABSL_GUARDED_BY' 2>/dev/null
      for h in "${headers[@]}"; do
        git ls-files 'libs/*.cc' 'services/*.cc' 'tools/*.cc' | xargs grep -l "#include \"$h\"" 2>/dev/null
      done; } | grep -v '_test\.cc$' | sort -u)
  work=$(mktemp -d "${TMPDIR:-/tmp}/reverser-tsa.XXXXXX")
  log_of() { echo "$work/$(echo "$1" | tr / _).log"; }
  # One clang per core: each unit is independent, and the parse is the whole cost.
  check_unit() {  # unit log
    # The defines third_party/BUILD.bazel gives cpp-httplib (its class layouts depend on them).
    "$clang" -fsyntax-only -std=c++20 -Wthread-safety -Werror=thread-safety \
      -Wno-unknown-warning-option -DCPPHTTPLIB_OPENSSL_SUPPORT -DCPPHTTPLIB_ZLIB_SUPPORT \
      -DCPPHTTPLIB_BROTLI_SUPPORT -I. -I"$bin" "$1" >"$2" 2>&1
    echo $? >"$2.rc"
  }
  export -f check_unit
  export clang bin
  for unit in "${units[@]}"; do printf '%s\0%s\0' "$unit" "$(log_of "$unit")"; done |
    xargs -0 -n 2 -P "$(nproc)" bash -c 'check_unit "$0" "$1"'
  failed=0
  for unit in "${units[@]}"; do
    log=$(log_of "$unit")
    if [ "$(cat "$log.rc" 2>/dev/null)" = 0 ]; then
      rows+=("$unit" PASS "" "$log")
    else
      failed=$((failed + 1))
      echo "thread-safety: FAIL $unit" >&2
      grep -E 'error|warning' "$log" | head -5 >&2
      rows+=("$unit" FAIL "$(grep -m1 -E 'error' "$log" | cut -c1-300)" "$log")
    fi
  done
  echo "thread-safety: ${#units[@]} annotated source(s), $failed with findings"
fi

[ -n "$junit" ] && python3 tools/ci/junit.py "$junit" thread_safety "${rows[@]}"
for ((i = 1; i < ${#rows[@]}; i += 4)); do [ "${rows[$i]}" = PASS ] || exit 1; done
exit 0
