#!/usr/bin/env bash
# make test's runner: the whole suite under -race, the broker's packages
# without -race, the e2e suite with every hand-tuned piece off, the release
# and image tests alone (e2e/release: make release twice, make image), then
# every fuzz target for a short time, then the cross-checks for macOS and
# Windows (scripts/cross.sh: compiled and vetted, not run), then the
# deployment files (scripts/deploy-check.sh: promtool, systemd-analyze, the
# compose file and Kubernetes manifests through their own loaders), then a
# recap that ends the output with go test's package lines and one
# "summary: N passed, N failed" line, so a long run's result is the last
# thing on screen (and in CI's log). Exits non-zero if anything failed.
set -uo pipefail

go=${GO:-go}
log=$(mktemp -d)
trap 'rm -rf "$log"' EXIT

status=0
echo "=== go test -race -count=1 -timeout 30m -v ./... (results and failures shown; every test counted)"
# -v so every test's verdict can be counted; only package results, failures
# and panics reach the screen.
$go test -race -count=1 -timeout 30m -v ./... >"$log/test" 2>&1 || status=1
grep -E '^(ok|FAIL|panic:|[[:space:]]*--- FAIL)' "$log/test" || true
if [ "$status" -ne 0 ]; then
  echo "--- output of failing tests:"
  grep -B40 -A5 -E '^[[:space:]]*--- FAIL|^panic:' "$log/test" | tail -400
fi
# Two more passes over what the -race run cannot show. The broker's packages
# without -race: a race build leaves connections as net makes them
# (internal/rawnet), so only this pass runs the broker's raw system calls
# in its own tests. The e2e suite with every hand-tuned piece off
# (TETHER_TUNING=off, internal/tuning): the plain ways stay working.
echo "=== go test -count=1 -v ./broker/... (no -race: the raw-syscall path)"
$go test -count=1 -timeout 20m -v ./broker/... >"$log/test-norace" 2>&1 || status=1
grep -E '^(ok|FAIL|panic:|[[:space:]]*--- FAIL)' "$log/test-norace" || true
# One package at a time (-p 1): with every piece off the broker spends
# more CPU per call, and the e2e tests' time bounds (a stalled client must
# not hold others up for more than 2.5 s) are for the suite's usual load,
# not for the chaos package's brokers running beside it.
echo "=== TETHER_TUNING=off go test -p 1 -count=1 -v ./e2e/... (every hand-tuned piece off)"
TETHER_TUNING=off $go test -p 1 -count=1 -timeout 30m -v ./e2e/... >"$log/test-plain" 2>&1 || status=1
grep -E '^(ok|FAIL|panic:|[[:space:]]*--- FAIL)' "$log/test-plain" || true
# The release and image tests skip in the passes above (without
# TETHER_RELEASE_TEST): their cross builds and podman would take both cores
# from the time-bounded tests beside them. Here they run alone, without
# -race (they check scripts and binaries, not concurrent Go code).
echo "=== TETHER_RELEASE_TEST=1 go test -count=1 -v ./e2e/release/ (make release twice, make image)"
TETHER_RELEASE_TEST=1 $go test -count=1 -timeout 20m -v ./e2e/release/ >"$log/test-release" 2>&1 || status=1
grep -E '^(ok|FAIL|panic:|[[:space:]]*--- FAIL)' "$log/test-release" || true
for pass in test-norace test-plain test-release; do
  if grep -qE '^[[:space:]]*--- FAIL|^panic:|^FAIL' "$log/$pass"; then
    echo "--- output of failing tests ($pass):"
    grep -B40 -A5 -E '^[[:space:]]*--- FAIL|^panic:' "$log/$pass" | tail -300
    # What the tests themselves said (file:line: message), which a long
    # log tail after the failure can push out of the window above.
    echo "--- test messages ($pass):"
    grep -E '^[[:space:]]+[A-Za-z0-9_]+_test\.go:[0-9]+: ' "$log/$pass" | grep -v 'last lines)' | tail -40
  fi
done
cat "$log/test-norace" "$log/test-plain" "$log/test-release" >>"$log/test"

echo
"$(dirname "$0")/fuzz.sh" 2>&1 | tee "$log/fuzz" || status=1

echo
"$(dirname "$0")/cross.sh" 2>&1 | tee "$log/cross" || status=1

echo
"$(dirname "$0")/deploy-check.sh" 2>&1 | tee "$log/deploy" || status=1

# go test's package lines ("ok  <pkg> 1.2s", "FAIL <pkg> [build failed]"; not
# the bare closing "FAIL") and one verdict line per fuzz target, per
# cross-check and per deployment check.
grep -E '^(ok|FAIL)[[:space:]]+[^[:space:]]' "$log/test" >"$log/packages" || true
grep -E '^(ok|FAIL) +fuzz ' "$log/fuzz" >"$log/verdicts" || true
grep -E '^(ok|FAIL) +cross ' "$log/cross" >>"$log/verdicts" || true
grep -E '^(ok|FAIL) +deploy ' "$log/deploy" >>"$log/verdicts" || true
# Every test and subtest verdict, plus one per fuzz target, cross-check and
# deployment check.
passed=$(( $(grep -cE '^[[:space:]]*--- PASS' "$log/test") + $(grep -c '^ok' "$log/verdicts") ))
failed=$(( $(grep -cE '^[[:space:]]*--- FAIL' "$log/test") + $(grep -c '^FAIL' "$log/verdicts") ))
[ "$status" -eq 0 ] || [ "$failed" -gt 0 ] || failed=1

echo
echo "=== recap"
grep -E '^--- FAIL' "$log/test" || true
cat "$log/verdicts" "$log/packages"
echo "summary: $passed passed, $failed failed"
exit $status
