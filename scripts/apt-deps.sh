#!/usr/bin/env bash
# Installs the Debian packages given as arguments that are not installed yet,
# plus node and npm when their commands are missing. Does nothing, quickly,
# when everything is there. As non-root it prints the command and fails.
set -euo pipefail

missing=()
for pkg in "$@"; do
  [ "$(dpkg-query -W -f='${db:Status-Abbrev}' "$pkg" 2>/dev/null)" = "ii " ] || missing+=("$pkg")
done
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)
[ ${#missing[@]} -eq 0 ] && exit 0

# Wait for a running apt/dpkg (e.g. one started at boot) instead of failing on its lock.
apt_opts=(-o DPkg::Lock::Timeout=600)
if [ "$(id -u)" -ne 0 ]; then
  echo "deps: missing Debian packages: ${missing[*]}" >&2
  echo "deps: run as root: apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y ${missing[*]}" >&2
  exit 1
fi
echo "deps: installing ${missing[*]}"
apt-get "${apt_opts[@]}" update -qq
DEBIAN_FRONTEND=noninteractive apt-get "${apt_opts[@]}" install -y -qq "${missing[@]}"
