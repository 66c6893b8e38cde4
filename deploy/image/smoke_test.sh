#!/usr/bin/env bash
# Smoke-tests the images of deploy/image/build.sh (run it first): each image's container starts
# with a read-only root filesystem as nobody (65534) without capabilities, answers /healthz, gets
# ready (/readyz, gRPC health SERVING through the reverserctl image) with the test API server
# (tools/kube-sim, on the host) and Redis (the reverser-redis image, `redis-cli PING`) it needs.
# Prints one line per image and leaves no container or process behind, also on failure.
#
# Usage: deploy/image/smoke_test.sh [--junit FILE] [--timeout S] [--kube-sim BIN] [image...]
#   --junit FILE    also write one JUnit result per image (tools/test.sh counts them)
#   --timeout S     how long each wait may take (default 60)
#   --kube-sim BIN  the test API server (default: bazel-bin/tools/kube-sim/kube-sim, built if missing)
#   image           a subset of: redis catalog gitworker materializer splicer reverserctl
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
args=()
kube_sim=
while [ $# -gt 0 ]; do
  case "$1" in
    --kube-sim) kube_sim=$2; shift 2 ;;
    -h|--help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) args+=("$1"); shift ;;
  esac
done
# shellcheck source=podman_env.sh
source "$root/deploy/image/podman_env.sh"
version=$(reverser_version "$root")
if [ -z "$kube_sim" ]; then
  bazel build //tools/kube-sim 2>&1 | grep -E '^ERROR' >&2 || true
  kube_sim=$(bazel info bazel-bin 2>/dev/null)/tools/kube-sim/kube-sim
fi
exec python3 "$root/deploy/image/smoke_test.py" --version "$version" --kube-sim "$kube_sim" "${args[@]}"
