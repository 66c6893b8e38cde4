#!/usr/bin/env bash
# Installs the Debian 12 packages reverser needs to build, test and run its local stack.
# Idempotent: when everything is installed it returns at once without touching apt.
set -euo pipefail

packages=(
  g++ pkg-config git python3 ca-certificates openssl curl
  bazel-bootstrap
  libcaf-dev libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libgit2-dev libhiredis-dev libabsl-dev libgtest-dev libgmock-dev
  libcpp-httplib-dev nlohmann-json3-dev libsimdjson-dev libyaml-cpp-dev libssl-dev libre2-dev
  redis-server python3-kubernetes python3-yaml age openssh-server openssh-client
  # tools/chart-render (renders deploy/helm/reverser without helm): Go and its libraries.
  golang-go golang-github-masterminds-sprig-dev golang-k8s-sigs-yaml-dev golang-gopkg-yaml.v3-dev
  golang-github-xeipuuv-gojsonschema-dev
  # Fuzzing (tools/fuzz.sh): clang with the libFuzzer, ASan and UBSan runtimes
  # (libclang-rt-14-dev), libFuzzer itself (libfuzzer-14-dev) and llvm-symbolizer (llvm-14).
  clang-14 libclang-rt-14-dev libfuzzer-14-dev llvm-14
  # bench/runtime only: the metrics registry measured against prometheus-cpp.
  prometheus-cpp-dev
  # Container images (deploy/image): podman (its `build` is buildah's library) with runc, as crun
  # refuses this kind of VM's cgroup layout, and skopeo to export and push.
  podman skopeo runc
  # The chart-run test (deploy/helm/chart_run_test.py): container DNS on a private network;
  # netavark sets the bridge up with iptables ("netavark: No such file or directory" without it).
  netavark aardvark-dns iptables
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}" >&2
  if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# kubectl binaries (1.27..1.33) are used by the end-to-end tests when present; they are not
# Debian packages. Say so instead of failing: the tests that need them report it.
if ! command -v kubectl >/dev/null 2>&1; then
  echo "install-deps: note: no kubectl on PATH; kubectl-driven tests will fail" >&2
fi
