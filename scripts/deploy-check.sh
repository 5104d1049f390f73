#!/usr/bin/env bash
# Checks the deployment files in deploy/ with the tools that read them, as
# far as this machine can (make test runs it; docs/deploy.md says what each
# covers):
#   promtool            the Prometheus alerting rules parse and are valid
#                       PromQL (check rules), and their cases in *.test.yml
#                       fire and stay quiet as written (test rules)
#   systemd-analyze     the broker's system unit and the bridge's user unit
#                       verify without a word (with this run's binary in
#                       ExecStart)
#   plistlib            the macOS launchd agent is a property list
#   go test (deploy/check, a module of its own)  the compose file through
#                       compose-go and the Kubernetes manifests strictly
#                       into their API types, and what tether needs of both
# The compose file and the manifests cannot run here (no container runtime,
# no cluster); HAProxy's configuration runs in e2e (TestDeployThreeBrokersBehindHAProxy).
# Each check prints its output, then "ok   deploy NAME" or "FAIL deploy
# NAME"; it exits non-zero if any failed.
set -uo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
go=${GO:-go}
status=0
check() {
  local name=$1
  shift
  echo "=== deploy $name: $*"
  if "$@" 2>&1; then
    echo "ok   deploy $name"
  else
    echo "FAIL deploy $name"
    status=1
  fi
}
# silent runs a command that reports trouble only by what it prints
# (systemd-analyze verify exits 0 on an unknown key or a bad value): any
# output fails it.
silent() {
  local out
  out=$("$@" 2>&1)
  local rc=$?
  [ -n "$out" ] && echo "$out"
  [ $rc -eq 0 ] && [ -z "$out" ]
}
need() {
  if ! command -v "$1" >/dev/null 2>&1; then
    echo "FAIL deploy $2: no $1 on PATH (make deps installs Debian's $3)"
    status=1
    return 1
  fi
}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

if need promtool promtool-rules prometheus; then
  shopt -s nullglob
  rules=() tests=()
  for f in "$root"/deploy/prometheus/*.yml; do
    case $f in
      *.test.yml) tests+=("$f") ;;
      *) rules+=("$f") ;;
    esac
  done
  check promtool-rules promtool check rules "${rules[@]}"
  for t in "${tests[@]}"; do
    # promtool test rules finds rule_files relative to the test file.
    check "promtool-test/$(basename "${t%.test.yml}")" bash -c 'cd "$(dirname "$1")" && promtool test rules "$(basename "$1")"' _ "$t"
  done
fi

if need systemd-analyze systemd-units systemd; then
  # ExecStart must name an executable that exists: this run's binary.
  bin=${TETHER_BIN:-$root/bin/tether}
  [ -x "$bin" ] || bin=/bin/true
  sed "s#^ExecStart=/usr/local/bin/tether #ExecStart=$bin #" "$root/deploy/systemd/tether-broker.service" >"$work/tether-broker.service"
  sed "s#^ExecStart=%h/.local/bin/tether #ExecStart=$bin #" "$root/deploy/systemd/tether-bridge.service" >"$work/tether-bridge.service"
  mkdir -m 0700 "$work/run"
  check systemd-broker-unit silent systemd-analyze verify "$work/tether-broker.service"
  check systemd-bridge-user-unit silent env XDG_RUNTIME_DIR="$work/run" systemd-analyze --user verify "$work/tether-bridge.service"
fi

if need python3 launchd-plist python3; then
  check launchd-plist python3 -c 'import plistlib, sys; d = plistlib.load(open(sys.argv[1], "rb")); assert d["Label"] and d["ProgramArguments"], d' "$root/deploy/launchd/dev.tether.bridge.plist"
fi

check compose-and-kubernetes bash -c 'cd "$1/deploy/check" && "$2" vet ./... && "$2" test -count=1 ./...' _ "$root" "$go"
exit $status
