#!/usr/bin/env bash
# Build the fluxgo .deb with dpkg-deb: build.sh BINARY OUTDIR [VERSION].
# Prints the path of the package it wrote. Needs only dpkg-deb (Debian's
# dpkg package); installs nothing.
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 BINARY OUTDIR [VERSION]" >&2; exit 2; }
bin=$1 out=$2 version=${3:-}
root=$(cd "$(dirname "$0")/../.." && pwd)
pkg=$root/packaging
command -v dpkg-deb >/dev/null || { echo "$0: dpkg-deb not found (apt-get install dpkg)" >&2; exit 1; }
[ -x "$bin" ] || { echo "$0: $bin: not an executable" >&2; exit 1; }

# A Debian version starts with a digit: git describe's v1.2.3-4-gabc
# becomes 1.2.3-4-gabc, a bare commit 0.0~gitabc
if [ -z "$version" ]; then
	version=$(git -C "$root" describe --tags --always --dirty 2>/dev/null || echo 0.1.0)
fi
version=${version#v}
case $version in
[0-9]*) ;;
*) version=0.0~git$version ;;
esac

"$bin" version >/dev/null 2>&1 || { echo "$0: $bin does not run here" >&2; exit 1; }
arch=${DEB_ARCH:-$(go env GOARCH 2>/dev/null || dpkg --print-architecture)}

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
d=$stage/root
install -D -m 0755 "$bin" "$d/usr/bin/flux"
install -D -m 0644 "$pkg/flux.service" "$d/usr/lib/systemd/system/flux.service"
install -D -m 0644 "$pkg/conf.d/system.toml" "$d/etc/flux/system/conf.d/system.toml"
# the Python package, where flux python looks for it (PREFIX/lib/fluxgo/python)
(cd "$root/python" && find flux -name '*.py' -not -path '*/__pycache__/*') | while read -r f; do
	install -D -m 0644 "$root/python/$f" "$d/usr/lib/fluxgo/python/$f"
done
for doc in SITE.md CLUSTER.md ACCOUNTING.md ARCHIVE.md LIMITS.md; do
	install -D -m 0644 "$root/docs/$doc" "$d/usr/share/doc/flux/$doc"
done
install -D -m 0644 "$root/README.md" "$d/usr/share/doc/flux/README.md"

install -d -m 0755 "$d/DEBIAN"
size=$(du -sk --exclude=DEBIAN "$d" | cut -f1)
sed -e "s/@VERSION@/$version/" -e "s/@ARCH@/$arch/" -e "s/@SIZE@/$size/" \
	"$pkg/deb/control.in" >"$d/DEBIAN/control"
echo /etc/flux/system/conf.d/system.toml >"$d/DEBIAN/conffiles"
for s in postinst prerm postrm; do
	install -m 0755 "$pkg/deb/$s" "$d/DEBIAN/$s"
done

mkdir -p "$out"
deb=$out/flux_${version}_${arch}.deb
# xz at level 3: a third of level 6's CPU time for a package 10% larger;
# DEB_COMPRESS=gzip (the tests) takes a fifth of that again
dpkg-deb --root-owner-group -Z"${DEB_COMPRESS:-xz}" -z3 --build "$d" "$deb" >/dev/null
echo "$deb"
