#!/usr/bin/env bash
# Checks the Prometheus alerting rules in deploy/prometheus with promtool
# (Debian's prometheus package, installed by make deps): every rule file
# parses and its expressions are valid PromQL (promtool check rules), and
# the cases in *.test.yml fire and stay quiet as they say (promtool test
# rules). Each check prints promtool's output, then "ok   promtool NAME" or
# "FAIL promtool NAME"; it exits non-zero if any failed.
set -uo pipefail

cd "$(dirname "$0")/../deploy/prometheus" || exit 1
status=0
check() {
  local name=$1
  shift
  echo "=== promtool $name: $*"
  if "$@" 2>&1; then
    echo "ok   promtool $name"
  else
    echo "FAIL promtool $name"
    status=1
  fi
}

if ! command -v promtool >/dev/null 2>&1; then
  echo "FAIL promtool installed: no promtool on PATH (make deps installs Debian's prometheus package, which has it)"
  exit 1
fi
shopt -s nullglob
rules=() tests=()
for f in *.yml; do
  case $f in
    *.test.yml) tests+=("$f") ;;
    *) rules+=("$f") ;;
  esac
done
check check-rules promtool check rules "${rules[@]}"
for t in "${tests[@]}"; do
  check "test-rules/${t%.test.yml}" promtool test rules "$t"
done
exit $status
