#!/usr/bin/env bash
# Runs no_outside_paths.py from Bazel's runfiles; arguments are passed on (--self-test).
exec python3 "${TEST_SRCDIR}/${TEST_WORKSPACE}/tests/hygiene/no_outside_paths.py" "$@"
