#!/usr/bin/env bash
# Runs every test (installing what is needed first) and prints one closing line:
#   N passed, N failed
# counted from the individual test cases Bazel ran. Exit status is non-zero if any test failed.
set -uo pipefail
cd "$(dirname "$0")/.."

# Each phase's wall time goes to stderr ("test.sh: <phase> took N s"), so a slow CI run says where.
phase_start=$SECONDS
phase_done() { echo "test.sh: $1 took $((SECONDS - phase_start)) s" >&2; phase_start=$SECONDS; }

bash tools/install-deps.sh || exit 1
phase_done install

# Tests tagged manual (benchmarks) are not part of `bazel test //...`.
targets=$(bazel query 'tests(//...) except attr(tags, "manual", tests(//...))' 2>/dev/null | sort)
if [ -z "$targets" ]; then
  echo "test.sh: bazel query found no tests" >&2
  echo "0 passed, 1 failed"
  exit 1
fi

# Test results are never taken from the cache: every run really runs every test. Only what the
# tests need is built (benchmark binaries are not: `bazel build //...` covers them), which keeps a
# cold CI run within its budget on 2 cores.
bazel test --keep_going --nocache_test_results --build_tests_only "$@" //... 2>&1 | tee /tmp/reverser-test.log |
  grep -E '^(//|FAIL|ERROR|INFO: (Elapsed|Build))' || true
bazel_rc=${PIPESTATUS[0]}
phase_done "bazel test"

# Fuzzing: each libFuzzer target of //fuzz for a bounded number of inputs (clang build in its own
# output base); one result per fuzzer, counted in the closing line (no results: one failure).
fuzz_xml=/tmp/reverser-fuzz.xml
rm -f "$fuzz_xml"
bash tools/fuzz.sh --junit "$fuzz_xml" 2>&1 | tee /tmp/reverser-fuzz.log | grep -E '^fuzz: ' || true
phase_done fuzz

# Thread-safety analysis: clang's -Wthread-safety over every source with annotated locks (syntax
# only, one clang per core, over the headers the Bazel build generated); one result per source.
tsa_xml=/tmp/reverser-thread-safety.xml
rm -f "$tsa_xml"
bash tools/thread_safety.sh --junit "$tsa_xml" 2>&1 | tee /tmp/reverser-thread-safety.log |
  grep -E '^thread-safety: ' || true
phase_done thread-safety

# Container images (deploy/image): built from this build's (fastbuild) binaries, each built twice
# to prove the same inputs give the same image ID, and exported as OCI archives; the archives are
# then loaded into a fresh store (same IDs) and each image is smoke-tested (read-only, nobody, no
# capabilities: /healthz, /readyz, gRPC health, redis-cli PING). One result per image and step,
# counted in the closing line (an image that did not build fails its smoke test too).
image_build_xml=/tmp/reverser-image-build.xml
image_smoke_xml=/tmp/reverser-image-smoke.xml
rm -f "$image_build_xml" "$image_smoke_xml"
image_out=$(mktemp -d /tmp/reverser-images.XXXXXX)
# A podman store of this run's own (the chart-run step below uses its images): runs at the same
# time on one machine do not retag each other's images.
export REVERSER_IMAGE_STATE=$image_out/state
{ bash deploy/image/build.sh --compilation_mode fastbuild --check-reproducible --out "$image_out" \
    --junit "$image_build_xml"
  bash deploy/image/smoke_test.sh --archives "$image_out" --junit "$image_smoke_xml"; } 2>&1 |
  tee /tmp/reverser-image.log | grep -E '^(build.sh|image-smoke): ' || true
phase_done images

# The chart's default render (plus the quickstart mirror of run.values.yaml) run as containers
# from those images (deploy/helm/chart_run_test.py): kube-sim as the API server, a Git remote over
# HTTP, the story of two users; one result.
chart_run_xml=/tmp/reverser-chart-run.xml
rm -f "$chart_run_xml"
chart_dir=$(mktemp -d /tmp/reverser-chart.XXXXXX)
{ bash tools/chart-render/build.sh "$chart_dir/chart-render" &&
    "$chart_dir/chart-render" --include-crds -f deploy/helm/testdata/run.values.yaml deploy/helm/reverser \
      >"$chart_dir/render.yaml" &&
    "$chart_dir/chart-render" --notes -f deploy/helm/testdata/run.values.yaml deploy/helm/reverser \
      >"$chart_dir/notes.txt" &&
    python3 deploy/helm/chart_run_test.py --render "$chart_dir/render.yaml" --notes "$chart_dir/notes.txt" \
      --kube_sim "$(bazel info bazel-bin 2>/dev/null)/tools/kube-sim/kube-sim" --junit "$chart_run_xml"; } 2>&1 |
  tee /tmp/reverser-chart-run.log | grep -E '^chart-run: (passed|FAILED)' || true
rm -rf "$chart_dir"
rm -rf "$image_out"
phase_done chart-run
echo "test.sh: $SECONDS s in all" >&2

python3 tools/ci/summarize_tests.py --bazel-exit "$bazel_rc" --extra-junit "$fuzz_xml" \
  --extra-junit "$tsa_xml" --extra-junit "$image_build_xml" --extra-junit "$image_smoke_xml" \
  --extra-junit "$chart_run_xml" \
  "$(bazel info bazel-testlogs 2>/dev/null)" $targets
summary_rc=$?
if [ $bazel_rc -ne 0 ] || [ $summary_rc -ne 0 ]; then exit 1; fi
exit 0
