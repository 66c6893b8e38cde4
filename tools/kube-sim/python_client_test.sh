#!/bin/bash
# Starts kube-sim and runs python_client_test.py with Debian's python3 (python3-kubernetes).
set -euo pipefail
SIM="$1"; SCRIPT="$2"
WORK="$(mktemp -d "${TEST_TMPDIR:-/tmp}/py.XXXXXX")"
"$SIM" --port=0 --port-file="$WORK/port" 2>"$WORK/sim.log" &
SIM_PID=$!
trap 'kill -TERM $SIM_PID 2>/dev/null; wait $SIM_PID || true' EXIT
for _ in $(seq 1 500); do [[ -s "$WORK/port" ]] && break; sleep 0.02; done
[[ -s "$WORK/port" ]] || { cat "$WORK/sim.log"; exit 1; }
/usr/bin/python3 "$SCRIPT" "http://127.0.0.1:$(cat "$WORK/port")" -v
