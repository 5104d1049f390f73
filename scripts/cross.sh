#!/usr/bin/env bash
# Compiles and vets tether for the platforms CI cannot run (docs/platforms.md):
# macOS (darwin/arm64, darwin/amd64) and Windows (windows/amd64). go vet
# type-checks the test files too, so a Linux-only call (Pdeathsig, /proc
# parsing through Linux-only constants, TCGETS) cannot slip back in
# unnoticed anywhere. Each check prints its go output, then
# "ok   cross NAME" or "FAIL cross NAME"; it exits non-zero if any failed.
#
# Windows builds the broker and the clients only (the bridge runs inside
# WSL there): tether itself, and a vet of the module's packages that
# cmd/tether is built from on Windows, as go list -deps finds them, so a
# package that joins the Windows build is vetted without touching this
# script.
set -uo pipefail

go=${GO:-go}
module=$($go list -m)

status=0
# check NAME GOOS GOARCH COMMAND...: one check, its verdict line. The
# header shows the command as $shown says, when set (a long package list).
shown=
check() {
  local name=$1 goos=$2 goarch=$3
  shift 3
  echo "=== cross $name: GOOS=$goos GOARCH=$goarch ${shown:-$*}"
  if GOOS=$goos GOARCH=$goarch "$@" 2>&1; then
    echo "ok   cross $name"
  else
    echo "FAIL cross $name"
    status=1
  fi
}

check darwin/arm64-vet darwin arm64 $go vet ./...
check darwin/amd64-build darwin amd64 $go build ./...
check darwin/amd64-vet darwin amd64 $go vet ./...
check windows/amd64-build windows amd64 $go build -o /dev/null ./cmd/tether
# -e: a package that fails to load is still listed, and the vet names why.
mapfile -t winpkgs < <(GOOS=windows GOARCH=amd64 $go list -e -deps ./cmd/tether | grep -E "^$module(/|\$)")
shown="$go vet (the ${#winpkgs[@]} packages of this module that cmd/tether is built from)"
check windows/amd64-vet windows amd64 $go vet "${winpkgs[@]}"
exit $status
