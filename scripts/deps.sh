#!/usr/bin/env bash
# Install the Debian 12 packages OpenLake needs, by purpose, from Debian's archive only.
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
# Installs only what is missing: when everything is there it needs nothing and changes
# nothing. Installing needs root: it runs apt-get as root, through sudo when not root.
set -euo pipefail
what=${1:-all}
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
  -h | --help) sed -n '2,15p' "$0"; exit 0 ;;
  *) echo "scripts/deps.sh: unknown set '$what': use build, test, deb, deploy, bench or all" >&2; exit 2 ;;
esac
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
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
