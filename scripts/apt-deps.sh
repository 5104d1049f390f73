#!/usr/bin/env bash
# Installs the Debian packages given as arguments that are not installed yet,
# plus node and npm when their commands are missing. Does nothing, quickly,
# when everything is there. As non-root it prints the command and fails.
#
# Two packages are wanted for a tool, not for the server they start:
# Debian's prometheus for promtool (make test checks deploy/prometheus with
# it), whose install enables a Prometheus server on port 9090 of every
# address and recommends the node exporter, smartd and a row of collector
# timers; and haproxy, which e2e/deploy_test.go runs itself, whose install
# enables a haproxy service. So they come without their recommends, and
# where systemd runs, the services this run installed are stopped and
# disabled again; a package that was installed before is left alone.
set -euo pipefail

no_recommends=(prometheus haproxy)

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
plain=() bare=()
for pkg in "${missing[@]}"; do
  if [[ " ${no_recommends[*]} " == *" $pkg "* ]]; then bare+=("$pkg"); else plain+=("$pkg"); fi
done
apt-get "${apt_opts[@]}" update -qq
[ ${#plain[@]} -eq 0 ] || DEBIAN_FRONTEND=noninteractive apt-get "${apt_opts[@]}" install -y -qq "${plain[@]}"
if [ ${#bare[@]} -gt 0 ]; then
  DEBIAN_FRONTEND=noninteractive apt-get "${apt_opts[@]}" install -y -qq --no-install-recommends "${bare[@]}"
  # Only where systemd runs; elsewhere (a container) nothing was started.
  if [ -d /run/systemd/system ]; then
    for pkg in "${bare[@]}"; do
      echo "deps: $pkg is here for its tools; stopping and disabling its service"
      systemctl disable --now "$pkg.service" || true
    done
  fi
fi
