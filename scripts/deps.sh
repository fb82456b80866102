#!/usr/bin/env bash
# Install what OpenLake needs to build, run and test, from Debian 12's packages only.
# Safe to run again: it installs only what is missing. Needs root (or sudo).
set -euo pipefail
PKGS=(
  # build
  build-essential pkg-config meson ninja-build clang
  liburing-dev libisal-dev liblmdb-dev libexpat1-dev libssl-dev libxxhash-dev libjansson-dev libzstd-dev liblz4-dev
  # tests: real S3 clients and Python
  python3 python3-pytest python3-boto3 python3-numpy python3-torch python3-prometheus-client python3-setuptools python3-pip
  awscli s3cmd rclone curl ca-certificates procps iproute2
  # benchmarks' references
  redis-server memcached fio wrk nginx-light zstd lz4
)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
echo "installing: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
