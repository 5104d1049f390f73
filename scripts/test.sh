#!/usr/bin/env bash
# make test's runner: the whole suite under -race, then every fuzz target for a
# short time, then a recap that ends the output with go test's package lines
# and one "summary: N passed, N failed" line, so a long run's result is the
# last thing on screen (and in CI's log). Exits non-zero if anything failed.
set -uo pipefail

go=${GO:-go}
log=$(mktemp -d)
trap 'rm -rf "$log"' EXIT

status=0
echo "=== go test -race -count=1 -timeout 30m ./..."
$go test -race -count=1 -timeout 30m ./... 2>&1 | tee "$log/test" || status=1
echo
"$(dirname "$0")/fuzz.sh" 2>&1 | tee "$log/fuzz" || status=1

# go test's package lines ("ok  <pkg> 1.2s", "FAIL <pkg> [build failed]"; not
# the bare closing "FAIL") and one verdict line per fuzz target.
grep -E '^(ok|FAIL)[[:space:]]+[^[:space:]]' "$log/test" >"$log/packages" || true
grep -E '^(ok|FAIL) +fuzz ' "$log/fuzz" >"$log/fuzzed" || true
passed=$(cat "$log/packages" "$log/fuzzed" | grep -c '^ok')
failed=$(cat "$log/packages" "$log/fuzzed" | grep -c '^FAIL')
[ "$status" -eq 0 ] || [ "$failed" -gt 0 ] || failed=1

echo
echo "=== recap"
grep -E '^--- FAIL' "$log/test" || true
cat "$log/fuzzed" "$log/packages"
echo "summary: $passed passed, $failed failed"
exit $status
