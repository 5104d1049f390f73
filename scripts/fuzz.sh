#!/usr/bin/env bash
# Runs every fuzz target of the module for a short time (FUZZTIME, default 10s).
# Targets are found in each package's own test files, as go list sees them, so
# a new fuzz target anywhere is picked up without touching this script.
# After each target's go test output it prints "ok   fuzz NAME PKG" or
# "FAIL fuzz NAME PKG"; it exits non-zero if any target failed.
set -uo pipefail

fuzztime=${FUZZTIME:-10s}
go=${GO:-go}

# "importpath target" for every func FuzzXxx( in a package's test files.
targets=()
while read -r pkg dir files; do
  for file in $files; do
    while read -r name; do
      targets+=("$pkg $name")
    done < <(grep -hoE '^func Fuzz[A-Za-z0-9_]*\(' "$dir/$file" | sed -e 's/^func //' -e 's/($//')
  done
done < <($go list -e -f '{{.ImportPath}} {{.Dir}} {{join .TestGoFiles " "}} {{join .XTestGoFiles " "}}' ./...)

if [ ${#targets[@]} -eq 0 ]; then
  echo "fuzz: no fuzz targets found"
  exit 0
fi

status=0
for entry in "${targets[@]}"; do
  read -r pkg name <<<"$entry"
  echo "=== fuzz $name $pkg ($fuzztime)"
  if $go test -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" "$pkg"; then
    echo "ok   fuzz $name $pkg"
  else
    echo "FAIL fuzz $name $pkg"
    status=1
  fi
done
exit $status
