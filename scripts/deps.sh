#!/usr/bin/env bash
# Install the Debian 12 packages OpenLake needs, by purpose, from Debian's archive (and, for one
# test, s3rver from the npm registry: below).
#   scripts/deps.sh build   compiler, meson, the -dev libraries: build and run openlaked
#                           (what scripts/run.sh installs)
#   scripts/deps.sh test    build + real S3 clients, Python test packages, etcd, clang for the
#                           fuzz targets (what scripts/test.sh installs)
#   scripts/deps.sh deb     build + what `dpkg-buildpackage` needs for debian/ (debhelper,
#                           dh-python, ...) and lintian: scripts/deb.sh, test_deb.py
#   scripts/deps.sh deploy  build + Go with sprig and yaml.v3: test_deploy.py renders the Helm
#                           chart with them (tests/helm_render) where helm is not installed
#   scripts/deps.sh bench   test + the benchmarks' references (redis, memcached, nginx, fio,
#                           wrk, zstd, lz4); their services are NOT started by the install
#   scripts/deps.sh all     all of the above (the default, as before)
# test, bench and all also put s3rver (the npm registry's S3 server, pinned) into .deps/ of the
# repository: tests/integration/test_s3_other_server.py runs libopenlake's S3 client and
# `openlake cp` against it, a second S3 implementation; node and npm come from Debian where
# npm is not there. Without the registry that test skips s3rver, saying why.
# Installs only what is missing: when everything is there it needs nothing and changes
# nothing. Installing needs root: it runs apt-get as root, through sudo when not root.
set -euo pipefail
what=${1:-all}
REPO=$(cd "$(dirname "$0")/.." && pwd)
S3RVER=s3rver@3.7.1
BUILD=(
  build-essential pkg-config meson ninja-build python3
  liburing-dev libisal-dev liblmdb-dev libexpat1-dev libssl-dev libxxhash-dev libzstd-dev
  liblz4-dev libjansson-dev libucx-dev libhwloc-dev
)
TEST=(
  clang
  python3-pytest python3-pytest-xdist python3-boto3 python3-numpy python3-torch python3-prometheus-client
  python3-setuptools python3-pip python3-venv
  awscli s3cmd rclone curl ca-certificates procps iproute2 nftables
  etcd-server etcd-client
  chromium chromium-driver python3-selenium
)
# debian/control's Build-Depends beyond BUILD, plus lintian to check the result
DEB=(debhelper dh-python python3-all python3-setuptools dpkg-dev fakeroot pkgconf lintian)
DEPLOY=(golang-go golang-github-masterminds-sprig-dev golang-gopkg-yaml.v3-dev)
BENCH=(redis-server memcached fio wrk nginx-light zstd lz4)
case $what in
  build) PKGS=("${BUILD[@]}") ;;
  test) PKGS=("${BUILD[@]}" "${TEST[@]}") ;;
  deb) PKGS=("${BUILD[@]}" "${DEB[@]}") ;;
  deploy) PKGS=("${BUILD[@]}" "${DEPLOY[@]}") ;;
  bench | all) PKGS=("${BUILD[@]}" "${TEST[@]}" "${DEB[@]}" "${DEPLOY[@]}" "${BENCH[@]}") ;;
  -h | --help) sed -n '2,/^set -euo/{/^#/p}' "$0"; exit 0 ;;
  *) echo "scripts/deps.sh: unknown set '$what': use build, test, deb, deploy, bench or all" >&2; exit 2 ;;
esac
want_s3rver=0
case $what in test | bench | all) want_s3rver=1 ;; esac
if [ $want_s3rver -eq 1 ] && ! command -v npm >/dev/null; then
  PKGS+=(nodejs npm)
fi
# s3rver_install: $S3RVER into .deps/s3rver unless it is there; a failure only warns
s3rver_install() {
  local dir=$REPO/.deps/s3rver
  [ $want_s3rver -eq 1 ] && [ ! -x "$dir/node_modules/.bin/s3rver" ] || return 0
  if ! command -v npm >/dev/null; then
    echo "scripts/deps.sh: no npm: test_s3_other_server.py will skip s3rver" >&2
    return 0
  fi
  echo "installing $S3RVER (npm) into $dir"
  mkdir -p "$dir"
  npm install --no-audit --no-fund --prefix "$dir" "$S3RVER" >"$dir/npm.log" 2>&1 || {
    echo "scripts/deps.sh: npm could not install $S3RVER (log: $dir/npm.log):" \
      "test_s3_other_server.py will skip s3rver" >&2
  }
}
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  s3rver_install
  exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || {
    echo "scripts/deps.sh: missing packages: ${missing[*]}; installing them needs root:" \
      "run this script as root, or install them with apt-get" >&2
    exit 1
  }
  SUDO=sudo
fi
echo "installing: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# The benchmarks' references (redis, memcached, nginx) are servers that Debian starts on
# install (nginx on port 80): a policy-rc.d that says "no" keeps them stopped; the bench
# scripts start their own instances on free loopback ports.
policy=/usr/sbin/policy-rc.d
added_policy=0
if [ ! -e $policy ]; then
  printf '#!/bin/sh\nexit 101\n' | $SUDO tee $policy >/dev/null
  $SUDO chmod 755 $policy
  added_policy=1
fi
cleanup() { [ $added_policy -eq 0 ] || $SUDO rm -f $policy; }
trap cleanup EXIT
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
s3rver_install
