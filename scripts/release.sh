#!/usr/bin/env bash
# make release: the release archives of the commit checked out (HEAD), built
# from a fresh clone of it, so a release is exactly a commit: uncommitted
# changes never reach it, its build info says modified=false, and the paths of
# this machine never reach the binaries (-trimpath).
#
# Writes into $OUT (default dist/):
#   tether_<version>_<os>_<arch>.tar.gz  one per platform in $PLATFORMS, each
#       holding the directory tether_<version>_<os>_<arch>/ with the static
#       binary tether, README.md and LICENSE (when the repository has one)
#   tether_<version>_sbom.cdx.json       CycloneDX SBOM of the module graph
#       (cyclonedx-gomod, pinned in the Makefile; platform-independent)
#   SHA256SUMS                           sha256sum of all of the above
#
# Reproducible: two runs for one commit write byte-identical files (the
# release test, e2e/release, checks it). Hence CGO_ENABLED=0, -trimpath, no
# build id, the Go environment fixed here (GOFLAGS cleared: a machine's
# GOFLAGS=-buildvcs=false would drop the commit), vcs.time (the commit's
# time) as the build date, and archives whose names are sorted, whose times
# are the commit's time, whose owner is 0:0 and whose gzip header has no name
# or time. The SBOM has no serial number or timestamp for the same reason; it
# names its generator by the hashes of the cyclonedx-gomod binary, so it is
# byte-identical where that binary is (the same pinned version built by the
# same Go: the Makefile installs it with -trimpath).
#
# The version: $VERSION when set; else the tag on HEAD (v1.2.3); else `git
# describe --tags` after the newest v* tag (v1.2.3-4-gabcdef1); with no tag
# at all, a Go pseudo-version of the commit: v0.0.0-<commit time as
# YYYYMMDDhhmmss, UTC>-<first 12 hex digits of the commit>.
set -euo pipefail

go=${GO:-go}
here=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-$here/dist}
platforms=${PLATFORMS:-linux/amd64 linux/arm64 darwin/amd64 darwin/arm64}
module=github.com/tetherdev/tether
# The SBOM generator: found on PATH (the Makefile puts .bin first).
cyclonedx=${CYCLONEDX_GOMOD:-cyclonedx-gomod}

die() { echo "release: $*" >&2; exit 1; }

command -v "$cyclonedx" >/dev/null || die "$cyclonedx not found (make deps-tools installs it into .bin/)"
rev=$(git -C "$here" rev-parse --verify HEAD^{commit})
if [ -n "$(git -C "$here" status --porcelain --untracked-files=no)" ]; then
  echo "release: note: the work tree has uncommitted changes; the release is of commit $rev without them" >&2
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/tether-release.XXXXXX")
trap 'rm -rf "$work"' EXIT
src=$work/src
git clone -q --no-checkout "$here" "$src"
git -C "$src" -c advice.detachedHead=false checkout -q --detach "$rev"

epoch=$(git -C "$src" log -1 --format=%ct "$rev")
if [ -n "${VERSION:-}" ]; then
  version=$VERSION
elif version=$(git -C "$src" describe --tags --match 'v[0-9]*' 2>/dev/null); then
  :
else
  version=v0.0.0-$(TZ=UTC0 date -d "@$epoch" +%Y%m%d%H%M%S)-${rev:0:12}
fi
# The version is part of file names and of the binary: no path separators,
# no spaces, nothing a shell or a URL would mangle.
[[ $version =~ ^[A-Za-z0-9][A-Za-z0-9._+-]*$ ]] || die "VERSION $version: use letters, digits and . _ + - only"

# The Go environment, fixed so the machine's own settings cannot change the
# bytes: GOFLAGS cleared, the default micro-architecture levels, no cgo.
export GOFLAGS= CGO_ENABLED=0 GOAMD64=v1 GOARM64=v8.0 GOTOOLCHAIN=local
ldflags="-s -w -buildid= -X $module/internal/buildinfo.version=$version"

mkdir -p "$out"
# Only what an earlier run wrote here goes: $OUT may be any directory.
rm -f "$out"/tether_*.tar.gz "$out"/tether_*_sbom.cdx.json "$out/SHA256SUMS"

extras=()
for f in LICENSE README.md; do
  [ -f "$src/$f" ] && extras+=("$f")
done

for platform in $platforms; do
  goos=${platform%/*} goarch=${platform#*/}
  name=tether_${version}_${goos}_${goarch}
  stage=$work/stage/$name
  mkdir -p "$stage"
  echo "release: $name.tar.gz"
  (cd "$src" && GOOS=$goos GOARCH=$goarch $go build -trimpath -buildvcs=true -ldflags "$ldflags" -o "$stage/tether" ./cmd/tether)
  for f in "${extras[@]}"; do cp "$src/$f" "$stage/$f"; done
  # Modes from the umask of whoever built it would differ: fixed here.
  chmod 0755 "$stage" "$stage/tether"
  for f in "${extras[@]}"; do chmod 0644 "$stage/$f"; done
  tar -C "$work/stage" --format=gnu --sort=name --mtime="@$epoch" --owner=0 --group=0 --numeric-owner \
    -cf - "$name" | gzip -9 -n >"$out/$name.tar.gz"
done

sbom=tether_${version}_sbom.cdx.json
echo "release: $sbom"
# -short-purls: the module graph is one for every platform, so no goos/goarch
# qualifiers (which would be this machine's).
(cd "$src" && "$cyclonedx" mod -json -licenses -noserial -notimestamp -short-purls -output "$out/$sbom" . 2>"$work/sbom.log") ||
  { cat "$work/sbom.log" >&2; die "the SBOM failed"; }

(cd "$out" && LC_ALL=C ls tether_*.tar.gz "$sbom" | LC_ALL=C sort | xargs sha256sum >SHA256SUMS)
echo "release: $version ($rev) in $out"
