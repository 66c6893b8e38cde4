#!/bin/bash
# chart-render's unit tests (main_test.go), with Debian's Go in GOPATH mode, offline.
set -euo pipefail
export GOPATH=/usr/share/gocode GO111MODULE=off GOFLAGS= GOPROXY=off GOENV=off GOTOOLCHAIN=local
export GOCACHE="$TEST_TMPDIR/gocache"
command -v go >/dev/null || { echo "no go on PATH (tools/install-deps.sh installs golang-go)"; exit 1; }
# go test wants the package's files in one real folder.
mkdir -p "$TEST_TMPDIR/src"
cp tools/chart-render/main.go tools/chart-render/main_test.go "$TEST_TMPDIR/src/"
cd "$TEST_TMPDIR/src"
go test -v . 2>&1
