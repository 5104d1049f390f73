#!/usr/bin/env bash
# make image: the OCI image of deploy/image/Containerfile, built with podman
# from the release binary for this machine's Linux architecture: the static
# binary, Debian's CA certificates (/etc/ssl/certs/ca-certificates.crt, from
# the ca-certificates package) and a non-root user, FROM scratch, so nothing
# is pulled.
#
# RELEASE_DIR: a directory make release (scripts/release.sh) wrote; without
#   it this script builds the release of HEAD for linux/<arch> alone first.
# IMAGE: the name to tag (default localhost/tether:<version>).
# CONTAINERS_CONF: podman's settings (default deploy/podman/containers.conf:
#   runc, cgroupfs, the ulimits these machines need).
#
# The image's labels and times come from the binary itself (tether version
# --json): its version, its commit, and the commit's time as the image's
# creation time (--timestamp), so one release gives one image.
# Prints the image's ID as its last line.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
export CONTAINERS_CONF=${CONTAINERS_CONF:-$here/deploy/podman/containers.conf}

die() { echo "image: $*" >&2; exit 1; }

command -v podman >/dev/null || die "podman not found (make deps installs it)"
certs=/etc/ssl/certs/ca-certificates.crt
[ -f "$certs" ] || die "$certs not found (Debian's ca-certificates package; make deps installs it)"

case $(uname -m) in
  x86_64) arch=amd64 ;;
  aarch64 | arm64) arch=arm64 ;;
  *) die "no release is built for $(uname -m)" ;;
esac

work=$(mktemp -d "${TMPDIR:-/tmp}/tether-image.XXXXXX")
trap 'rm -rf "$work"' EXIT
dist=${RELEASE_DIR:-}
if [ -z "$dist" ]; then
  dist=$work/dist
  OUT=$dist PLATFORMS=linux/$arch "$here/scripts/release.sh" >&2
fi
shopt -s nullglob
archives=("$dist"/tether_*_linux_"$arch".tar.gz)
[ ${#archives[@]} -eq 1 ] || die "want one tether_*_linux_$arch.tar.gz in $dist, found ${#archives[@]}"

ctx=$work/context
mkdir -p "$ctx"
tar -xzf "${archives[0]}" -C "$work" --wildcards '*/tether'
mv "$work"/tether_*_linux_"$arch"/tether "$ctx/tether"
cp "$certs" "$ctx/ca-certificates.crt"
cp "$here/deploy/image/passwd" "$here/deploy/image/group" "$ctx/"
chmod 0755 "$ctx/tether"
chmod 0644 "$ctx/ca-certificates.crt" "$ctx/passwd" "$ctx/group"

# {"version":"v1.2.3","commit":"<40 hex>","build_date":"2026-…Z",…}: read
# with the shell alone (no jq on a fresh machine).
info=$("$ctx/tether" version --json)
field() { sed -n "s/.*\"$1\":\"\([^\"]*\)\".*/\1/p" <<<"$info"; }
version=$(field version) commit=$(field commit) created=$(field build_date)
[ -n "$version" ] && [ -n "$commit" ] && [ -n "$created" ] || die "the binary does not name its version, commit and date: $info"
image=${IMAGE:-localhost/tether:$version}

echo "image: building $image ($version, $commit)" >&2
# --layers=false: one layer and no intermediate images left behind;
# --pull=never: FROM scratch needs nothing, and no registry is asked.
podman build --quiet --pull=never --no-cache --layers=false --timestamp "$(date -d "$created" +%s)" \
  --build-arg "VERSION=$version" --build-arg "REVISION=$commit" --build-arg "CREATED=$created" \
  -f "$here/deploy/image/Containerfile" -t "$image" "$ctx"
