#!/usr/bin/env bash
# Runs an end-to-end suite (default: e2e_test.py) from Bazel's runfiles (binaries, CRDs and the
# stack launcher).
set -euo pipefail
export REVERSER_RUNFILES="${TEST_SRCDIR}/reverser"
export HOME="${TEST_TMPDIR}"
suite="${1:-e2e_test.py}"
exec python3 "${REVERSER_RUNFILES}/tests/e2e/${suite}"
