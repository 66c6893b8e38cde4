#!/usr/bin/env bash
# Runs the end-to-end suite from Bazel's runfiles (binaries, CRDs and the stack launcher).
set -euo pipefail
export REVERSER_RUNFILES="${TEST_SRCDIR}/reverser"
export HOME="${TEST_TMPDIR}"
exec python3 "${REVERSER_RUNFILES}/tests/e2e/e2e_test.py" "$@"
