#!/bin/bash
# Builds chart-render with Debian's Go 1.19 and its packaged libraries (GOPATH mode, offline):
#   tools/chart-render/build.sh OUT
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=${1:?usage: build.sh OUT}
if ! command -v go >/dev/null; then
  echo "chart-render: no go on PATH (tools/install-deps.sh installs golang-go and the Go libraries)" >&2
  exit 1
fi
export GOPATH=/usr/share/gocode GO111MODULE=off GOFLAGS= GOPROXY=off GOENV=off GOTOOLCHAIN=local
export GOCACHE=${GOCACHE:-${TEST_TMPDIR:-${TMPDIR:-/tmp}}/chart-render-gocache}
go build -o "$out" "$here/main.go"
