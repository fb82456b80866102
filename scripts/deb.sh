#!/usr/bin/env bash
# Build openlake_<version>_<arch>.deb from this tree with dpkg-deb (no debhelper needed):
# a release build with prefix /usr, `meson install` into a staging root, the host example
# config as the conffile /etc/openlake/openlake.toml, Depends from dpkg-shlibdeps, and
# deploy/deb/postinst (creates the openlake system user, runs ldconfig; the service is not
# started until you enable it).
#   scripts/deb.sh [OUT_DIR]      (default build-deb/; needs scripts/deps.sh build + dpkg-dev)
# Then, as root: apt-get install ./build-deb/openlake_*.deb
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-build-deb}
bdir=build-deb/build
stage=$PWD/build-deb/stage
if [ -f "$bdir/build.ninja" ]; then
	meson setup --reconfigure "$bdir" >/dev/null
else
	meson setup "$bdir" --prefix=/usr --buildtype=release \
		-Dsystemdunitdir=/lib/systemd/system >/dev/null
fi
ninja -C "$bdir"
rm -rf "$stage"
meson install -C "$bdir" --destdir "$stage" --no-rebuild --quiet
install -D -m 0640 "$stage/usr/share/openlake/examples/openlake.toml" \
	"$stage/etc/openlake/openlake.toml"
version=$(meson introspect --projectinfo "$bdir" |
	python3 -c 'import json, sys; print(json.load(sys.stdin)["version"])')
arch=$(dpkg --print-architecture)
# shared-library dependencies of what we ship, as Debian package names
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/debian"
printf 'Source: openlake\n\nPackage: openlake\nArchitecture: any\n' >"$tmp/debian/control"
elfs=("$stage"/usr/bin/openlaked "$stage"/usr/bin/openlake "$stage"/usr/lib/*/libopenlake.so.*.*)
deps=$(cd "$tmp" && dpkg-shlibdeps -O "${elfs[@]/#/-e}" 2>/dev/null | sed -n 's/^shlibs:Depends=//p')
[ -n "$deps" ] || { echo "scripts/deb.sh: dpkg-shlibdeps found no dependencies" >&2; exit 1; }
mkdir -p "$stage/DEBIAN"
cat >"$stage/DEBIAN/control" <<CONTROL
Package: openlake
Version: $version
Architecture: $arch
Maintainer: OpenLake developers <openlake@localhost>
Section: net
Priority: optional
Depends: $deps, adduser
Installed-Size: $(du -sk --exclude=DEBIAN "$stage" | cut -f1)
Description: S3-compatible object store and KV-cache pool for LLM inference
 openlaked serves an S3 API erasure-coded over the drives of a node and a KV-cache pool
 (DRAM + NVMe tiers) that vLLM offloads attention KV blocks to; openlake is its CLI,
 libopenlake its C client library (header and pkg-config file included).
CONTROL
echo /etc/openlake/openlake.toml >"$stage/DEBIAN/conffiles"
install -m 0755 deploy/deb/postinst deploy/deb/postrm "$stage/DEBIAN/"
mkdir -p "$out"
deb="$out/openlake_${version}_${arch}.deb"
dpkg-deb --build --root-owner-group "$stage" "$deb" >/dev/null
echo "$deb"
