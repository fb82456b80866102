#!/usr/bin/env bash
# One command from a fresh Debian 12 machine to a running openlaked on its embedded default:
# S3 on 127.0.0.1:9000, KV pool on 127.0.0.1:9400, admin listener (/metrics, health, console) on
# 127.0.0.1:9001, drives under ./data (created). Arguments go to openlaked.
# It installs only what building and running need (scripts/deps.sh build: compiler, meson,
# -dev libraries); the test and benchmark packages belong to scripts/test.sh and bench/.
# Root is needed only to install missing packages (through sudo when not root); building and
# running need none.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh build
scripts/build.sh build
exec ./build/cmd/openlaked/openlaked "$@"
