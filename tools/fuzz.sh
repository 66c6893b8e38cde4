#!/usr/bin/env bash
# Builds the libFuzzer targets of //fuzz (clang-14, ASan + UBSan; see fuzz/README.md) and runs
# each from its seed corpus for a bounded number of inputs. Prints one line per fuzzer,
#   fuzz: PASS <target> (<runs> runs, <seconds> s)   or   fuzz: FAIL <target> (<why>) ...
# and exits non-zero if the build failed or any fuzzer found a crash, leak, timeout or OOM.
#
# Usage: tools/fuzz.sh [--runs N] [--time S] [--junit FILE] [--explore S | --crashes] [target...]
#   --runs N      inputs per fuzzer in the bounded run (default 8000; fixed seed, so a run is
#                 repeatable: the same binary and corpus find the same thing)
#   --time S      guard: stop a fuzzer after S seconds even if it has not done N runs (default 25)
#   --junit FILE  also write the results as JUnit XML (tools/test.sh counts them)
#   --explore S   explore instead: S seconds per fuzzer, random seed, corpus kept between runs in
#                 the output base; findings are kept and listed at the end
#   --crashes     run the known failing inputs of fuzz/crashes/<target>/ and say for each whether
#                 it still fails (exit 1) or is fixed (move it to fuzz/corpus/<target>/ then)
#   target        fuzzer names (default: all eight)
set -uo pipefail
cd "$(dirname "$0")/.."

runs=8000
guard=25
junit=
explore=
crashes=
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs=$2; shift 2 ;;
    --time) guard=$2; shift 2 ;;
    --junit) junit=$2; shift 2 ;;
    --explore) explore=$2; shift 2 ;;
    --crashes) crashes=1; shift ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    -*) echo "fuzz.sh: unknown option $1" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done

# Longest input each fuzzer tries. Large enough for real objects and for the inputs that break
# decoders (deep nesting, alias expansion, long scalars); small enough to keep runs fast.
declare -A max_len=(
  [audit_eventlist_fuzzer]=65536
  [watch_frame_fuzzer]=65536
  [yaml_reader_fuzzer]=16384
  [yaml_documents_fuzzer]=16384
  [sops_file_fuzzer]=16384
  [gotemplate_fuzzer]=4096
  [placement_fuzzer]=1024
  [gitignore_fuzzer]=4096
)
all=(audit_eventlist_fuzzer watch_frame_fuzzer yaml_reader_fuzzer yaml_documents_fuzzer
     sops_file_fuzzer gotemplate_fuzzer placement_fuzzer gitignore_fuzzer)
