#!/usr/bin/env bash
# Smoke-tests the images of deploy/image/build.sh (run it first): each image's container starts
# with a read-only root filesystem as nobody (65534) without capabilities, answers /healthz, gets
# ready (/readyz, gRPC health SERVING through the reverserctl image) with the test API server
# (tools/kube-sim, on the host) and Redis (the reverser-redis image, `redis-cli PING`) it needs.
# Prints one line per image and leaves no container or process behind, also on failure.
#
# Usage: deploy/image/smoke_test.sh [--archives DIR] [--junit FILE] [--timeout S] [--kube-sim BIN] [image...]
#   --archives DIR  test the exported OCI archives of DIR (build.sh --out) instead of the build
#                   store: they are loaded into a fresh temporary store (removed at the end) and
#                   each image ID must be the one DIR/images.txt recorded
#   --junit FILE    also write one JUnit result per image (tools/test.sh counts them)
#   --timeout S     how long each wait may take (default 60)
#   --kube-sim BIN  the test API server (default: bazel-bin/tools/kube-sim/kube-sim, built if missing)
#   image           a subset of: redis catalog gitworker materializer splicer reverserctl
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
args=()
kube_sim=
archives=
while [ $# -gt 0 ]; do
  case "$1" in
    --kube-sim) kube_sim=$2; shift 2 ;;
    --archives) archives=$(cd "$2" && pwd); shift 2 ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) args+=("$1"); shift ;;
  esac
done
if [ -z "$kube_sim" ]; then
  bazel build //tools/kube-sim 2>&1 | grep -E '^ERROR' >&2 || true
  kube_sim=$(bazel info bazel-bin 2>/dev/null)/tools/kube-sim/kube-sim
fi

child=
store=
cleanup() {
  if [ -n "$child" ]; then kill -TERM "$child" 2>/dev/null || true; wait "$child" 2>/dev/null || true; fi
  if [ -n "$store" ]; then
    podman rmi -a -f >/dev/null 2>&1 || true
    rm -rf "$store"
  fi
}
trap cleanup EXIT
trap 'exit 143' TERM
trap 'exit 130' INT

if [ -n "$archives" ]; then
  store=$(mktemp -d "${TMPDIR:-/tmp}/reverser-image-store.XXXXXX")
  export REVERSER_IMAGE_STATE=$store
fi
# shellcheck source=podman_env.sh
source "$root/deploy/image/podman_env.sh"
version=$(reverser_version "$root")
expect=()
if [ -n "$archives" ]; then
  [ -f "$archives/images.txt" ] || { echo "smoke_test.sh: no $archives/images.txt (build.sh --out $archives)" >&2; exit 1; }
  while read -r ref id size; do
    name=${ref#localhost/}; name=${name%%:*}
    file=$archives/$name-$version.oci.tar
    skopeo copy -q "oci-archive:$file" "containers-storage:$ref" ||
      echo "smoke_test.sh: loading $file failed" >&2
  done <"$archives/images.txt"
  expect=(--expect-ids "$archives/images.txt")
fi
python3 "$root/deploy/image/smoke_test.py" --version "$version" --kube-sim "$kube_sim" "${expect[@]}" "${args[@]}" &
child=$!
rc=0
wait "$child" || rc=$?
child=
exit $rc
