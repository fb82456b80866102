#!/usr/bin/env bash
# Build the Debian packages from debian/ with dpkg-buildpackage -b -us -uc: openlake (daemon,
# CLI, systemd unit, /etc/openlake/openlake.toml, the openlake user), libopenlake0,
# libopenlake-dev and python3-openlake-client. It builds in a copy of the tree in a temp dir
# (the files git tracks plus the untracked ones it does not ignore; all but build*/ without
# git), since dpkg-buildpackage writes into the tree and puts the .debs beside it, then moves
# the .debs, the .buildinfo/.changes and its log (build.log) into OUT_DIR and prints the .debs'
# paths.
#   scripts/deb.sh [OUT_DIR]      (default build-deb/; `scripts/deps.sh deb` installs what it
#                                 needs: debhelper, dh-python and the build dependencies)
# DEB_BUILD_OPTIONS passes through (nocheck skips the unit tests, parallel=N); then, as root:
#   apt-get install ./build-deb/*.deb
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(realpath -m "${1:-build-deb}")
command -v dpkg-buildpackage >/dev/null && command -v dh >/dev/null || {
	echo "scripts/deb.sh: dpkg-buildpackage and debhelper are missing: run scripts/deps.sh deb" >&2
	exit 1
}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/openlake-deb.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
src=$tmp/openlake
mkdir "$src"
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	# tracked files that still exist, plus untracked ones git does not ignore
	git ls-files -z --cached --others --exclude-standard |
		while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
		tar --null -T - -cf - | tar -C "$src" -xf -
else
	tar --exclude='./build*' --exclude=./.git -cf - . | tar -C "$src" -xf -
fi
if [ -z "${DEB_BUILD_OPTIONS:-}" ] || [[ $DEB_BUILD_OPTIONS != *parallel=* ]]; then
	export DEB_BUILD_OPTIONS="${DEB_BUILD_OPTIONS:+$DEB_BUILD_OPTIONS }parallel=$(nproc)"
fi
mkdir -p "$out"
(cd "$src" && dpkg-buildpackage -b -us -uc) >"$out/build.log" 2>&1 || {
	tail -n 60 "$out/build.log" >&2
	echo "scripts/deb.sh: dpkg-buildpackage failed (the lines above end $out/build.log)" >&2
	exit 1
}
for f in "$tmp"/*.deb "$tmp"/*.buildinfo "$tmp"/*.changes; do
	mv -f "$f" "$out/"
	[[ $f != *.deb ]] || echo "$out/${f##*/}"
done
