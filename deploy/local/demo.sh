#!/usr/bin/env bash
# The README's main command: builds reverser, starts the local stack (Redis, the test API
# server auditing to the materializer over mTLS, the four services, a local bare Git remote), runs
# a short story with kubectl as two users, and prints the resulting git log with authors and the
# measured change -> commit latency. Everything runs on loopback in a temporary directory and is
# torn down on exit.
#
#   bash deploy/local/demo.sh            run the story, print, tear down
#   bash deploy/local/demo.sh --keep     keep the stack running afterwards (prints how to use it)
#   bash deploy/local/demo.sh --attribution=admission   no audit webhook: authors from admission
set -euo pipefail
cd "$(dirname "$0")/../.."

case "${1:-}" in
  -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
esac

bash tools/install-deps.sh
echo "==> building (bazel)"
if ! bazel build //services/... //tools/kube-sim:kube-sim //tools/reverserctl >/tmp/reverser-demo-build.log 2>&1; then
  cat /tmp/reverser-demo-build.log >&2
  exit 1
fi
exec python3 deploy/local/stack.py --bin-dir "$(bazel info bazel-bin 2>/dev/null)" "$@"