[ ${#targets[@]} -eq 0 ] && targets=("${all[@]}")
for t in "${targets[@]}"; do
  [ -n "${max_len[$t]:-}" ] || { echo "fuzz.sh: unknown fuzzer $t" >&2; exit 2; }
done

# The clang build lives in its own output base so it never reconfigures the normal (gcc) one.
workspace_id=$(pwd | md5sum | cut -c1-16)
output_base=${REVERSER_FUZZ_OUTPUT_BASE:-${XDG_CACHE_HOME:-$HOME/.cache}/reverser-fuzz/$workspace_id}
mkdir -p "$output_base"
fuzz_bazel() { bazel --output_base="$output_base" "$@"; }
cleanup() { fuzz_bazel shutdown >/dev/null 2>&1 || true; }
trap cleanup EXIT

work=$(mktemp -d "${TMPDIR:-/tmp}/reverser-fuzz.XXXXXX")
declare -A verdict reason summary log_of

write_junit() {
  [ -n "$junit" ] || return 0
  python3 tools/ci/junit.py "$junit" fuzz "$@"
}

build_log=$work/build.log
echo "fuzz: building ${#targets[@]} fuzzer(s) with clang-14 (output base $output_base)" >&2
labels=()
for t in "${targets[@]}"; do labels+=("//fuzz:$t"); done
if ! fuzz_bazel build --config=fuzz "${labels[@]}" >"$build_log" 2>&1; then
  grep -v "Cannot export local symbol" "$build_log" | tail -40 >&2
  rows=()
  for t in "${targets[@]}"; do
    echo "fuzz: FAIL $t (build failed, log: $build_log)"
    rows+=("$t" FAIL "build failed" "$build_log")
  done
  write_junit "${rows[@]}"
  exit 1
fi
bin=$(fuzz_bazel info --config=fuzz bazel-bin 2>/dev/null)/fuzz

# Fail loudly instead of recovering; print UBSan's stack; symbolize with LLVM 14's symbolizer.
if [ -z "${ASAN_SYMBOLIZER_PATH:-}" ] && [ -x /usr/lib/llvm-14/bin/llvm-symbolizer ]; then
  export ASAN_SYMBOLIZER_PATH=/usr/lib/llvm-14/bin/llvm-symbolizer
fi
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=0:detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

# What a failed run's log says it found.
finding_in() {
  for pattern in "libFuzzer: timeout" "libFuzzer: out-of-memory" "LeakSanitizer" \
                 "AddressSanitizer" "runtime error" "FUZZ_CHECK failed" "libFuzzer: deadly signal"; do
    if grep -q "$pattern" "$1"; then echo "$pattern"; return; fi
  done
  echo "exit $2"
}

limits=(-timeout=10 -rss_limit_mb=2048)

if [ -n "$crashes" ]; then
  still=0
  for t in "${targets[@]}"; do
    [ -d "fuzz/crashes/$t" ] || continue
    for input in "fuzz/crashes/$t"/*; do
      [ "$(basename "$input")" = README.md ] && continue
      log=$work/$t.$(basename "$input").log
      "$bin/$t" "${limits[@]}" "$input" >"$log" 2>&1
      rc=$?
      if [ $rc -eq 0 ]; then
        echo "fuzz: FIXED $t $input (move it to fuzz/corpus/$t/)"
      else
        still=1
        echo "fuzz: STILL FAILS $t $input ($(finding_in "$log" $rc)) log: $log"
      fi
    done
  done
  [ $still -eq 0 ] && rm -rf "$work"
  exit $still
fi

run_one() {
  local t=$1 log=$work/$t.log
  local corpus=$work/corpus/$t artifacts=$work/artifacts/$t/
  local -a mode
  if [ -n "$explore" ]; then
    corpus=$output_base/explore-corpus/$t
    artifacts=$output_base/explore-findings/$t/
    mode=(-max_total_time="$explore" -seed=0)
  else
    mode=(-runs="$runs" -max_total_time="$guard" -seed=1)
  fi
  mkdir -p "$corpus" "$artifacts"
  [ -f "fuzz/dict/$t.dict" ] && mode+=(-dict="fuzz/dict/$t.dict")
  # New inputs go to the first (scratch) corpus; the seeds in the repository stay untouched.
  "$bin/$t" "${mode[@]}" "${limits[@]}" -max_len="${max_len[$t]}" \
    -print_final_stats=1 -artifact_prefix="$artifacts" "$corpus" "fuzz/corpus/$t" >"$log" 2>&1
  echo $? >"$work/$t.rc"
}

start=$(date +%s)
for t in "${targets[@]}"; do
  # Two at a time: CI has two cores.
  while [ "$(jobs -rp | wc -l)" -ge 2 ]; do wait -n; done
  run_one "$t" &
done
wait

failed=0
rows=()
for t in "${targets[@]}"; do
  log=$work/$t.log
  rc=$(cat "$work/$t.rc" 2>/dev/null || echo 1)
  done_line=$(grep -E '^Done [0-9]+ runs in [0-9]+ second' "$log" | tail -1)
  if [ "$rc" -eq 0 ]; then
    n=$(echo "$done_line" | awk '{print $2}')
    s=$(echo "$done_line" | awk '{print $5}')
    echo "fuzz: PASS $t (${n:-?} runs, ${s:-?} s)"
    rows+=("$t" PASS "" "")
    continue
  fi
  failed=1
  why=$(finding_in "$log" "$rc")
  artifact=$(grep -oE "Test unit written to [^ ]+" "$log" | tail -1 | sed 's/Test unit written to //')
  echo "fuzz: FAIL $t ($why) input: ${artifact:-none} log: $log"
  grep -E "FUZZ_CHECK|ERROR:|runtime error|SUMMARY" "$log" | head -5 | sed 's/^/fuzz:   /'
  rows+=("$t" FAIL "$why" "$log")
done
write_junit "${rows[@]}"
echo "fuzz: ${#targets[@]} fuzzer(s) in $(( $(date +%s) - start )) s" >&2
if [ -n "$explore" ]; then
  echo "fuzz: explore corpus in $output_base/explore-corpus, findings in $output_base/explore-findings" >&2
fi
# Keep the logs and inputs of a failure; drop a clean run's scratch.
[ $failed -eq 0 ] && rm -rf "$work"
exit $failed
